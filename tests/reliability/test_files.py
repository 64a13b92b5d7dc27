"""More hostile files, each refused with a message naming the file and the problem."""

import os

import pytest
import torch

from explorer.core.weights.checkpoints import CheckpointError, load_checkpoint, save_checkpoint
from explorer.core.gpt.config import preset
from explorer.core.gpt.build import build_model


def _sd():
    return build_model(preset("tiny", emb_dim=64, n_heads=1, qkv_bias=False, tie_weights=False)).state_dict()


def test_wrong_dtype_is_refused(tmp_path):
    sd = {k: v.clone() for k, v in _sd().items()}
    sd["trf_blocks.0.norm1.scale"] = torch.ones(64, dtype=torch.int64)
    torch.save(sd, tmp_path / "ints.pth")
    with pytest.raises(CheckpointError, match=r"ints.pth.*norm1.scale.*int64"):
        load_checkpoint(tmp_path / "ints.pth")


def test_inf_weights_are_refused(tmp_path):
    sd = {k: v.clone() for k, v in _sd().items()}
    sd["trf_blocks.1.ff.layers.0.bias"][0] = float("inf")
    torch.save(sd, tmp_path / "inf.pth")
    with pytest.raises(CheckpointError, match="NaN/Inf"):
        load_checkpoint(tmp_path / "inf.pth")


def test_unreadable_file_is_refused(tmp_path, monkeypatch):
    path = save_checkpoint(build_model(preset("tiny")), tmp_path / "locked.safetensors")
    if os.geteuid() != 0:
        path.chmod(0)
    else:  # root reads anything: make the read itself fail as it would for a user
        from explorer.core.weights import checkpoints

        def denied(*args, **kwargs):
            raise PermissionError(13, "Permission denied", str(path))

        monkeypatch.setattr(checkpoints, "open", denied, raising=False)
    with pytest.raises(CheckpointError, match="permission denied"):
        load_checkpoint(path)


def test_safetensors_with_a_lying_entry_is_refused(tmp_path):
    import json
    import struct
    header = {"tok_emb.weight": {"dtype": "F32", "shape": [1000000, 1000000], "data_offsets": [0, 16]}}
    raw = json.dumps(header).encode()
    (tmp_path / "lie.safetensors").write_bytes(struct.pack("<Q", len(raw)) + raw + b"\0" * 16)
    with pytest.raises(CheckpointError, match="declares 16 bytes"):
        load_checkpoint(tmp_path / "lie.safetensors")


def test_a_failed_load_leaves_the_process_able_to_load_again(tmp_path):
    (tmp_path / "bad.bin").write_bytes(b"\x00" * 100)
    with pytest.raises(CheckpointError):
        load_checkpoint(tmp_path / "bad.bin")
    good = save_checkpoint(build_model(preset("tiny")), tmp_path / "good.safetensors")
    assert load_checkpoint(good).config == preset("tiny")


def test_a_file_that_changes_while_it_loads_is_refused(tmp_path, monkeypatch):
    from explorer.core.weights import checkpoints
    path = save_checkpoint(build_model(preset("tiny")), tmp_path / "growing.safetensors")
    original = checkpoints.read_state_dict

    def read_then_grow(p, should_stop=None):
        result = original(p, should_stop)
        with open(path, "ab") as fh:  # a download still writing to the file
            fh.write(b"\0" * 10)
        return result

    monkeypatch.setattr(checkpoints, "read_state_dict", read_then_grow)
    with pytest.raises(CheckpointError, match="changed while it was being read"):
        load_checkpoint(path)


def test_a_load_can_be_stopped_and_nothing_is_half_loaded(tmp_path):
    from explorer.core.base.cancel import Cancelled
    path = save_checkpoint(build_model(preset("tiny")), tmp_path / "m.safetensors")
    with pytest.raises(Cancelled):
        load_checkpoint(path, should_stop=lambda: True)
    assert load_checkpoint(path, should_stop=lambda: False).config == preset("tiny")


def test_a_shard_index_cannot_name_files_outside_its_folder(tmp_path):
    import json
    outside = tmp_path / "secret.safetensors"
    save_checkpoint(build_model(preset("tiny")), outside)
    folder = tmp_path / "model"
    folder.mkdir()
    (folder / "model.safetensors.index.json").write_text(
        json.dumps({"weight_map": {"tok_emb.weight": "../secret.safetensors"}}))
    with pytest.raises(CheckpointError, match=r"names '\.\./secret\.safetensors' as a shard; "
                                              r"shards must be files in the same folder"):
        load_checkpoint(folder)



