"""Checks every family's reader makes of a folder's config against its weights: keys of a
Hugging Face config.json that change the computation in ways no block here computes, its
two rotary layouts agreeing, the attention's parts its model_type implies present in the
weights (not picked silently from either), and the sizes the book's config dict states.
Reads no file."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch

from ..base.errors import CheckpointError
from ..gpt.nodes import block_module_name
from .keymaps import block_layers

# PretrainedConfig keys that make another model than a decoder's causal stack
_UNBUILT = {"add_cross_attention": "cross-attention to an encoder's states",
            "is_encoder_decoder": "an encoder and a decoder",
            "pruned_heads": "pruned attention heads"}
# Llama 3's scaling fields, as both rotary layouts name them
_SCALING = ("factor", "low_freq_factor", "high_freq_factor", "original_max_position_embeddings")


def refuse_unbuilt(path: Path, hf: dict[str, Any]) -> None:
    """A config.json asking for what the explorer's blocks do not compute, named."""
    for key, what in _UNBUILT.items():
        if hf.get(key) not in (None, False, {}, []):
            raise CheckpointError(path, f"config.json sets {key} to {_shown(hf[key])}: {what}, "
                                        "which the explorer's blocks do not compute")


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "…"


def rope_layouts_agree(path: Path, hf: dict[str, Any], params: dict[str, Any],
                       scaling: dict[str, Any]) -> None:
    """``rope_theta`` beside ``rope_parameters``' and ``rope_scaling`` beside
    ``rope_parameters``: where both state a value they must agree (transformers resolves
    a contradiction one way when it builds the config and another when it reads one)."""
    top, nested = hf.get("rope_theta"), params.get("rope_theta")
    if top is not None and nested is not None and top != nested:
        raise CheckpointError(path, f"config.json gives two rotary bases, rope_theta {_shown(top)} "
                                    f"and rope_parameters' rope_theta {_shown(nested)}: the files "
                                    "do not say which one the model was trained with")
    if not scaling or not params or scaling is params:
        return
    kinds = [d.get("rope_type", d.get("type")) for d in (scaling, params)]
    if None not in kinds and kinds[0] != kinds[1]:
        raise CheckpointError(path, f"config.json's rope_scaling asks for {_shown(kinds[0])} "
                                    f"rotary scaling and its rope_parameters for {_shown(kinds[1])}: "
                                    "the files do not say which one the model was trained with")
    for key in _SCALING:
        if key in scaling and key in params and scaling[key] != params[key]:
            raise CheckpointError(path, f"config.json's rope_scaling gives {key} "
                                        f"{_shown(scaling[key])} and its rope_parameters "
                                        f"{_shown(params[key])}: the files do not say which one "
                                        "the model was trained with")


def attention_as_stated(path: Path, sd: dict[str, torch.Tensor], kind: object,
                        qk_norm: bool, qkv_bias: bool, bias_key: str = "attention_bias") -> None:
    """Every block of the converted ``sd`` has the q/k norms and the q/k/v biases that
    config.json's model_type ``kind`` builds (``qk_norm``, ``qkv_bias``), or is refused
    naming both: a Qwen3 relabelled ``llama`` or Qwen2 weights under ``attention_bias:
    false`` are other models than their config describes."""
    parts = {"q_norm": ("att.q_norm.scale", "att.k_norm.scale"),
             "bias": ("att.W_query.bias", "att.W_key.bias", "att.W_value.bias")}
    wants = {"q_norm": qk_norm, "bias": qkv_bias}
    said = {"q_norm": f"config.json's model_type {kind!r} "
                      + ("normalises queries and keys (q_norm, k_norm)" if qk_norm
                         else "has no norms of queries and keys"),
            "bias": f"config.json's model_type {kind!r} "
                    + ("adds biases to q, k and v" if qkv_bias
                       else f"with {bias_key} false has no biases in q, k and v")}
    hf_names = {"att.q_norm.scale": "self_attn.q_norm.weight", "att.k_norm.scale": "self_attn.k_norm.weight",
                "att.W_query.bias": "self_attn.q_proj.bias", "att.W_key.bias": "self_attn.k_proj.bias",
                "att.W_value.bias": "self_attn.v_proj.bias"}
    for layer in block_layers(path, sd):
        for part, keys in parts.items():
            have = [k for k in keys if f"{block_module_name(layer)}.{k}" in sd]
            if wants[part] and len(have) < len(keys):
                lacks = next(k for k in keys if k not in have)
                raise CheckpointError(path, f"{said[part]}, but the weights have no layers.{layer}."
                                            f"{hf_names[lacks]}: the config and the weights "
                                            "describe different models")
            if not wants[part] and have:
                raise CheckpointError(path, f"{said[part]}, but the weights have layers.{layer}."
                                            f"{hf_names[have[0]]}: the config and the weights "
                                            "describe different models")


def book_sizes_agree(path: Path, book: dict[str, Any], have: dict[str, int]) -> None:
    """The sizes a book's config dict states (``vocab_size``, ``emb_dim``, ``n_layers``,
    ``hidden_dim``…), each equal to the weights' (``have``), as a config.json's are."""
    for key, size in have.items():
        value = book.get(key)
        if value is None:
            continue
        if isinstance(value, bool) or not isinstance(value, int):
            raise CheckpointError(path, f"{key} in config.json must be a whole number, got "
                                        f"{_shown(value)}")
        if value != size:
            raise CheckpointError(path, f"config.json says {key} {value:,} but the weights have "
                                        f"{size:,}: the folder's files do not belong together")
