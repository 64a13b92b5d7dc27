"""The Llama family's state dicts: Hugging Face names (LlamaForCausalLM, Qwen2ForCausalLM,
Qwen3ForCausalLM) and the book's bonus-chapter names onto ours, and the config a folder's
config.json describes, checked against the weights' shapes. Reads no file
(checkpoints.py does)."""

from __future__ import annotations

import re
from enum import StrEnum
from pathlib import Path
from typing import Any

import torch

from ..base.errors import CheckpointError
from ..base.validate import real, whole
from ..gpt.config import PRESETS, GPTConfig, RopeScaling
from ..gpt import families
from ..gpt.families.llama import LLAMA
from .hf_checks import attention_as_stated, book_sizes_agree, refuse_unbuilt, rope_layouts_agree
from .keymaps import NameFormat, block_layers

class ModelType(StrEnum):
    """config.json's model_type, of the models the explorer opens as Llama-family blocks."""
    LLAMA = "llama"
    QWEN2 = "qwen2"
    QWEN3 = "qwen3"


class RopeType(StrEnum):
    """config.json's rotary scaling (``rope_type``, or ``type``) the explorer computes."""
    DEFAULT = "default"  # none
    LLAMA3 = "llama3"


class LayerType(StrEnum):
    """config.json's ``layer_types`` (Gemma 3, OLMo 3; the book's dicts too): a layer's
    attention sees a sliding window or every earlier token."""
    SLIDING = "sliding_attention"
    FULL = "full_attention"


MODEL_TYPES = tuple(ModelType)  # config.json's model_type this family opens
SILU = ("silu", "swish")  # hidden_act: transformers computes both as SiLU
assert MODEL_TYPES == LLAMA.files.model_types  # the family's record says the same

_LAYER_RE = re.compile(r"^(?:model\.)?layers\.(\d+)\.(.+)$")
BLOCK_MAP = {"input_layernorm.weight": "norm1.scale",
              "post_attention_layernorm.weight": "norm2.scale",
              "self_attn.q_proj.weight": "att.W_query.weight",
              "self_attn.q_proj.bias": "att.W_query.bias",
              "self_attn.k_proj.weight": "att.W_key.weight",
              "self_attn.k_proj.bias": "att.W_key.bias",
              "self_attn.v_proj.weight": "att.W_value.weight",
              "self_attn.v_proj.bias": "att.W_value.bias",
              "self_attn.o_proj.weight": "att.out_proj.weight",
              "self_attn.q_norm.weight": "att.q_norm.scale",
              "self_attn.k_norm.weight": "att.k_norm.scale",
              "mlp.gate_proj.weight": "ff.fc1.weight",
              "mlp.up_proj.weight": "ff.fc2.weight",
              "mlp.down_proj.weight": "ff.fc3.weight"}
_TOP_MAP = {"model.embed_tokens.weight": "tok_emb.weight", "embed_tokens.weight": "tok_emb.weight",
            "model.norm.weight": "final_norm.scale", "norm.weight": "final_norm.scale",
            "lm_head.weight": "out_head.weight"}
_IGNORED = ("self_attn.rotary_emb.inv_freq",)  # a buffer older files kept


def is_llama_hf_state_dict(sd: dict[str, torch.Tensor]) -> bool:
    return any(k.endswith("embed_tokens.weight") for k in sd)


def hf_model_type(info: dict) -> object:
    """config.json's model_type beside a Hugging Face state dict (None without one)."""
    return (info.get("hf_config") or {}).get("model_type")


def is_llama_book_state_dict(sd: dict[str, torch.Tensor]) -> bool:
    """The book's Llama 2 / 3 / Qwen3 model: a SwiGLU feed-forward under our names, in
    ``trf_blocks`` (its Gemma 3 and OLMo 3 notebooks name their blocks ``blocks``)."""
    return any(k.startswith("trf_blocks.") and k.endswith(".ff.fc1.weight") for k in sd)


