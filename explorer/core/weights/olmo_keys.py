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
from ..gpt.config import PRESETS, GPTConfig
from ..gpt.families.olmo import OLMO
from ..gpt.norm_position import NormPosition
from .keymaps import NameFormat, block_layers
from .llama_keys import (BLOCK_MAP, convert_book, convert_hf_names, hf_fields, hf_model_type,
                         hf_sliding, is_llama_hf_state_dict)

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
    if act != "silu":
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


def book_config(path: Path, sd: dict, info: dict, notices: list) -> GPTConfig:
    """The book's OLMo 3 state dict: its config dict saved as config.json beside it
    (``n_heads``, ``layer_types`` …), or the preset of the same shapes."""
    book = info.get("book_config") or {}
    vocab, emb = sd["tok_emb.weight"].shape
    layers = len(block_layers(path, sd))
    tie = "out_head.weight" not in sd
    if not book:
        for cfg in PRESETS.values():
            if cfg.family is OLMO and (cfg.vocab_size, cfg.emb_dim, cfg.n_layers) == (vocab, emb, layers):
                return cfg.replace(tie_weights=tie)
        raise CheckpointError(path, "cannot tell the heads of this OLMo state dict: put the "
                                    "book's config dict (with n_heads) beside it as config.json")
    try:
        heads, kv = int(book["n_heads"]), int(book.get("n_kv_heads", book["n_heads"]))
        head_dim = int(book.get("head_dim") or emb // heads)
        kinds = book.get("layer_types") or ["full_attention"] * layers
        sliding = tuple(i for i, k in enumerate(kinds) if k == "sliding_attention")
        if book.get("rope_type", "default") != "default":
            raise CheckpointError(path, f"the config asks for {book['rope_type']!r} rotary "
                                        "scaling; the explorer computes OLMo's RoPE unscaled")
        return GPTConfig(
            family=OLMO, norm_position=NormPosition.BRANCH, vocab_size=int(vocab),
            context_length=int(book.get("context_length", 4096)), emb_dim=int(emb),
            n_heads=heads, n_layers=layers, drop_rate=0.0, qkv_bias=False, tie_weights=tie,
            n_kv_groups=kv if kv != heads else None,
            head_size=head_dim if head_dim * heads != emb else None,
            ff_dim=int(sd["trf_blocks.0.ff.fc1.weight"].shape[0]),
            rope_base=float(book.get("rope_base", 500000.0)), qk_norm=True,
            norm_eps=float(book.get("rms_norm_eps", 1e-6)),
            sliding_window=int(book["sliding_window"]) if sliding else None,
            sliding_layers=sliding)
    except (KeyError, TypeError, ValueError) as exc:
        raise CheckpointError(path, f"config.json: {exc}") from None


FORMATS = (
    NameFormat("hf-olmo", lambda sd, info: is_llama_hf_state_dict(sd)
               and hf_model_type(info) in MODEL_TYPES, convert_hf, hf_config),
    NameFormat("book-olmo", lambda sd, info: is_book_state_dict(sd) and "config" not in info,
               lambda path, sd: convert_book(sd, BOOK_RENAMES), book_config),
)
