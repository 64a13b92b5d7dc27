"""OpenAI's TensorFlow GPT-2 checkpoint, read without TensorFlow.

tests/data/openai-tf-tiny/ was written by TensorFlow 2.21's TF1 Saver (see
tests/data/make_tf_checkpoint.py) with OpenAI's variable names and shapes, from the
values its ``weights()`` makes (numpy only) — the reference here; the script also
checked that TensorFlow reads the same values back."""

import shutil
from pathlib import Path

import json

import numpy as np
import pytest
import torch

from explorer.core.weights.checkpoints import CheckpointError, detect_format, load_checkpoint
from explorer.core.weights.crc32c import crc32c, raw_update
from explorer.core.weights.tf_bundle import open_bundle

transformers = pytest.importorskip("transformers")

from tests.data.make_tf_checkpoint import HPARAMS, weights

FOLDER = Path(__file__).resolve().parents[2] / "data" / "openai-tf-tiny"


@pytest.fixture
def reference():
    return weights()


@pytest.fixture
def folder(tmp_path):
    """A copy to damage."""
    copy = tmp_path / "124M"
    shutil.copytree(FOLDER, copy)
    return copy


def transformers_model(values):
    """transformers' GPT-2 with the same numbers, mapped here independently of the
    explorer: OpenAI's conv1d [1, in, out] is Hugging Face's Conv1D (in, out)."""
    cfg = transformers.GPT2Config(vocab_size=HPARAMS["n_vocab"], n_positions=HPARAMS["n_ctx"],
                                  n_embd=HPARAMS["n_embd"], n_layer=HPARAMS["n_layer"],
                                  n_head=HPARAMS["n_head"])
    model = transformers.GPT2LMHeadModel(cfg).eval()
    sd = {"transformer.wte.weight": values["model/wte"], "transformer.wpe.weight": values["model/wpe"],
          "transformer.ln_f.weight": values["model/ln_f/g"], "transformer.ln_f.bias": values["model/ln_f/b"]}
    for i in range(HPARAMS["n_layer"]):
        for tf_part, hf_part in (("ln_1", "ln_1"), ("ln_2", "ln_2")):
            sd[f"transformer.h.{i}.{hf_part}.weight"] = values[f"model/h{i}/{tf_part}/g"]
            sd[f"transformer.h.{i}.{hf_part}.bias"] = values[f"model/h{i}/{tf_part}/b"]
        for part in ("attn/c_attn", "attn/c_proj", "mlp/c_fc", "mlp/c_proj"):
            hf = part.replace("/", ".")
            sd[f"transformer.h.{i}.{hf}.weight"] = values[f"model/h{i}/{part}/w"][0]
            sd[f"transformer.h.{i}.{hf}.bias"] = values[f"model/h{i}/{part}/b"]
    sd = {k: torch.from_numpy(np.array(v)) for k, v in sd.items()}
    sd["lm_head.weight"] = sd["transformer.wte.weight"]
    missing, unexpected = model.load_state_dict(sd, strict=False)
    assert not unexpected and all(".attn.bias" in k or "masked_bias" in k for k in missing)
    return model


def test_the_bundle_reads_every_variable_as_tensorflow_does(reference):
    bundle = open_bundle(FOLDER)
    assert set(bundle.entries) == set(reference) and len(reference) == 40
    for name, value in reference.items():
        tensor = bundle.read(name)
        assert tensor.dtype == torch.float32 and tuple(tensor.shape) == value.shape
        assert np.array_equal(tensor.numpy(), value), name
    assert bundle.entries["model/h0/attn/c_attn/w"].shape == (1, 8, 24)


@pytest.mark.parametrize("how", ["folder", "index", "prefix"])
def test_the_folder_loads_and_matches_transformers(reference, how):
    path = {"folder": FOLDER, "index": FOLDER / "model.ckpt.index",
            "prefix": FOLDER / "model.ckpt"}[how]
    assert detect_format(path) == "openai-tf"
    loaded = load_checkpoint(path)
    cfg = loaded.config
    assert (cfg.vocab_size, cfg.context_length, cfg.emb_dim, cfg.n_heads, cfg.n_layers) == (
        50257, 32, 8, 2, 3)
    assert cfg.tie_weights and cfg.qkv_bias and cfg.norm_position == "pre"
    assert loaded.trained and "OpenAI TensorFlow checkpoint" in loaded.label
    assert not [n for n in loaded.notices if "head" in n]  # n_head came from hparams.json
    ids = torch.randint(0, 50257, (2, 20), generator=torch.Generator().manual_seed(5))
    with torch.no_grad():
        ours = loaded.model(ids)
        theirs = transformers_model(reference)(ids).logits
    assert ours.shape == theirs.shape == (2, 20, 50257)
    assert (ours - theirs).abs().max().item() <= 1e-4
    assert ours.abs().max().item() > 0.1  # not a trivially equal pair