@pytest.mark.parametrize("key, shape, says", [
    ("h.0.attn.c_attn.weight", (), r"'h.0.attn.c_attn.weight' has shape \(\) \(0-d\); GPT-2 "
                                   r"stores it as a matrix \(in, out\)"),
    ("h.0.attn.c_proj.weight", (1, 64, 64), r"'h.0.attn.c_proj.weight' has shape \(1, 64, 64\) "
                                            r"\(3-d\); GPT-2 stores it as a matrix"),
    ("h.1.ln_2.bias", (64, 1), r"'h.1.ln_2.bias' has shape \(64, 1\) \(2-d\); .* a vector"),
    ("h.0.attn.c_attn.bias", (), r"'h.0.attn.c_attn.bias' has shape \(\) \(0-d\)"),
    ("wte.weight", (50257,), r"'wte.weight' has shape \(50257,\) \(1-d\)"),
])
def test_a_tensor_of_another_rank_is_named_with_the_shape_it_needs(tmp_path, key, shape, says):
    transformers = pytest.importorskip("transformers")
    cfg = transformers.GPT2Config(n_embd=64, n_layer=2, n_head=4, n_positions=32)
    sd = {k.removeprefix("transformer."): v for k, v in
          transformers.GPT2LMHeadModel(cfg).state_dict().items() if ".attn.bias" not in k
          or "c_attn" in k}
    sd[key] = torch.zeros(shape)
    for path in (tmp_path / "pytorch_model.bin", tmp_path / "model.pth"):
        torch.save(sd, path)
        with pytest.raises(CheckpointError, match=says):
            load_checkpoint(path)


def _header_file(path, header: bytes, data: bytes = b""):
    import struct
    path.write_bytes(struct.pack("<Q", len(header)) + header + data)
    return path


@pytest.mark.parametrize("header, says", [
    # a zero axis makes the byte count 0, but the shape's product overflows 64 bits first
    (b'{"a": {"dtype": "F32", "shape": [18446744073709551616, 0], "data_offsets": [0, 0]}}',
     "has more elements than a tensor can"),
    (b'{"a": {"dtype": "F32", "shape": [4611686018427387904, 4611686018427387904, 0], '
     b'"data_offsets": [0, 0]}}', "has more elements than a tensor can"),
    # a name twice: which entry was meant cannot be told
    (b'{"a": {"dtype": "F32", "shape": [9], "data_offsets": [0, 4]}, '
     b'"a": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]}}', "the name 'a' twice"),
])
def test_a_header_the_safetensors_library_refuses_is_refused_in_one_line(tmp_path, header, says):
    path = _header_file(tmp_path / "m.safetensors", header, b"\0" * 4 if b"[0, 4]" in header else b"")
    with pytest.raises(CheckpointError) as caught:
        load_checkpoint(path)
    assert says in str(caught.value) and "\n" not in str(caught.value)
    if "more elements" in says:  # the official reader refuses these too
        from safetensors import SafetensorError
        from safetensors.torch import load_file
        with pytest.raises((SafetensorError, OverflowError, ValueError)):
            load_file(str(path))


def test_two_shards_holding_the_same_tensor_are_refused(tmp_path):
    import json

    from safetensors.torch import save_file
    folder = tmp_path / "model"
    folder.mkdir()
    sd = {k: v.contiguous() for k, v in build_model(preset("tiny")).state_dict().items()
          if k != "out_head.weight"}
    names = sorted(sd)
    save_file({k: sd[k] for k in names[:5]}, str(folder / "a.safetensors"))
    save_file({k: sd[k] for k in names[4:]}, str(folder / "b.safetensors"))  # names[4] twice
    (folder / "model.safetensors.index.json").write_text(json.dumps({"weight_map": {
        **{k: "a.safetensors" for k in names[:5]}, **{k: "b.safetensors" for k in names[5:]}}}))
    with pytest.raises(CheckpointError, match=f"holds '{names[4]}', which another shard of the "
                                              "folder holds too"):
        load_checkpoint(folder)


def _declaring(path, gib: int):
    """A safetensors file whose header declares one float32 tensor of ``gib`` GiB, its
    length reached with a hole (``truncate``): nothing stored but the header."""
    import json
    import struct
    rows = gib * 2**30 // (4 * 1024)
    header = json.dumps({"wte.weight": {"dtype": "F32", "shape": [rows, 1024],
                                        "data_offsets": [0, rows * 4096]}}).encode()
    header += b" " * (-len(header) % 8)
    with open(path, "wb") as fh:
        fh.write(struct.pack("<Q", len(header)) + header)
        fh.truncate(8 + len(header) + rows * 4096)
    return path


def test_a_sparse_file_declaring_gigabytes_is_refused_before_a_byte_of_it_is_read(tmp_path):
    path = _declaring(tmp_path / "holes.safetensors", 4)
    stored = os.stat(path).st_blocks * 512
    if stored == 0:
        pytest.skip("this file system reports no blocks for a file")
    with pytest.raises(CheckpointError) as refused:
        load_checkpoint(path)
    assert str(refused.value) == (
        f"{path}: declares 4.3 GB of weights but only {stored:,} bytes of it are stored on disk "
        "(a sparse file: its weights would read as zeros)")


def test_a_file_larger_than_the_free_memory_is_refused_before_it_is_allocated(tmp_path,
                                                                             monkeypatch):
    from explorer.core.base import devices
    from explorer.core.weights import hf_files
    path = tmp_path / "m.safetensors"
    save_checkpoint(build_model(preset("tiny"), seed=0), path)
    size = path.stat().st_size
    assert size < 2**30
    monkeypatch.setattr(hf_files, "free_memory_bytes", lambda device: size - 1)
    with pytest.raises(CheckpointError) as refused:
        load_checkpoint(path)
    assert str(refused.value) == (f"{path}: needs {size / 2**20:,.1f} MiB of memory to load; "
                                  f"{(size - 1) / 2**20:,.1f} MiB are free")
    monkeypatch.setattr(hf_files, "free_memory_bytes", devices.free_memory_bytes)
    assert load_checkpoint(path).config.n_layers == preset("tiny").n_layers
