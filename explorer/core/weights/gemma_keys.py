"""Gemma 3's state dicts: Hugging Face names (Gemma3ForCausalLM, text only) and the book's
(ch05/12_gemma3: blocks are ``blocks.N``, norms keep their Hugging Face names) onto ours,
and the config a folder's config.json describes. Its four norms a block map by place:
``input_layernorm`` before attention (our norm1), ``post_attention_layernorm`` after it,
inside the branch (post_norm1, not Llama's norm2), ``pre_feedforward_layernorm`` (norm2)
and ``post_feedforward_layernorm`` (post_norm2). Each stores its gain around 0, used as
1 + w, as ours does. Reads no file (checkpoints.py does)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch

from ..base.errors import CheckpointError
from ..base.validate import real
from ..gpt.config import GPTConfig
from ..gpt.families.gemma3 import GEMMA3
from ..gpt.norm_position import NormPosition
from .book_blocks import book_blocks_config
from .keymaps import NameFormat
from .llama_keys import (BLOCK_MAP, convert_book, convert_hf_names, hf_fields, hf_model_type,
                         hf_sliding, is_llama_hf_state_dict)

MODEL_TYPES = GEMMA3.files.model_types  # "gemma3_text"
WHAT = "Gemma 3"
GELU_TANH = ("gelu_pytorch_tanh", "gelu_tanh")  # Gemma's hidden_activation, by either name
_NORMS = {"input_layernorm": "norm1", "post_attention_layernorm": "post_norm1",
          "pre_feedforward_layernorm": "norm2", "post_feedforward_layernorm": "post_norm2"}
# Llama's names for attention and the feed-forward (Gemma 3 has no biases), its own norms
_BLOCK_MAP = {**{k: v for k, v in BLOCK_MAP.items() if "layernorm" not in k and "bias" not in k},
              **{f"{hf}.weight": f"{ours}.scale" for hf, ours in _NORMS.items()}}
BOOK_RENAMES = {"blocks.": "trf_blocks.", **{f".{hf}.": f".{ours}." for hf, ours in _NORMS.items()}}


def convert_hf(path: Path, sd: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    return convert_hf_names(path, sd, _BLOCK_MAP, WHAT)


def is_book_state_dict(sd: dict[str, torch.Tensor]) -> bool:
    """The book's Gemma 3: ``blocks.N`` with a norm before the feed-forward and one after."""
    return any(k.startswith("blocks.") and "pre_feedforward_layernorm" in k for k in sd)


def _refuse_what_differs(path: Path, hf: dict[str, Any]) -> None:
    act = hf.get("hidden_activation", hf.get("hidden_act", "gelu_pytorch_tanh"))
    if act not in GELU_TANH:
        raise CheckpointError(path, f"config.json's hidden_activation is {act!r}; Gemma 3's "
                                    "GeGLU uses GELU with the tanh approximation")
    for name in ("attn_logit_softcapping", "final_logit_softcapping"):
        if hf.get(name) is not None:
            raise CheckpointError(path, f"config.json caps the logits ({name} {hf[name]}), as "
                                        "Gemma 2 does; the explorer's Gemma 3 block does not")
    if hf.get("use_bidirectional_attention") or hf.get("attention_bias"):
        raise CheckpointError(path, "config.json asks for bidirectional attention or attention "
                                    "biases, which a causal Gemma 3 block does not have")


def hf_config(path: Path, sd: dict, info: dict, notices: list) -> GPTConfig:
    """The GPTConfig of a Gemma3 text config.json, every size checked against ``sd``."""
    hf = info.get("hf_config")
    if hf is None:
        raise CheckpointError(path, "a Gemma 3 state dict needs its config.json beside it")
    _refuse_what_differs(path, hf)
    fields = hf_fields(path, hf, sd, WHAT)
    scalar = hf.get("query_pre_attn_scalar", 256)
    try:
        return GPTConfig(family=GEMMA3, norm_position=NormPosition.PERI, **fields,
                         **hf_sliding(path, hf, fields["n_layers"]),
                         attn_scalar=real(scalar, "query_pre_attn_scalar in config.json", 0.0,
                                          1e9, lo_open=True))
    except ValueError as exc:
        raise CheckpointError(path, str(exc)) from None


def _book_fields(book: dict[str, Any], head_dim: int, sliding: tuple[int, ...]) -> dict:
    return dict(context_length=int(book.get("context_length", 32768)),
                rope_base=float(book.get("rope_base", 1e6)),
                rope_local_base=float(book.get("rope_local_base", 10000.0)) if sliding else None,
                norm_eps=1e-6, attn_scalar=float(book.get("query_pre_attn_scalar") or head_dim))


def book_config(path: Path, sd: dict, info: dict, notices: list) -> GPTConfig:
    """The book's Gemma 3 state dict: its config dict saved as config.json beside it
    (``n_heads``, ``layer_types`` …; its dtype left out), or the preset of its shapes."""
    return book_blocks_config(path, sd, info, GEMMA3, "Gemma 3", _book_fields)


FORMATS = (
    NameFormat("hf-gemma3", lambda sd, info: is_llama_hf_state_dict(sd)
               and hf_model_type(info) in MODEL_TYPES, convert_hf, hf_config),
    NameFormat("book-gemma3", lambda sd, info: is_book_state_dict(sd) and "config" not in info,
               lambda path, sd: convert_book(sd, BOOK_RENAMES), book_config),
)
