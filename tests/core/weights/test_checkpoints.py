import json
import os
import zipfile

import pytest
import torch

from explorer.core.base import devices
from explorer.core.weights.checkpoints import (CheckpointError, detect_format, load_checkpoint,
                                               save_checkpoint)
from explorer.core.sources import random_model
from explorer.core.gpt.config import preset
from explorer.core.gpt.build import build_model
from tests import book_model

transformers = pytest.importorskip("transformers")

HF_CONFIGS = {  # GPT-2's vocabulary, and a padded larger one (as some conversions have)
    "small4": dict(n_embd=64, n_layer=2, n_head=4, n_positions=32, vocab_size=50257),
    "wide6": dict(n_embd=96, n_layer=3, n_head=6, n_positions=48, vocab_size=50304),
}


def make_hf_model(name, seed=0):
    torch.manual_seed(seed)
    cfg = transformers.GPT2Config(**HF_CONFIGS[name])
    model = transformers.GPT2LMHeadModel(cfg).eval()
    with torch.no_grad():  # non-trivial norms and biases, so a wrong map shows
        for n, p in model.named_parameters():
            if n.endswith("bias") or ".ln_" in n:
                p.add_(torch.randn_like(p) * 0.1)
    return model


def hf_logits(model, ids):
    with torch.no_grad():
        return model(ids).logits


def our_logits(loaded, ids):
    with torch.no_grad():
        return loaded.model(ids)


@pytest.fixture(params=list(HF_CONFIGS))
def hf_model(request):
    return make_hf_model(request.param)


def _ids(model, n=12):
    return torch.randint(0, model.config.vocab_size, (2, n))


@pytest.mark.slow
def test_hf_safetensors_folder_matches_transformers(hf_model, tmp_path):
    hf_model.save_pretrained(tmp_path)
    assert (tmp_path / "model.safetensors").is_file()
    assert detect_format(tmp_path) == "hf-folder"
    loaded = load_checkpoint(tmp_path)
    cfg = hf_model.config
    assert (loaded.config.emb_dim, loaded.config.n_layers, loaded.config.n_heads) == (
        cfg.n_embd, cfg.n_layer, cfg.n_head)
    assert loaded.config.tie_weights and loaded.config.qkv_bias
    ids = _ids(hf_model)
    assert (our_logits(loaded, ids) - hf_logits(hf_model, ids)).abs().max() <= 1e-4


@pytest.mark.parametrize("change, words", [
    (dict(n_layer=1_000_000), "config.json says n_layer 1,000,000 but the weights have 2"),
    (dict(n_positions=10**8), "config.json says n_positions 100,000,000 but the weights have 32"),
    (dict(n_embd=128), "config.json says n_embd 128 but the weights have 64"),
    (dict(layer_norm_epsilon=-1), "layer_norm_epsilon in config.json must be a finite number"),
    (dict(n_layer="two"), "n_layer in config.json must be a whole number"),
])
def test_a_hf_config_that_contradicts_its_weights_is_refused(tmp_path, change, words):
    """The model is built from the weights' shapes; a config.json that states other sizes
    means the folder's files do not belong together."""
    make_hf_model("small4").save_pretrained(tmp_path)
    config = json.loads((tmp_path / "config.json").read_text())
    (tmp_path / "config.json").write_text(json.dumps({**config, **change}))
    with pytest.raises(CheckpointError) as caught:
        load_checkpoint(tmp_path)
    assert words in str(caught.value) and str(tmp_path) in str(caught.value)
    assert "\n" not in str(caught.value)


def test_another_layer_norm_epsilon_is_said(tmp_path):
    make_hf_model("small4").save_pretrained(tmp_path)
    config = json.loads((tmp_path / "config.json").read_text())
    (tmp_path / "config.json").write_text(json.dumps({**config, "layer_norm_epsilon": 1e-6}))
    loaded = load_checkpoint(tmp_path)
    assert any("layer_norm_epsilon 1e-06" in n for n in loaded.notices)