def test_the_mapping_follows_the_books_load_weights_into_gpt(reference):
    loaded = load_checkpoint(FOLDER)
    sd = loaded.model.state_dict()
    w = reference["model/h1/attn/c_attn/w"][0]  # (in, 3 * out): q | k | v
    q, k, v = np.split(w, 3, axis=-1)
    assert np.array_equal(sd["trf_blocks.1.att.W_query.weight"].numpy(), q.T)
    assert np.array_equal(sd["trf_blocks.1.att.W_value.weight"].numpy(), v.T)
    assert np.array_equal(sd["trf_blocks.2.ff.layers.2.weight"].numpy(),
                          reference["model/h2/mlp/c_proj/w"][0].T)
    assert np.array_equal(sd["trf_blocks.0.norm2.scale"].numpy(), reference["model/h0/ln_2/g"])
    assert np.array_equal(sd["out_head.weight"].numpy(), reference["model/wte"])


def test_a_missing_data_file_is_named(folder):
    (folder / "model.ckpt.data-00000-of-00001").unlink()
    with pytest.raises(CheckpointError, match=r"model\.ckpt\.data-00000-of-00001: the data file "
                                              r"of this checkpoint is missing"):
        load_checkpoint(folder)


def flip_bits(path, offset: int, mask: int) -> None:
    raw = bytearray(path.read_bytes())
    raw[offset] ^= mask
    path.write_bytes(bytes(raw))


def test_a_truncated_data_file_is_named_before_anything_is_read(folder):
    data = folder / "model.ckpt.data-00000-of-00001"
    data.write_bytes(data.read_bytes()[:100_000])
    with pytest.raises(CheckpointError, match=r"data-00000-of-00001: truncated: 'model/.*' ends at "
                                              r"byte [\d,]+ but the file has 100,000 bytes"):
        load_checkpoint(folder)


def test_a_flipped_byte_in_the_data_fails_its_checksum(folder):
    flip_bits(folder / "model.ckpt.data-00000-of-00001", 5000, 0x01)
    with pytest.raises(CheckpointError, match="do not match their checksum"):
        load_checkpoint(folder)


def test_an_index_that_is_not_a_tensor_bundle(folder):
    (folder / "model.ckpt.index").write_text("model_checkpoint_path: something else\n" * 5)
    with pytest.raises(CheckpointError, match=r"model\.ckpt\.index: not a TensorFlow tensor "
                                              r"bundle index"):
        load_checkpoint(folder / "model.ckpt.index")
    with pytest.raises(CheckpointError, match=r"model\.ckpt\.index: not a TensorFlow tensor "
                                              r"bundle index"):
        load_checkpoint(folder)


def test_a_damaged_index_block_fails_its_checksum(folder):
    flip_bits(folder / "model.ckpt.index", 40, 0x10)  # inside the first data block
    with pytest.raises(CheckpointError, match="model.ckpt.index: corrupt tensor bundle index"):
        load_checkpoint(folder)


def test_hparams_that_disagree_with_the_shapes_are_named(folder):
    hp = dict(HPARAMS, n_embd=768)
    (folder / "hparams.json").write_text(json.dumps(hp))
    with pytest.raises(CheckpointError, match=r"hparams\.json: says n_embd is 768, but "
                                              r"model/wte has shape \[50257, 8\]"):
        load_checkpoint(folder)
    (folder / "hparams.json").write_text(json.dumps(dict(HPARAMS, n_layer=12)))
    with pytest.raises(CheckpointError, match="says n_layer is 12, but 3 blocks"):
        load_checkpoint(folder)
    (folder / "hparams.json").write_text("{not json")
    with pytest.raises(CheckpointError, match=r"hparams\.json: not valid JSON"):
        load_checkpoint(folder)


def test_without_hparams_the_heads_cannot_be_told_and_it_says_so(folder):
    (folder / "hparams.json").unlink()  # and 8 wide is no GPT-2 size: no head count to assume
    with pytest.raises(CheckpointError, match=r"number of heads for emb_dim 8; put its "
                                              r"hparams\.json \(with n_head\)"):
        load_checkpoint(folder)


def test_the_data_file_alone_says_what_to_open(folder):
    with pytest.raises(CheckpointError, match="the data half of a TensorFlow checkpoint"):
        load_checkpoint(folder / "model.ckpt.data-00000-of-00001")


@pytest.mark.slow
def test_crc32c_matches_the_standard_and_the_byte_loop():
    assert crc32c(b"123456789") == 0xE3069283  # the published check value of CRC-32C
    rng = np.random.default_rng(1)
    for n in (70_000, 1 << 20, (1 << 24) + 13):
        data = rng.integers(0, 256, size=n, dtype=np.uint8).tobytes()
        assert crc32c(data) == raw_update(0xFFFFFFFF, data) ^ 0xFFFFFFFF
