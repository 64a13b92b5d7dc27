"""GPT-2's state dicts (the key maps its family record names, ``Files.key_maps``):
Hugging Face GPT-2 names onto the book's, the config a state dict implies (from its
shapes and whatever config came with it); and, for every family, what a format of names
is (``NameFormat``) and the check of names, shapes and values against the model a
config describes. Reads no file (checkpoints.py does)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import torch

from ..gpt.config import GPTConfig, preset
from ..base.errors import CheckpointError
from ..base.validate import real, whole
from ..gpt.build import new_model


@dataclass(frozen=True)
class NameFormat:
    """One way a family's weights are named in files: whether a state dict is in it
    (``detects(sd, info)``), its tensors under the explorer's names (``convert(path,
    sd)``), the config that describes it (``config(path, sd, info, notices)``), and the
    model's name when the format tells it (``label(cfg)``, else None). A family's
    key-map module lists its formats as ``FORMATS``, most particular first."""

    name: str
    detects: Callable[[dict, dict], bool]
    convert: Callable[[Path, dict], dict]
    config: Callable[[Path, dict, dict, list], GPTConfig]
    label: Callable[[GPTConfig], str | None] = lambda cfg: None
    catch_all: bool = False  # tried after every family's other formats


RELEASED = ("gpt2-small", "gpt2-medium", "gpt2-large", "gpt2-xl")  # OpenAI's GPT-2 sizes


def preset_for_emb_dim(emb_dim: int) -> str | None:
    """The preset of OpenAI's released GPT-2 with this embedding width, if any."""
    return next((name for name in RELEASED if preset(name).emb_dim == emb_dim), None)


# --------------------------------------------------------------------------- key maps

_HF_LAYER_RE = re.compile(r"^h\.(\d+)\.(.+)$")
_HF_BLOCK_MAP = {"ln_1.weight": "norm1.scale", "ln_1.bias": "norm1.shift",
                 "ln_2.weight": "norm2.scale", "ln_2.bias": "norm2.shift",
                 "attn.c_proj.weight": "att.out_proj.weight", "attn.c_proj.bias": "att.out_proj.bias",
                 "mlp.c_fc.weight": "ff.layers.0.weight", "mlp.c_fc.bias": "ff.layers.0.bias",
                 "mlp.c_proj.weight": "ff.layers.2.weight", "mlp.c_proj.bias": "ff.layers.2.bias"}
_HF_TOP_MAP = {"wte.weight": "tok_emb.weight", "wpe.weight": "pos_emb.weight",
               "ln_f.weight": "final_norm.scale", "ln_f.bias": "final_norm.shift",
               "lm_head.weight": "out_head.weight"}
_HF_IGNORED = ("attn.bias", "attn.masked_bias")  # causal-mask buffers of older files


def is_hf_state_dict(sd: dict[str, torch.Tensor]) -> bool:
    return any(k.endswith("wte.weight") for k in sd)


def _needs_rank(path: Path, key: str, t: torch.Tensor, rank: int) -> None:
    """Refuse a tensor of another rank before any operation on it, naming what it should
    be: Conv1D weights are (in, out) matrices, biases and norm parameters vectors."""
    if isinstance(t, torch.Tensor) and t.dim() != rank:
        what = "a matrix (in, out)" if rank == 2 else "a vector"
        raise CheckpointError(path, f"{key!r} has shape {tuple(t.shape)} ({t.dim()}-d); "
                                    f"GPT-2 stores it as {what}")


