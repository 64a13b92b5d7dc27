"""OLMo 2 and OLMo 3's state dicts: Hugging Face names (Olmo2ForCausalLM, Olmo3ForCausalLM)
and the book's (ch05/13_olmo3: blocks are ``blocks.N``) onto ours, and the config a
folder's config.json describes. Hugging Face's ``post_attention_layernorm`` is the norm
after attention inside its branch here (our ``norm1`` in the branch order), not the norm
before the feed-forward it is in Llama and Qwen. Reads no file (checkpoints.py does)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch

from ..base.errors import CheckpointError
from ..gpt.config import GPTConfig
from ..gpt.families.olmo import OLMO
from ..gpt.norm_position import NormPosition
from .book_blocks import book_blocks_config
from .keymaps import NameFormat
from .llama_keys import (BLOCK_MAP, convert_book, convert_hf_names, hf_fields, hf_model_type,
                         hf_sliding, is_llama_hf_state_dict, SILU)

MODEL_TYPES = OLMO.files.model_types  # "olmo2", "olmo3"
WHAT = "OLMo 2 / 3"

# Llama's names for attention and the feed-forward (OLMo has no biases), its own norms
_BLOCK_MAP = {**{k: v for k, v in BLOCK_MAP.items() if "layernorm" not in k and "bias" not in k},
              "post_attention_layernorm.weight": "norm1.scale",
              "post_feedforward_layernorm.weight": "norm2.scale"}
# the book's OLMo 3 notebook: its own block list and norm names
BOOK_RENAMES = {"blocks.": "trf_blocks.", "post_attention_layernorm.": "norm1.",
                "post_feedforward_layernorm.": "norm2."}


def convert_hf(path: Path, sd: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    return convert_hf_names(path, sd, _BLOCK_MAP, WHAT)


def is_book_state_dict(sd: dict[str, torch.Tensor]) -> bool:
    """The book's OLMo 3: ``blocks.N`` with a norm after attention and none before it."""
    return any(k.startswith("blocks.") and k.endswith("post_attention_layernorm.weight")
               for k in sd) and not any("input_layernorm" in k for k in sd)


def _refuse_what_differs(path: Path, hf: dict[str, Any]) -> None:
    act = hf.get("hidden_act", "silu")
    if act not in SILU:
        raise CheckpointError(path, f"config.json's hidden_act is {act!r}; OLMo's SwiGLU uses silu")
    if hf.get("attention_bias") or hf.get("mlp_bias"):
        raise CheckpointError(path, "config.json asks for biases, which OLMo 2 and 3 do not have")


def hf_config(path: Path, sd: dict, info: dict, notices: list) -> GPTConfig:
    """The GPTConfig of an Olmo2 / Olmo3 config.json, every size checked against ``sd``."""
    hf = info.get("hf_config")
    if hf is None:
        raise CheckpointError(path, "an OLMo state dict needs its config.json beside it")
    _refuse_what_differs(path, hf)
    fields = hf_fields(path, hf, sd, WHAT)
    try:
        return GPTConfig(family=OLMO, norm_position=NormPosition.BRANCH, **fields,
                         **hf_sliding(path, hf, fields["n_layers"]))
    except ValueError as exc:
        raise CheckpointError(path, str(exc)) from None


def _book_fields(book: dict[str, Any], head_dim: int, sliding: tuple[int, ...]) -> dict:
    if book.get("rope_type", "default") != "default":
        raise ValueError(f"the config asks for {book['rope_type']!r} rotary scaling; the "
                         "explorer computes OLMo's RoPE unscaled")
    return dict(context_length=int(book.get("context_length", 4096)),
                rope_base=float(book.get("rope_base", 500000.0)),
                norm_eps=float(book.get("rms_norm_eps", 1e-6)))


def book_config(path: Path, sd: dict, info: dict, notices: list) -> GPTConfig:
    """The book's OLMo 3 state dict: its config dict saved as config.json beside it
    (``n_heads``, ``layer_types`` …), or the preset of the same shapes."""
    return book_blocks_config(path, sd, info, OLMO, "OLMo", _book_fields)


FORMATS = (
    NameFormat("hf-olmo", lambda sd, info: is_llama_hf_state_dict(sd)
               and hf_model_type(info) in MODEL_TYPES, convert_hf, hf_config),
    NameFormat("book-olmo", lambda sd, info: is_book_state_dict(sd) and "config" not in info,
               lambda path, sd: convert_book(sd, BOOK_RENAMES), book_config),
)