def convert_hf_names(path: Path, sd: dict[str, torch.Tensor], block_map: dict[str, str],
                     what: str) -> dict[str, torch.Tensor]:
    """Hugging Face names -> ours by a family's ``block_map`` (the matrices are (out, in)
    in both); a name the family does not have is refused, naming ``what`` it is read as."""
    out: dict[str, torch.Tensor] = {}
    for key, t in sd.items():
        if key in _TOP_MAP:
            out[_TOP_MAP[key]] = t
            continue
        m = _LAYER_RE.match(key)
        if m and m.group(2) in _IGNORED:
            continue
        if not m or m.group(2) not in block_map:
            raise CheckpointError(path, f"unexpected key {key!r} for a {what} checkpoint")
        out[f"trf_blocks.{m.group(1)}.{block_map[m.group(2)]}"] = t
    return out


def convert_hf(path: Path, sd: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """Hugging Face Llama / Qwen names -> ours."""
    return convert_hf_names(path, sd, BLOCK_MAP, "Llama / Qwen")


def convert_book(sd: dict[str, torch.Tensor], renames: dict[str, str] | None = None
                 ) -> dict[str, torch.Tensor]:
    """The book's names are ours, but for nn.RMSNorm's ``weight`` (Llama 3.2's notebook;
    its Qwen3 calls it ``scale``, as we do) and the mask and angle buffers it may keep;
    ``renames``: a notebook's own block-part names (``blocks.``, its norms) -> ours."""
    out = {}
    for key, t in sd.items():
        for old, ours in (renames or {}).items():
            key = key.replace(old, ours)
        last = key.rsplit(".", 1)[-1]
        if last in ("mask", "cos", "sin") and (key.count(".") <= 3) or key.rsplit(".", 1)[-1] in (
                "cos_local", "sin_local", "cos_global", "sin_global"):
            continue  # the causal mask, RoPE's angles: made by the model, not weights
        if last == "weight" and (".norm" in key or key.startswith("final_norm")
                                 or key.endswith(("q_norm.weight", "k_norm.weight"))):
            key = key[: -len("weight")] + "scale"
        out[key] = t
    return out


def _read(path: Path, check, *args):
    try:
        return check(*args)
    except ValueError as exc:
        raise CheckpointError(path, str(exc)) from None


def _rope(path: Path, hf: dict) -> tuple[float, RopeScaling | None]:
    """θ and Llama 3's scaling, from either layout of config.json (``rope_theta`` and
    ``rope_scaling``, or transformers 5's ``rope_parameters``: of the full-attention
    layers where it has one a layer type)."""
    params = config_object(path, hf, "rope_parameters")
    if isinstance(params.get(LayerType.FULL), dict):
        params = params[LayerType.FULL]
    rope_layouts_agree(path, hf, params, config_object(path, hf, "rope_scaling"))
    scaling = config_object(path, hf, "rope_scaling") or (
        params if params.get("rope_type") not in (None, RopeType.DEFAULT) else None)
    base = hf.get("rope_theta", params.get("rope_theta", 10000.0))
    base = _read(path, real, base, "rope_theta in config.json", 1.0, 1e12)
    if not scaling:
        return base, None
    kind = scaling.get("rope_type", scaling.get("type"))
    if kind == RopeType.DEFAULT:
        return base, None
    if kind != RopeType.LLAMA3:
        raise CheckpointError(path, f"config.json asks for {kind!r} rotary scaling; the explorer "
                                    "computes RoPE without scaling or with Llama 3's")
    missing = [k for k in ("factor", "low_freq_factor", "high_freq_factor",
                           "original_max_position_embeddings") if k not in scaling]
    if missing:
        raise CheckpointError(path, f"config.json's Llama 3 rope scaling is incomplete: it "
                                    f"lacks {', '.join(missing)}")
    number = {k: _read(path, real, scaling[k], f"rope scaling's {k} in config.json", 0.0, 1e6,
                       True) for k in ("factor", "low_freq_factor", "high_freq_factor")}
    context = _read(path, whole, scaling["original_max_position_embeddings"],
                    "rope scaling's original_max_position_embeddings in config.json")
    try:
        return base, RopeScaling(number["factor"], number["low_freq_factor"],
                                 number["high_freq_factor"], context)
    except ValueError as exc:  # its own words: the factors' order
        raise CheckpointError(path, f"config.json's Llama 3 {exc}") from None


def config_object(path: Path, hf: dict, key: str) -> dict:
    """A config.json field that must be an object (``rope_scaling``): it, {} where absent
    or null, refused naming its type otherwise."""
    value = hf.get(key)
    if value is None:
        return {}
    if not isinstance(value, dict):
        kind = {str: "text", list: "a list", bool: "true or false"}.get(type(value), "a number")
        raise CheckpointError(path, f"{key} in config.json must be an object of settings, "
                                    f"got {kind}")
    return value


def _refuse_what_differs(path: Path, hf: dict[str, Any]) -> None:
    """A config.json whose block computes other than ours is refused in one line."""
    kind = hf.get("model_type")
    if kind not in MODEL_TYPES:
        raise CheckpointError(path, f"config.json's model_type is {kind!r}; the explorer opens "
                                    f"{', '.join(t for t in families.model_types() if t != 'gpt2')}"
                                    " and GPT-2")
    act = hf.get("hidden_act", "silu")
    if act not in SILU:
        raise CheckpointError(path, f"config.json's hidden_act is {act!r}; the SwiGLU block "
                                    "uses silu")
    if hf.get("mlp_bias") or (kind != ModelType.QWEN2 and hf.get("attention_bias")):
        raise CheckpointError(path, "config.json asks for biases in the feed-forward or in "
                                    "out_proj, which this block does not have")
    if hf.get("use_sliding_window"):
        raise CheckpointError(path, "config.json uses sliding-window attention; the explorer's "
                                    "attention sees every earlier token")


def hf_config(path: Path, hf: dict[str, Any], sd: dict[str, torch.Tensor]) -> GPTConfig:
    """The GPTConfig of a Hugging Face Llama / Qwen2 / Qwen3 config.json (already
    converted state dict ``sd``), every size it states checked against the weights."""
    _refuse_what_differs(path, hf)
    try:
        return GPTConfig(family=LLAMA, **hf_fields(path, hf, sd, "Llama / Qwen"))
    except ValueError as exc:
        raise CheckpointError(path, str(exc)) from None


def hf_fields(path: Path, hf: dict[str, Any], sd: dict[str, torch.Tensor],
              what: str) -> dict[str, Any]:
    """The config fields a Hugging Face config.json of a block built like Llama's states
    (sizes, heads, rotation, norm epsilon, tied head), each size checked against the
    converted state dict ``sd``; ``what`` the model is read as, for the messages. The
    attention's q/k norms and biases are the model_type's (Llama and Qwen2 have no norms,
    Qwen2 alone its q/k/v biases), or the folder is refused."""
    refuse_unbuilt(path, hf)
    for needed in ("tok_emb.weight", "trf_blocks.0.att.W_query.weight", "trf_blocks.0.att.W_key.weight",
                   "trf_blocks.0.ff.fc1.weight"):
        if needed not in sd or sd[needed].dim() != 2:
            raise CheckpointError(path, f"missing or misshapen {needed!r}: not a {what} "
                                        "state dict")
    vocab, emb = sd["tok_emb.weight"].shape
    layers = len(block_layers(path, sd))
    ff = sd["trf_blocks.0.ff.fc1.weight"].shape[0]
    stated = {"vocab_size": vocab, "hidden_size": emb, "num_hidden_layers": layers,
              "intermediate_size": ff}
    for key, have in stated.items():
        value = hf.get(key)
        if value is None:
            raise CheckpointError(path, f"config.json lacks the key {key!r}")
        if _read(path, whole, value, f"{key} in config.json") != have:
            raise CheckpointError(path, f"config.json says {key} {value:,} but the weights have "
                                        f"{have:,}: the folder's files do not belong together")
    heads = _read(path, whole, hf.get("num_attention_heads"), "num_attention_heads in config.json")
    kv = _read(path, whole, hf.get("num_key_value_heads", heads), "num_key_value_heads in config.json")
    head_dim = hf.get("head_dim")
    head_dim = _read(path, whole, head_dim, "head_dim in config.json") if head_dim else emb // heads
    q_rows, kv_rows = sd["trf_blocks.0.att.W_query.weight"].shape[0], sd["trf_blocks.0.att.W_key.weight"].shape[0]
    if (q_rows, kv_rows) != (heads * head_dim, kv * head_dim):
        raise CheckpointError(path, f"config.json says {heads} heads and {kv} key/value heads of "
                                    f"{head_dim}, but W_query has {q_rows} rows and W_key {kv_rows}")
    kind = hf.get("model_type")
    attention_as_stated(path, sd, kind, kind not in (ModelType.LLAMA, ModelType.QWEN2),
                        kind == ModelType.QWEN2)
    base, scaling = _rope(path, hf)
    eps = _read(path, real, hf.get("rms_norm_eps", 1e-6), "rms_norm_eps in config.json", 0.0, 0.1, True)
    context = _read(path, whole, hf.get("max_position_embeddings", 2048),
                    "max_position_embeddings in config.json")
    out_head = sd.get("out_head.weight")
    tie = hf.get("tie_word_embeddings", out_head is None)
    if not isinstance(tie, bool):
        raise CheckpointError(path, f"tie_word_embeddings must be true or false, got {tie!r}")
    if out_head is None and not tie:
        raise CheckpointError(path, "config.json unties the output head, but the weights have "
                                    "no lm_head.weight")
    return dict(
        vocab_size=int(vocab), context_length=context, emb_dim=int(emb),
        n_heads=heads, n_layers=layers, drop_rate=0.0,
        qkv_bias="trf_blocks.0.att.W_query.bias" in sd, tie_weights=tie,
        n_kv_groups=kv if kv != heads else None,
        head_size=head_dim if head_dim * heads != emb else None, ff_dim=int(ff),
        rope_base=base, rope_scaling=scaling,
        qk_norm="trf_blocks.0.att.q_norm.scale" in sd, norm_eps=eps)


def hf_sliding(path: Path, hf: dict[str, Any], layers: int) -> dict[str, Any]:
    """The sliding layers a config.json's ``layer_types`` names (Gemma 3, OLMo 3), their
    window, and their own θ where it has one (``rope_local_base_freq``, or the
    ``sliding_attention`` entry of ``rope_parameters``)."""
    kinds = hf.get("layer_types")
    if kinds is None:
        return {}
    if not isinstance(kinds, list) or len(kinds) != layers or not all(
            isinstance(k, str) for k in kinds) or not set(kinds) <= {
            *LayerType}:
        raise CheckpointError(path, f"config.json's layer_types must name {layers} layers, each "
                                    "sliding_attention or full_attention")
    sliding = tuple(i for i, kind in enumerate(kinds) if kind == LayerType.SLIDING)
    if not sliding:
        return {}
    window = _read(path, whole, hf.get("sliding_window"), "sliding_window in config.json")
    params = config_object(path, hf, "rope_parameters").get(LayerType.SLIDING) or {}
    local = hf.get("rope_local_base_freq", params.get("rope_theta"))
    if params.get("rope_type", "default") != RopeType.DEFAULT:
        raise CheckpointError(path, f"config.json asks for {params['rope_type']!r} rotary "
                                    "scaling in its sliding layers; the explorer computes them unscaled")
    return dict(sliding_window=window, sliding_layers=sliding,
                rope_local_base=None if local is None else _read(
                    path, real, local, "the sliding layers' rope_theta in config.json", 1.0, 1e12))


def book_config(path: Path, sd: dict[str, torch.Tensor], book: dict[str, Any]) -> GPTConfig:
    """The config of the book's Llama / Qwen3 state dict: its GPT_CONFIG dict saved as
    config.json beside it (``n_heads`` at least), or a preset of the same shapes."""
    vocab, emb = sd["tok_emb.weight"].shape
    layers = len(block_layers(path, sd))
    ff = sd["trf_blocks.0.ff.fc1.weight"].shape[0]
    q_rows, kv_rows = sd["trf_blocks.0.att.W_query.weight"].shape[0], sd["trf_blocks.0.att.W_key.weight"].shape[0]
    tie = "out_head.weight" not in sd or torch.equal(sd["out_head.weight"], sd["tok_emb.weight"])
    if not book:
        for cfg in PRESETS.values():
            if cfg.family is LLAMA and (cfg.vocab_size, cfg.emb_dim, cfg.n_layers, cfg.hidden_dim,
                              cfg.n_heads * cfg.head_dim, cfg.kv_heads * cfg.head_dim) == (
                    vocab, emb, layers, ff, q_rows, kv_rows):
                return cfg.replace(tie_weights=tie)
        raise CheckpointError(path, "cannot tell the heads of this Llama / Qwen state dict: put "
                                    "the book's config dict (with n_heads) beside it as config.json")
    book_sizes_agree(path, book, {"vocab_size": vocab, "emb_dim": emb, "n_layers": layers,
                                  "hidden_dim": ff})
    has_norm = "trf_blocks.0.att.q_norm.scale" in sd
    if "qk_norm" in book and book["qk_norm"] is not has_norm:
        raise CheckpointError(path, f"config.json says qk_norm {book['qk_norm']!r} but the weights "
                                    f"have {'' if has_norm else 'no '}q_norm: the folder's files "
                                    "do not belong together")
    heads = _read(path, whole, book.get("n_heads"), "n_heads in config.json")
    kv = _read(path, whole, book.get("n_kv_groups", heads), "n_kv_groups in config.json")
    head_dim = book.get("head_dim") or emb // heads
    freq = book.get("rope_freq")
    # the config's own eps, else the book's class's: every Qwen3 norm 1e-6 (its dict has
    # qk_norm, on or off), Llama 3's 1e-5
    eps = next((book[k] for k in ("rms_norm_eps", "norm_eps", "eps") if k in book), None)
    if eps is None:
        eps = 1e-6 if "qk_norm" in book or "trf_blocks.0.att.q_norm.scale" in sd else 1e-5
    try:
        scaling = None if not freq else RopeScaling(
            float(freq["factor"]), float(freq["low_freq_factor"]), float(freq["high_freq_factor"]),
            int(freq["original_context_length"]))
        return GPTConfig(
            family=LLAMA, vocab_size=int(vocab),
            context_length=whole(book.get("context_length", 8192), "context_length in config.json"),
            emb_dim=int(emb), n_heads=heads, n_layers=layers, drop_rate=0.0,
            qkv_bias="trf_blocks.0.att.W_query.bias" in sd, tie_weights=tie,
            n_kv_groups=kv if kv != heads else None,
            head_size=int(head_dim) if int(head_dim) * heads != emb else None, ff_dim=int(ff),
            rope_base=float(book.get("rope_base", 10000.0)), rope_scaling=scaling,
            qk_norm=has_norm,
            norm_eps=real(eps, "rms_norm_eps in config.json", 0.0, 0.1, True))
    except (KeyError, TypeError, ValueError) as exc:
        raise CheckpointError(path, f"config.json: {exc}") from None


def _hf_config(path: Path, sd: dict, info: dict, notices: list) -> GPTConfig:
    if "hf_config" not in info:
        raise CheckpointError(path, "a Llama / Qwen state dict needs its config.json beside it "
                                    "(heads, rotary base, norm epsilon are not in the weights)")
    return hf_config(path, info["hf_config"], sd)


# Hugging Face's LlamaForCausalLM / Qwen2 / Qwen3 names; the book's bonus-chapter models
# (ours, but for the norms' weight), unless the file is the explorer's own
FORMATS = (
    # a model_type no family opens is read here, and refused naming those the explorer opens
    NameFormat("hf-llama", lambda sd, info: is_llama_hf_state_dict(sd) and (
        hf_model_type(info) in MODEL_TYPES or hf_model_type(info) not in families.model_types()),
        convert_hf, _hf_config),
    NameFormat("book-llama", lambda sd, info: is_llama_book_state_dict(sd) and "config" not in info,
               lambda path, sd: convert_book(sd),
               lambda path, sd, info, notices: book_config(path, sd, info.get("book_config") or {})),
)
