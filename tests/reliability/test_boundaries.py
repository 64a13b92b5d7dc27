"""One regression test per kind of bad input at the model-file boundary: each ends in one
line that names the file and the problem, quickly, and nothing is allocated for it."""

import json
import os
import struct
import subprocess
import sys

import pytest
import torch

from explorer.core.weights.checkpoints import CheckpointError, load_checkpoint, save_checkpoint
from explorer.core.gpt.config import preset
from explorer.core.gpt.build import build_model

pytestmark = pytest.mark.slow  # the whole module: ./test.sh -m "not slow" leaves it out


@pytest.fixture
def tiny_file(tmp_path):
    return save_checkpoint(build_model(preset("tiny"), seed=3), tmp_path / "tiny.safetensors")


def on_a_thread(fn, wait_s: float = 120.0):
    """What ``fn`` returns or raises, run on a thread; the test fails (instead of hanging)
    when it has not ended after ``wait_s``, far above a loaded machine's worst."""
    import threading
    out = []

    def run():
        try:
            out.append(fn())
        except Exception as exc:  # noqa: BLE001 - the answer under test
            out.append(exc)
    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(wait_s)
    assert out, f"still waiting after {wait_s:.0f} s"
    return out[0]


def safetensors_with(path, header: dict, data: bytes = b"") -> str:
    raw = json.dumps(header).encode()
    path.write_bytes(struct.pack("<Q", len(raw)) + raw + data)
    return str(path)


def test_a_fifo_is_refused_without_waiting(tmp_path):
    fifo = tmp_path / "model.pth"
    os.mkfifo(fifo)
    refused = on_a_thread(lambda: load_checkpoint(fifo))  # an open() would wait for a writer
    assert isinstance(refused, CheckpointError)
    assert "a FIFO (named pipe), not a checkpoint" in str(refused)
    os.mkfifo(tmp_path / "config.json")  # beside a real file: named, never waited on
    wide = preset("tiny", emb_dim=64, n_heads=1)  # GPT-2's head size: no config needed
    torch.save(build_model(wide).state_dict(), tmp_path / "book.pth")
    refused = on_a_thread(lambda: load_checkpoint(tmp_path / "book.pth"))
    assert isinstance(refused, CheckpointError)
    assert "config.json: a FIFO (named pipe)" in str(refused) and "cannot be read" in str(refused)


def book_pth(tmp_path, sd, name="model.pth"):
    """A state dict saved as the book does, with the book's config beside it."""
    torch.save(sd, tmp_path / name)
    (tmp_path / "config.json").write_text(json.dumps({"n_heads": 4}))
    return tmp_path / name


def test_expanded_tensors_are_refused(tmp_path):
    sd = build_model(preset("tiny")).state_dict()
    sd["tok_emb.weight"] = torch.zeros(1, 32).expand(50257, 32)  # stride 0: 128 bytes
    with pytest.raises(CheckpointError, match="'tok_emb.weight' is an expanded view"):
        load_checkpoint(book_pth(tmp_path, sd))


@pytest.mark.parametrize("dtype", [torch.int64, torch.float8_e4m3fn])
def test_weights_of_an_unusable_dtype_are_refused(tmp_path, dtype):
    sd = build_model(preset("tiny")).state_dict()
    sd["trf_blocks.0.norm1.scale"] = sd["trf_blocks.0.norm1.scale"].to(dtype)
    with pytest.raises(CheckpointError, match="'trf_blocks.0.norm1.scale' has dtype"):
        load_checkpoint(book_pth(tmp_path, sd))


def test_a_config_that_declares_100000_layers_is_refused_at_once(tiny_file, tmp_path, monkeypatch):
    from explorer.core.weights import checkpoints, keymaps
    from safetensors.torch import load_file, save_file
    tensors = load_file(str(tiny_file))
    for layers, message in ((100_000, "n_layers must be at most 1,024, got 100,000"),
                            (900, "the config says 900 layers but the weights have 2")):
        cfg = dict(preset("tiny").to_dict(), n_layers=layers)
        path = tmp_path / f"{layers}.safetensors"
        save_file(tensors, str(path), metadata={"format": "gpt-block-explorer",
                                                "config": json.dumps(cfg), "trained": "true"})
        built = []
        monkeypatch.setattr(checkpoints, "new_model", lambda cfg: built.append(cfg))
        monkeypatch.setattr(keymaps, "new_model", lambda cfg: built.append(cfg))
        with pytest.raises(CheckpointError, match=message):
            load_checkpoint(path)
        assert built == []  # refused before a single block was built