def test_hf_bin_with_prefix_and_lm_head_matches(hf_model, tmp_path):
    sd = hf_model.state_dict()
    assert "lm_head.weight" in sd and any(k.startswith("transformer.") for k in sd)
    torch.save(sd, tmp_path / "pytorch_model.bin")
    hf_model.config.to_json_file(tmp_path / "config.json")
    loaded = load_checkpoint(tmp_path / "pytorch_model.bin")  # config.json beside it is read
    padded = hf_model.config.vocab_size - 50257  # a padded vocabulary's rows: said
    assert loaded.config.n_heads == hf_model.config.n_head and loaded.notices == (
        [f"ids 50,257–{hf_model.config.vocab_size - 1:,} have no token in the tokenizer (GPT-2): "
         f"{padded} of the model's {hf_model.config.vocab_size:,} rows, shown as <id N> (they "
         "can be chosen)"] if padded else [])
    ids = _ids(hf_model)
    assert (our_logits(loaded, ids) - hf_logits(hf_model, ids)).abs().max() <= 1e-4
    assert loaded.model.out_head.weight is loaded.model.tok_emb.weight


def test_hf_bin_without_prefix_head_and_with_mask_buffers(tmp_path):
    hf = make_hf_model("small4", seed=1)
    sd = {k.removeprefix("transformer."): v for k, v in hf.state_dict().items()
          if k != "lm_head.weight"}
    for i in range(hf.config.n_layer):  # the causal-mask buffers older files carry
        sd[f"h.{i}.attn.bias"] = torch.tril(torch.ones(1, 1, 32, 32))
        sd[f"h.{i}.attn.masked_bias"] = torch.tensor(-1e4)
    path = tmp_path / "weights.ckpt"  # any extension: the format comes from the bytes
    torch.save(sd, path)
    hf.config.to_json_file(tmp_path / "config.json")
    loaded = load_checkpoint(path)
    ids = _ids(hf)
    assert (our_logits(loaded, ids) - hf_logits(hf, ids)).abs().max() <= 1e-4


def test_hf_file_without_config_assumes_gpt2_head_size(tmp_path):
    hf = make_hf_model("small4")
    hf.save_pretrained(tmp_path / "src")
    lone = tmp_path / "lone.safetensors"
    lone.write_bytes((tmp_path / "src" / "model.safetensors").read_bytes())
    loaded = load_checkpoint(lone)
    assert loaded.config.n_heads == 1  # 64 dims / GPT-2's head size 64
    assert any("n_heads" in n for n in loaded.notices)


def _book_cfg(cfg):
    return {k: getattr(cfg, k) for k in ("vocab_size", "context_length", "emb_dim", "n_heads",
                                         "n_layers", "drop_rate", "qkv_bias")}


@pytest.mark.parametrize("qkv_bias", [False, True])
def test_book_pth_state_dict_matches_book_model(tmp_path, qkv_bias):
    # GPT-2's head size (64), as the book's configs have: the heads need no config file.
    cfg = preset("tiny", qkv_bias=qkv_bias, tie_weights=False, emb_dim=128, n_heads=2)
    book = book_model.GPTModel(_book_cfg(cfg)).eval()
    torch.save(book.state_dict(), tmp_path / "model.pth")
    loaded = load_checkpoint(tmp_path / "model.pth")
    assert loaded.config == cfg.replace(drop_rate=0.1)
    ids = torch.randint(0, cfg.vocab_size, (2, 10))
    with torch.no_grad():
        assert (our_logits(loaded, ids) - book(ids)).abs().max() <= 1e-4


def test_book_config_json_beside_the_file_gives_the_heads(tmp_path):
    cfg = preset("tiny", qkv_bias=False, tie_weights=False)  # 32 dims, 4 heads
    book = book_model.GPTModel(_book_cfg(cfg)).eval()
    torch.save(book.state_dict(), tmp_path / "model.pth")
    (tmp_path / "config.json").write_text(json.dumps(_book_cfg(cfg)))
    loaded = load_checkpoint(tmp_path / "model.pth")
    assert loaded.config.n_heads == 4 and not loaded.notices
    ids = torch.randint(0, cfg.vocab_size, (2, 10))
    with torch.no_grad():
        assert (our_logits(loaded, ids) - book(ids)).abs().max() <= 1e-4


def test_book_training_checkpoint_with_optimizer_loads(tmp_path):
    cfg = BOOK_TINY
    book = book_model.GPTModel(_book_cfg(cfg))
    opt = torch.optim.AdamW(book.parameters())
    torch.save({"model_state_dict": book.state_dict(), "optimizer_state_dict": opt.state_dict()},
               tmp_path / "model_and_optimizer.pth")
    loaded = load_checkpoint(tmp_path / "model_and_optimizer.pth")
    torch.testing.assert_close(loaded.model.tok_emb.weight, book.tok_emb.weight)


