"""The config of a state dict from the book's newer notebooks (Gemma 3, OLMo 3), whose
blocks are ``blocks.N``: read from the notebook's config dict saved beside it as
config.json, or, without one, the preset of the same shapes. Reads no file."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable

import torch

from ..base.errors import CheckpointError
from ..gpt.config import PRESETS, GPTConfig
from ..gpt.family import BlockFamily
from .hf_checks import book_sizes_agree
from .keymaps import block_layers
from .llama_keys import LayerType

# a family's own fields from the book's dict, given the head size and the sliding layers
Extra = Callable[[dict[str, Any], int, tuple[int, ...]], dict[str, Any]]


def book_blocks_config(path: Path, sd: dict[str, torch.Tensor], info: dict,
                       family: BlockFamily, what: str, extra: Extra) -> GPTConfig:
    """The GPTConfig of a converted ``blocks.N`` state dict of ``family``: sizes from the
    weights, heads, groups, head size and layer types from the book's dict, the rest from
    ``extra``; the family's first placement."""
    book = info.get("book_config") or {}
    vocab, emb = sd["tok_emb.weight"].shape
    layers = len(block_layers(path, sd))
    tie = "out_head.weight" not in sd or torch.equal(sd["out_head.weight"], sd["tok_emb.weight"])
    if not book:
        for cfg in PRESETS.values():
            if cfg.family is family and (cfg.vocab_size, cfg.emb_dim, cfg.n_layers) == (vocab, emb, layers):
                return cfg.replace(tie_weights=tie)
        raise CheckpointError(path, f"cannot tell the heads of this {what} state dict: put the "
                                    "book's config dict (with n_heads) beside it as config.json")
    ff = int(sd["trf_blocks.0.ff.fc1.weight"].shape[0])
    book_sizes_agree(path, book, {"vocab_size": vocab, "emb_dim": emb, "n_layers": layers,
                                  "moe_intermediate_size" if family.experts else "hidden_dim": ff})
    try:
        heads = int(book["n_heads"])
        kv = int(book.get("n_kv_heads", book.get("n_kv_groups", heads)))
        head_dim = int(book.get("head_dim") or emb // heads)
        kinds = book.get("layer_types") or [LayerType.FULL] * layers
        sliding = tuple(i for i, k in enumerate(kinds) if k == LayerType.SLIDING)
        fields = dict(
            family=family, vocab_size=int(vocab),
            emb_dim=int(emb), n_heads=heads, n_layers=layers, drop_rate=0.0, qkv_bias=False,
            tie_weights=tie, n_kv_groups=kv if kv != heads else None,
            head_size=head_dim if head_dim * heads != emb else None,
            ff_dim=ff, qk_norm=True,
            sliding_window=int(book["sliding_window"]) if sliding else None,
            sliding_layers=sliding)
        return GPTConfig(**{**fields, **extra(book, head_dim, sliding)})
    except CheckpointError:
        raise
    except (KeyError, TypeError, ValueError) as exc:
        raise CheckpointError(path, f"config.json: {exc}") from None