@pytest.mark.parametrize("entry, message", [
    ({"dtype": "F32", "shape": "32", "data_offsets": [0, 128]}, "shape must be a list"),
    ({"dtype": "F32", "shape": [{"a": 1}], "data_offsets": [0, 128]}, "shape must be a list"),
    ({"dtype": 7, "shape": [32], "data_offsets": [0, 128]}, "unknown dtype 7"),
    ({"dtype": "F32", "shape": [32], "data_offsets": [128]}, "data_offsets must be"),
    ({"dtype": "F32", "shape": [32], "data_offsets": [128, 0]}, "data_offsets must be"),
    ({"dtype": "F32", "shape": [32], "data_offsets": "0-128"}, "data_offsets must be"),
    ([1, 2, 3], "not an object"),
])
def test_safetensors_headers_of_the_wrong_structure(tmp_path, entry, message):
    path = safetensors_with(tmp_path / "x.safetensors", {"w": entry}, bytes(128))
    with pytest.raises(CheckpointError, match=message):
        load_checkpoint(path)


def test_deeply_nested_json_is_refused_without_exhausting_the_stack(tmp_path, tiny_file):
    deep = '{"a": ' * 100_000 + "1" + "}" * 100_000
    path = tmp_path / "deep.safetensors"
    raw = deep.encode()
    path.write_bytes(struct.pack("<Q", len(raw)) + raw)
    with pytest.raises(CheckpointError, match="nested more than 64 levels"):
        load_checkpoint(path)
    folder = tmp_path / "hf"
    folder.mkdir()
    (folder / "model.safetensors.index.json").write_text('{"weight_map": ' + deep + "}")
    with pytest.raises(CheckpointError, match="model.safetensors.index.json: .*nested"):
        load_checkpoint(folder)


@pytest.mark.parametrize("value, message", [
    (4.7, "n_head in config.json must be a whole number, got 4.7"),
    (None, "must be a whole number, got None"),
    ([4], "must be a whole number, got \\[4\\]"),
    (1e400, "config.json: a config holds the number 1e400, beyond a float's range"),
    (-4, "must be at least 1"),
])
def test_config_json_numbers_of_the_wrong_type_or_size(tmp_path, value, message):
    sd = build_model(preset("tiny")).state_dict()
    torch.save(sd, tmp_path / "model.pth")
    text = json.dumps({"n_head": value, "model_type": "gpt2"}) if value != 1e400 else \
        '{"n_head": 1e400, "model_type": "gpt2"}'
    (tmp_path / "config.json").write_text(text)
    with pytest.raises(CheckpointError, match=message):
        load_checkpoint(tmp_path / "model.pth")


def test_a_vocabulary_smaller_than_the_tokenizer_is_refused_when_loading(tmp_path):
    small = save_checkpoint(build_model(preset("tiny", vocab_size=300)), tmp_path / "s.safetensors")
    with pytest.raises(CheckpointError, match="this model has 300 tokens; GPT-2's tokenizer, "
                                              "which the explorer uses, needs 50,257"):
        load_checkpoint(small)


@pytest.mark.parametrize("save", ["safetensors", "pth"])
def test_a_file_truncated_under_a_loaded_model_does_not_crash(tmp_path, save):
    """torch.save and save_pretrained truncate in place: a learner re-saving model.pth
    while exploring it. Weights mapped from the file would die with SIGBUS."""
    model = build_model(preset("tiny"), seed=1)
    path = tmp_path / f"model.{save}"
    if save == "pth":
        book_pth(tmp_path, model.state_dict(), path.name)
    else:
        save_checkpoint(model, path)
    code = (
        "import os, sys, torch\n"
        "from explorer.core.weights.checkpoints import load_checkpoint\n"
        f"loaded = load_checkpoint({str(path)!r})\n"
        f"os.truncate({str(path)!r}, 100)\n"
        "with torch.inference_mode():\n"
        "    out = loaded.model(torch.tensor([[1, 2, 3]]))\n"
        "print(tuple(out.shape), float(out.abs().sum()) > 0)\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]  # -7 would be SIGBUS
    assert done.stdout.strip() == "(1, 3, 50257) True"