@pytest.mark.parametrize("norm_position", ["pre", "post"])
def test_project_format_round_trip(tmp_path, norm_position):
    cfg = preset("tiny", norm_position=norm_position)
    model = build_model(cfg, seed=9)
    path = save_checkpoint(model, tmp_path / "mine.bin", trained=False)
    assert detect_format(path) == "safetensors"
    loaded = load_checkpoint(path)
    assert loaded.source == "gpt-block-explorer" and loaded.config == cfg
    assert not loaded.trained and "UNTRAINED" in loaded.label
    ids = torch.randint(0, cfg.vocab_size, (1, 9))
    with torch.no_grad():
        assert torch.equal(loaded.model(ids), model(ids))


def test_bfloat16_load(tmp_path):
    hf = make_hf_model("small4")
    hf.save_pretrained(tmp_path)
    loaded = load_checkpoint(tmp_path, dtype="bfloat16")
    assert loaded.dtype == torch.bfloat16
    ids = _ids(hf)
    diff = (our_logits(loaded, ids).float() - hf_logits(hf, ids)).abs().max()
    assert 0 < diff < 0.5


# --- bad input: a specific message naming the file, and nothing else breaks ------------

def _write(tmp_path, name, data):
    p = tmp_path / name
    p.write_bytes(data)
    return p


def _tiny_safetensors(tmp_path):
    return save_checkpoint(build_model(preset("tiny")), tmp_path / "good.safetensors")


@pytest.mark.parametrize("maker,message", [
    (lambda t: _write(t, "empty.bin", b""), "empty"),
    (lambda t: _write(t, "lfs.safetensors", b"version https://git-lfs.github.com/spec/v1\n"
                      b"oid sha256:abc\nsize 548105171\n"), "Git LFS pointer"),
    (lambda t: _write(t, "page.bin", b"\n<!DOCTYPE html><html><body>Sign in</body></html>"), "HTML"),
    # random bytes, but never a header the format sniffing recognises (byte 8 "{" would
    # read as safetensors one time in 256)
    (lambda t: _write(t, "noise.pth", b"\0" * 9 + os.urandom(4087)), "not a recognised checkpoint"),
    (lambda t: _write(t, "huge.safetensors", (10**13).to_bytes(8, "little") + b'{"a": 1}'),
     "corrupt safetensors header"),
    (lambda t: t / "missing.safetensors", "no such file"),
    (lambda t: t, "a folder without model.safetensors"),
])
def test_unusable_files_are_named_and_explained(tmp_path, maker, message):
    path = maker(tmp_path)
    with pytest.raises(CheckpointError, match=message) as info:
        load_checkpoint(path)
    assert str(path) in str(info.value)


def test_truncated_safetensors(tmp_path):
    good = _tiny_safetensors(tmp_path)
    cut = _write(tmp_path, "cut.safetensors", good.read_bytes()[:-1000])
    with pytest.raises(CheckpointError, match="truncated safetensors"):
        load_checkpoint(cut)