def convert_hf_state_dict(path: Path, sd: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """Hugging Face GPT-2 names -> ours. Conv1D weights are (in, out): transposed; the
    fused c_attn is split into W_query, W_key, W_value. Ranks are checked first."""
    out: dict[str, torch.Tensor] = {}
    for key, t in sd.items():
        k = key[len("transformer."):] if key.startswith("transformer.") else key
        if k in _HF_TOP_MAP:
            _needs_rank(path, key, t, 1 if k.startswith("ln_f") else 2)
            out[_HF_TOP_MAP[k]] = t
            continue
        m = _HF_LAYER_RE.match(k)
        if not m:
            raise CheckpointError(path, f"unexpected key {key!r} for a GPT-2 checkpoint")
        layer, rest = m.group(1), m.group(2)
        prefix = f"trf_blocks.{layer}."
        if rest in _HF_IGNORED:
            continue
        if rest not in _HF_BLOCK_MAP and rest not in ("attn.c_attn.weight", "attn.c_attn.bias"):
            raise CheckpointError(path, f"unexpected key {key!r} for a GPT-2 checkpoint")
        matrix = rest.endswith("weight") and not rest.startswith("ln_")
        _needs_rank(path, key, t, 2 if matrix else 1)
        if rest.startswith("attn.c_attn."):
            kind = rest.rsplit(".", 1)[1]
            if t.shape[-1] % 3:
                raise CheckpointError(path, f"{key!r} has shape {tuple(t.shape)}: its last "
                                            "dimension is not 3 x emb_dim")
            for name, part in zip(("W_query", "W_key", "W_value"), t.chunk(3, dim=-1)):
                out[prefix + f"att.{name}.{kind}"] = part.t().contiguous() if matrix else part.contiguous()
            continue
        out[prefix + _HF_BLOCK_MAP[rest]] = t.t().contiguous() if matrix else t
    return out


def drop_book_buffers(sd: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    return {k: v for k, v in sd.items() if not k.endswith(".att.mask")}


# --------------------------------------------------------------------------- config

def infer_config(path: Path, sd: dict[str, torch.Tensor], info: dict[str, Any],
                 notices: list[str]) -> GPTConfig:
    """The config of a converted state dict: from the checkpoint's own config when it has
    one, otherwise from tensor shapes (heads from config.json or GPT-2's sizes)."""
    if "config" in info:
        return info["config"]
    for needed in ("tok_emb.weight", "pos_emb.weight"):
        if needed not in sd:
            raise CheckpointError(path, f"missing key {needed!r}: not a GPT-2-architecture "
                                        "state dict")
        if sd[needed].dim() != 2:
            raise CheckpointError(path, f"{needed!r} has shape {tuple(sd[needed].shape)}; an "
                                        "embedding is a matrix (rows, width)")
    vocab, emb = sd["tok_emb.weight"].shape
    context = sd["pos_emb.weight"].shape[0]
    layers = block_layers(path, sd)
    hf = info.get("hf_config")
    book = info.get("book_config") or {}
    if hf:
        _hf_agrees(path, hf, {"n_layer": len(layers), "n_embd": emb, "vocab_size": vocab,
                              "n_positions": context}, notices)
    try:
        if hf:
            n_heads = whole(hf.get("n_head"), "n_head in config.json")
        elif book:
            n_heads = whole(book.get("n_heads"), "n_heads in config.json")
    except ValueError as exc:
        raise CheckpointError(path, str(exc)) from None
    if not hf and not book:
        guess = preset_for_emb_dim(emb)
        n_heads = preset(guess).n_heads if guess else (emb // 64 if emb % 64 == 0 else 0)
        if not n_heads:
            where = ("its hparams.json (with n_head)" if info.get("format") == "openai-tf"
                     else "a config.json with n_heads")
            ignored = [n for n in info.get("notices", []) if n.startswith("ignored ")]
            raise CheckpointError(path, f"cannot tell the number of heads for emb_dim {emb}; "
                                        f"put {where} beside the file"
                                        + (f" ({ignored[0]})" if ignored else ""))
        notices.append(f"n_heads not stored in the file: assumed {n_heads} (head size "
                       f"{emb // n_heads}, as GPT-2); put a config.json with \"n_heads\" "
                       "beside the file if that is wrong")
    out_head = sd.get("out_head.weight")
    tied = out_head is None or (out_head.shape == sd["tok_emb.weight"].shape
                                and torch.equal(out_head, sd["tok_emb.weight"]))
    try:
        drop = (real(hf.get("resid_pdrop", 0.1), "resid_pdrop in config.json", 0.0, 0.999) if hf
                else real(book.get("drop_rate", 0.1), "drop_rate in config.json", 0.0, 0.999))
        return GPTConfig(vocab_size=int(vocab), context_length=int(context), emb_dim=int(emb),
                         n_heads=n_heads, n_layers=len(layers), drop_rate=drop,
                         qkv_bias="trf_blocks.0.att.W_query.bias" in sd,
                         norm_position=book.get("norm_position", "pre"), tie_weights=tied)
    except ValueError as exc:
        raise CheckpointError(path, str(exc)) from None


def _hf_agrees(path: Path, hf: dict, weights: dict[str, int], notices: list[str]) -> None:
    """A Hugging Face config.json that contradicts its weights is refused: the model is
    built from the weights' shapes, so a stated size they lack would go unsaid."""
    def read(check, *args):
        try:
            return check(*args)
        except ValueError as exc:
            raise CheckpointError(path, str(exc)) from None

    for key, have in weights.items():
        stated = hf.get(key, hf.get("n_ctx") if key == "n_positions" else None)
        if stated is not None and read(whole, stated, f"{key} in config.json") != have:
            raise CheckpointError(path, f"config.json says {key} {stated:,} but the weights have "
                                        f"{have:,}: the folder's files do not belong together")
    _hf_computes(path, hf, weights["n_embd"])
    if hf.get("layer_norm_epsilon") is not None:
        eps = read(real, hf["layer_norm_epsilon"], "layer_norm_epsilon in config.json", 0.0, 0.1,
                   True)
        if abs(eps - 1e-5) > 1e-12:
            notices.append(f"config.json gives layer_norm_epsilon {eps:g}; the explorer's "
                           "LayerNorm uses GPT-2's 1e-05")


# what GPT-2's block computes, as config.json may say it otherwise: the explorer builds
# this block, so a folder whose config asks for another would be shown computing the wrong thing
GPT2_ACTIVATIONS = ("gelu_new", "gelu_pytorch_tanh")  # GELU's tanh approximation
GPT2_FLAGS = {"scale_attn_weights": True, "scale_attn_by_inverse_layer_idx": False}


def _hf_computes(path: Path, hf: dict, emb: int) -> None:
    inner = hf.get("n_inner")
    if inner is not None and inner != 4 * emb:
        raise CheckpointError(path, f"config.json says n_inner {inner!r}; GPT-2's feed-forward "
                                    f"(the block the explorer builds) is 4 × {emb} = {4 * emb} "
                                    "wide inside"[:300])
    act = hf.get("activation_function", GPT2_ACTIVATIONS[0])
    if act not in GPT2_ACTIVATIONS:
        raise CheckpointError(path, f"config.json says activation_function {act!r}; GPT-2's "
                                    "block (the one the explorer builds) uses GELU's tanh "
                                    "approximation (gelu_new)"[:300])
    for flag, gpt2 in GPT2_FLAGS.items():
        if hf.get(flag, gpt2) != gpt2:
            raise CheckpointError(path, f"config.json says {flag} {hf[flag]!r}; GPT-2's "
                                        f"attention (the one the explorer builds) has it "
                                        f"{gpt2}"[:300])


_BLOCK_KEY = re.compile(r"^trf_blocks\.(\d+)\.")


def block_layers(path: Path, sd: dict[str, torch.Tensor]) -> list[int]:
    """The block numbers a state dict's keys name, checked to be 0..N-1."""
    layers = sorted({int(m.group(1)) for k in sd if (m := _BLOCK_KEY.match(k))})
    if not layers:
        raise CheckpointError(path, "no transformer blocks (trf_blocks.N.*) found")
    if layers != list(range(len(layers))):
        raise CheckpointError(path, f"transformer blocks are not numbered 0..N-1 ({layers[:5]}…)")
    return layers


SUPPORTED_DTYPES = (torch.float32, torch.float16, torch.bfloat16, torch.float64)


def check_tensor(path: Path, key: str, t) -> None:
    """A plain dense tensor of a floating dtype the model can use, that owns (at least)
    the bytes its shape needs: no sparse, meta or float8 tensor, no stride-0 expansion
    (a 14 KB file that would become gigabytes)."""
    if not isinstance(t, torch.Tensor):
        raise CheckpointError(path, f"{key!r} is a {type(t).__name__}, not a tensor")
    if t.layout != torch.strided:
        raise CheckpointError(path, f"{key!r} is a {t.layout} tensor; weights must be dense")
    if t.device.type == "meta":
        raise CheckpointError(path, f"{key!r} has no data (a meta tensor)")
    if t.dtype not in SUPPORTED_DTYPES:
        raise CheckpointError(path, f"{key!r} has dtype {t.dtype}; weights must be float32, "
                                    "float16, bfloat16 or float64")
    if t.numel() and t.untyped_storage().nbytes() < t.numel() * t.element_size():
        raise CheckpointError(path, f"{key!r} is an expanded view ({tuple(t.shape)} over "
                                    f"{t.untyped_storage().nbytes():,} bytes): not a plain weight")


def all_finite(t: torch.Tensor) -> bool:
    """Whether every value is finite, in one reduction and no copy: a float64 sum of
    float32 (or narrower) values cannot overflow, and an inf or NaN makes it non-finite
    (False for float64 values so large that their sum overflows: count those)."""
    return bool(torch.isfinite(t.sum(dtype=torch.float64)))


def validate_state_dict(path: Path, sd: dict[str, torch.Tensor], cfg: GPTConfig) -> None:
    """Names, shapes and values against the model the config describes; the config's
    layer count is checked against the keys before the (meta) model is built."""
    for key, t in sd.items():
        check_tensor(path, key, t)
    layers = len(block_layers(path, sd))
    if layers != cfg.n_layers:
        raise CheckpointError(path, f"the config says {cfg.n_layers:,} layers but the weights "
                                    f"have {layers:,}")
    with torch.device("meta"):
        expected = new_model(cfg).state_dict()
    missing = [k for k in expected if k not in sd and not (cfg.tie_weights and k == "out_head.weight")]
    unexpected = [k for k in sd if k not in expected]
    if missing:
        more = f" and {len(missing) - 3} more" if len(missing) > 3 else ""
        raise CheckpointError(path, f"missing key(s) {', '.join(repr(k) for k in missing[:3])}{more}")
    if unexpected:
        more = f" and {len(unexpected) - 3} more" if len(unexpected) > 3 else ""
        raise CheckpointError(path, f"unexpected key(s) {', '.join(repr(k) for k in unexpected[:3])}{more}")
    for key, ref in expected.items():
        if key not in sd:
            continue
        t = sd[key]
        if tuple(t.shape) != tuple(ref.shape):
            raise CheckpointError(path, f"shape mismatch for {key!r}: the file has "
                                        f"{tuple(t.shape)}, the model needs {tuple(ref.shape)}")
        if not t.is_floating_point():  # (check_tensor already refused it)
            raise CheckpointError(path, f"{key!r} has dtype {t.dtype}; weights must be floating point")
        # counted only when the quick test fails (float64 weights so large that their
        # sum overflows fail it while finite: their count is 0)
        bad = 0 if all_finite(t) else int((~torch.isfinite(t)).sum())
        if bad:
            raise CheckpointError(path, f"{key!r} contains {bad:,} NaN/Inf value(s)")


def _released(cfg: GPTConfig) -> str | None:
    """The preset of OpenAI's released GPT-2 of this width and depth, if it is one."""
    name = preset_for_emb_dim(cfg.emb_dim)
    return name if name and preset(name).n_layers == cfg.n_layers else None


# Hugging Face's GPT2LMHeadModel names; anything else is read under our own names: the
# book's GPTModel .pth, the explorer's own files (their config inside), OpenAI's
# TensorFlow checkpoint (read under our names by tf_checkpoint.py)
FORMATS = (
    NameFormat("hf", lambda sd, info: is_hf_state_dict(sd), convert_hf_state_dict,
               infer_config, _released),
    NameFormat("book", lambda sd, info: True, lambda path, sd: drop_book_buffers(sd),
               infer_config, catch_all=True),
)