def test_truncated_torch_zip(tmp_path):
    torch.save(build_model(preset("tiny")).state_dict(), tmp_path / "full.pth")
    data = (tmp_path / "full.pth").read_bytes()
    cut = _write(tmp_path, "cut.pth", data[: len(data) // 2])
    with pytest.raises(CheckpointError, match="cut.pth"):
        load_checkpoint(cut)


def test_zip_that_is_not_torch(tmp_path):
    with zipfile.ZipFile(tmp_path / "notes.zip", "w") as zf:
        zf.writestr("readme.txt", "hello")
    with pytest.raises(CheckpointError, match="not a PyTorch checkpoint"):
        load_checkpoint(tmp_path / "notes.zip")


class _Evil:
    def __init__(self, marker):
        self.marker = marker

    def __reduce__(self):
        return (os.mkdir, (self.marker,))


def test_pickle_that_would_run_code_is_refused_and_never_runs(tmp_path):
    marker = tmp_path / "PWNED"
    torch.save({"tok_emb.weight": torch.zeros(2, 2), "x": _Evil(str(marker))}, tmp_path / "evil.pth")
    with pytest.raises(CheckpointError, match="refused") as info:
        load_checkpoint(tmp_path / "evil.pth")
    assert "weights_only" in str(info.value)
    assert not marker.exists()


def test_pickle_of_non_state_dict(tmp_path):
    torch.save([torch.zeros(3)], tmp_path / "list.pth")
    with pytest.raises(CheckpointError, match="not a state dict"):
        load_checkpoint(tmp_path / "list.pth")


BOOK_TINY = preset("tiny", qkv_bias=False, tie_weights=False, emb_dim=64, n_heads=1)


def _book_sd():
    cfg = BOOK_TINY
    return book_model.GPTModel(_book_cfg(cfg)).state_dict()


def test_missing_key_is_named(tmp_path):
    sd = _book_sd()
    del sd["trf_blocks.1.norm2.scale"]
    torch.save(sd, tmp_path / "m.pth")
    with pytest.raises(CheckpointError, match=r"missing key.*trf_blocks\.1\.norm2\.scale"):
        load_checkpoint(tmp_path / "m.pth")


def test_unexpected_key_is_named(tmp_path):
    sd = _book_sd()
    sd["trf_blocks.0.extra.weight"] = torch.zeros(3)
    torch.save(sd, tmp_path / "m.pth")
    with pytest.raises(CheckpointError, match=r"unexpected key.*trf_blocks\.0\.extra\.weight"):
        load_checkpoint(tmp_path / "m.pth")


def test_shape_mismatch_names_key_and_both_shapes(tmp_path):
    sd = _book_sd()
    sd["trf_blocks.0.ff.layers.2.weight"] = torch.zeros(64, 128)  # should be (64, 256)
    torch.save(sd, tmp_path / "m.pth")
    with pytest.raises(CheckpointError, match=r"trf_blocks\.0\.ff\.layers\.2\.weight.*\(64, 128\).*\(64, 256\)"):
        load_checkpoint(tmp_path / "m.pth")


def test_nan_weights_are_refused(tmp_path):
    sd = _book_sd()
    sd["trf_blocks.0.norm1.shift"][3] = float("nan")
    torch.save(sd, tmp_path / "m.pth")
    with pytest.raises(CheckpointError, match="NaN"):
        load_checkpoint(tmp_path / "m.pth")


def test_memory_estimate_refuses_what_does_not_fit(tmp_path, monkeypatch):
    path = _tiny_safetensors(tmp_path)
    monkeypatch.setattr(devices, "free_memory_bytes", lambda device: 1000)
    with pytest.raises(MemoryError, match="GiB"):
        load_checkpoint(path)
    with pytest.raises(MemoryError, match="gpt2-xl"):
        random_model("gpt2-xl")


def _raw_safetensors(path, entries, data, pad=b""):
    """A safetensors file written by hand: ``entries`` {name: (dtype, shape, [start, end])}."""
    import struct
    header = json.dumps({k: {"dtype": d, "shape": s, "data_offsets": o}
                         for k, (d, s, o) in entries.items()}).encode() + pad
    path.write_bytes(struct.pack("<Q", len(header)) + header + data)
    return path


def test_safetensors_read_in_place_equals_the_library_for_every_dtype(tmp_path):
    from safetensors.torch import load, save_file

    from explorer.core.weights.hf_files import read_safetensors
    g = torch.Generator().manual_seed(0)
    tensors = {"f32": torch.randn(3, 5, generator=g), "f16": torch.randn(7, generator=g).half(),
               "bf16": torch.randn(2, 3, generator=g).bfloat16(), "f64": torch.randn(4, generator=g).double(),
               "i64": torch.arange(-3, 6), "i32": torch.arange(5, dtype=torch.int32),
               "i8": torch.arange(-4, 4, dtype=torch.int8), "u8": torch.arange(9, dtype=torch.uint8),
               "b": torch.tensor([True, False, True]), "empty": torch.zeros(0, 4)}
    save_file(tensors, tmp_path / "all.safetensors", metadata={"k": "v"})
    got, meta = read_safetensors(tmp_path / "all.safetensors")
    want = load((tmp_path / "all.safetensors").read_bytes())
    assert meta == {"k": "v"} and set(got) == set(want) == set(tensors)
    for name, t in want.items():
        assert got[name].dtype == t.dtype and got[name].shape == t.shape
        assert torch.equal(got[name], t), name


def test_safetensors_unaligned_tensor_is_read_by_value(tmp_path):
    from explorer.core.weights.hf_files import read_safetensors
    a, b = torch.tensor([1, 2, 3], dtype=torch.uint8), torch.tensor([1.5, -2.25])
    path = _raw_safetensors(tmp_path / "odd.safetensors",
                            {"a": ("U8", [3], [0, 3]), "b": ("F32", [2], [3, 11])},
                            a.numpy().tobytes() + b.numpy().tobytes())
    got, _ = read_safetensors(path)
    assert torch.equal(got["a"], a) and torch.equal(got["b"], b)


@pytest.mark.parametrize("entries,extra,message", [
    ({"a": ("F32", [2], [0, 8]), "b": ("F32", [2], [12, 20])}, 0, "starts at byte 12"),
    ({"a": ("F32", [2], [0, 8]), "b": ("F32", [2], [4, 12])}, 0, "starts at byte 4"),
    ({"a": ("F32", [2], [0, 8])}, 4, "4 bytes after the last tensor"),
])
def test_safetensors_gaps_overlaps_and_trailing_bytes_are_refused(tmp_path, entries, extra, message):
    end = max(o[1] for _, _, o in entries.values()) + extra
    path = _raw_safetensors(tmp_path / "bad.safetensors", entries, bytes(end))
    with pytest.raises(CheckpointError, match=message) as info:
        load_checkpoint(path)
    assert str(path) in str(info.value)


def test_all_finite_is_exact_for_float32_and_narrower():
    from explorer.core.weights.keymaps import all_finite
    big = torch.full((1000,), 3.0e38)  # their float32 sum would overflow; float64's does not
    assert all_finite(big) and all_finite(big.bfloat16().clamp(-3e38, 3e38))
    for bad in (float("inf"), float("-inf"), float("nan")):
        t = big.clone()
        t[517] = bad
        assert not all_finite(t) and not all_finite(t.half())
    assert all_finite(torch.zeros(0))
    huge = torch.full((4,), 1e308, dtype=torch.float64)  # overflows: said not finite, counted
    assert not all_finite(huge) and int((~torch.isfinite(huge)).sum()) == 0


@pytest.mark.parametrize("change, says", [
    (dict(n_inner=100), "config.json says n_inner 100; GPT-2's feed-forward (the block the explorer builds) is 4 × 64 = 256"),
    (dict(activation_function="relu"), "config.json says activation_function 'relu'"),
    (dict(activation_function="gelu"), "uses GELU's tanh approximation (gelu_new)"),
    (dict(scale_attn_weights=False), "config.json says scale_attn_weights False"),
    (dict(scale_attn_by_inverse_layer_idx=True), "config.json says scale_attn_by_inverse_layer_idx True"),
])
def test_a_config_that_asks_for_another_block_is_refused(tmp_path, change, says):
    """transformers computes what config.json says; the explorer builds GPT-2's block. A
    config whose feed-forward width, activation or attention scaling differs would be
    shown computing something else: refused, naming the field."""
    torch.manual_seed(0)
    cfg = transformers.GPT2Config(**HF_CONFIGS["small4"], **change)
    transformers.GPT2LMHeadModel(cfg).save_pretrained(tmp_path)
    with pytest.raises(CheckpointError) as caught:
        load_checkpoint(tmp_path)
    assert says in str(caught.value) and "\n" not in str(caught.value)


def test_a_config_with_gpt2s_own_values_spelled_out_opens(tmp_path):
    cfg = transformers.GPT2Config(**HF_CONFIGS["small4"], n_inner=256,
                                  activation_function="gelu_pytorch_tanh",
                                  scale_attn_weights=True, scale_attn_by_inverse_layer_idx=False)
    model = transformers.GPT2LMHeadModel(cfg).eval()
    model.save_pretrained(tmp_path)
    ids = _ids(model)
    torch.testing.assert_close(our_logits(load_checkpoint(tmp_path), ids), hf_logits(model, ids),
                               atol=1e-4, rtol=1e-4)


def test_a_model_read_with_gpt2s_tokenizer_says_so_in_its_title_or_is_refused(tmp_path, capsys):
    """A book Qwen3 .pth of 50,400 rows with no tokenizer beside it: opened with GPT-2's
    tokenizer, its title says so and a notice says which ids have no token; with
    --own-tokenizer it is refused in one line; a model of GPT-2's 50,257 rows (trained
    here) gets no word."""
    import json
    from explorer.cli import main
    cfg = preset("qwen3-tiny", vocab_size=50400)
    torch.save(build_model(cfg, seed=1).state_dict(), tmp_path / "model.pth")
    (tmp_path / "config.json").write_text(json.dumps(
        {"vocab_size": 50400, "context_length": 64, "emb_dim": 32, "n_heads": 4, "n_layers": 2,
         "hidden_dim": cfg.hidden_dim, "head_dim": 16, "qk_norm": True, "n_kv_groups": 2,
         "rope_base": 1e6, "dtype": "bfloat16"}))
    loaded = load_checkpoint(tmp_path / "model.pth")
    assert loaded.label.endswith(" · read with GPT-2's tokenizer, not its own")
    assert any(n.startswith("read with GPT-2's tokenizer, not its own: no tokenizer.json or "
                            "tokenizer.model beside it, and its 50,400 token rows are not "
                            "GPT-2's 50,257") for n in loaded.notices)
    assert "ids 50,257–50,399 have no token in the tokenizer (GPT-2): 143 of the model's " \
           "50,400 rows, shown as <id N>" in "; ".join(loaded.notices)
    assert main(["generate", "Hi", "--checkpoint", str(tmp_path / "model.pth"),
                 "--max-new-tokens", "1", "--own-tokenizer"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "read with GPT-2's tokenizer, not its own; refused as asked " \
        "(--own-tokenizer)" in err[0]
    same = preset("qwen3-tiny")  # GPT-2's own 50,257 rows (a model trained here): no word
    torch.save(build_model(same, seed=1).state_dict(), tmp_path / "model.pth")
    (tmp_path / "config.json").unlink()
    loaded = load_checkpoint(tmp_path / "model.pth", own_tokenizer=True)
    assert "tokenizer" not in loaded.label and not any("tokenizer" in n for n in loaded.notices)


def test_a_config_json_cut_short_beside_a_book_pth_is_named_unreadable(tmp_path):
    """json.dump(LLAMA32_CONFIG_1B, f) without default=str stops at the dtype and leaves a
    truncated config.json: the .pth is refused naming that file as unreadable, not opened
    with another shape's rotary base; written again as the README says, it opens."""
    cfg = preset("llama-tiny", rope_base=500000.0)
    model = build_model(cfg, seed=1)
    torch.save(model.state_dict(), tmp_path / "model.pth")
    book = {"vocab_size": 50257, "context_length": 64, "emb_dim": 32, "n_heads": 4,
            "n_layers": 2, "hidden_dim": cfg.hidden_dim, "n_kv_groups": 2, "rope_base": 500000.0,
            "dtype": torch.bfloat16}
    with open(tmp_path / "config.json", "w") as f, pytest.raises(TypeError):
        json.dump(book, f)  # as a reader would, without default=str
    with pytest.raises(CheckpointError) as refused:
        load_checkpoint(tmp_path / "model.pth")
    assert str(refused.value).startswith(f"{tmp_path / 'config.json'}: not valid JSON")
    assert "the config beside the weights cannot be read" in str(refused.value)
    with open(tmp_path / "config.json", "w") as f:
        json.dump(book, f, default=str)
    loaded = load_checkpoint(tmp_path / "model.pth")
    assert loaded.config.rope_base == 500000.0
    ids = torch.tensor([[5, 9, 2]])
    with torch.no_grad():
        torch.testing.assert_close(loaded.model(ids), model.eval()(ids))


def test_a_book_qwen3_pth_is_called_qwen3_not_llama_family(tmp_path):
    """The book's Qwen3 .pth (q/k norms) opens as a Qwen3, its Llama 3 .pth as a Llama."""
    for name, word in (("qwen3-tiny", "Qwen3"), ("llama-tiny", "Llama")):
        cfg = preset(name)
        torch.save(build_model(cfg, seed=1).state_dict(), tmp_path / "model.pth")
        (tmp_path / "config.json").write_text(json.dumps(
            {"vocab_size": 50257, "context_length": 64, "emb_dim": 32, "n_heads": 4,
             "n_layers": 2, "hidden_dim": cfg.hidden_dim, "head_dim": cfg.head_dim,
             "qk_norm": cfg.qk_norm, "n_kv_groups": 2, "rope_base": cfg.rope_base}))
        assert load_checkpoint(tmp_path / "model.pth").label == \
            f"2-layer {word} (32-dim) from model.pth (PyTorch state dict)"
