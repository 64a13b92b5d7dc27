"""Qwen3-MoE's and OLMoE's state dicts: Hugging Face names (Qwen3MoeForCausalLM,
OlmoeForCausalLM: ``mlp.gate`` the router, ``mlp.experts.E.gate_proj / up_proj /
down_proj`` each expert's SwiGLU, as ``save_pretrained`` writes them) and the book's Qwen3 with ``num_experts`` (our names:
``ff.gate``, ``ff.fc1.E`` …) onto ours, and the config a folder's config.json or the
book's config dict describes. Reads no file (checkpoints.py does)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import torch

from ..base.errors import CheckpointError
from ..base.validate import whole
from ..gpt.config import GPTConfig
from ..gpt.families.olmoe import OLMOE
from ..gpt.families.qwen3moe import QWEN3MOE
from .book_blocks import book_blocks_config
from .keymaps import NameFormat
from .llama_keys import (BLOCK_MAP, convert_book, convert_hf_names, hf_fields, hf_model_type,
                         is_llama_hf_state_dict, SILU)

WHAT = "Qwen3-MoE / OLMoE"
# by config.json's model_type: the family, and the key naming the experts' width
OPENS = {kind: (family, width) for family, width in ((QWEN3MOE, "moe_intermediate_size"),
                                                     (OLMOE, "intermediate_size"))
         for kind in family.files.model_types}
_EXPERT = re.compile(r"\.mlp\.experts\.(\d+)\.")
_PROJ = {"gate_proj": "fc1", "up_proj": "fc2", "down_proj": "fc3"}
FIRST_EXPERT = "trf_blocks.0.ff.fc1.0.weight"


def convert_hf(path: Path, sd: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """Llama's names for attention and the norms (no biases), the router and every
    expert the file holds."""
    experts = sorted({int(m.group(1)) for k in sd for m in [_EXPERT.search(k)] if m})
    block_map = {k: v for k, v in BLOCK_MAP.items() if not k.startswith("mlp.") and "bias" not in k}
    block_map["mlp.gate.weight"] = "ff.gate.weight"
    block_map.update({f"mlp.experts.{e}.{hf}.weight": f"ff.{ours}.{e}.weight"
                      for e in experts for hf, ours in _PROJ.items()})
    return convert_hf_names(path, sd, block_map, WHAT)


def is_book_state_dict(sd: dict[str, torch.Tensor]) -> bool:
    """The book's Qwen3 with experts: a router in the feed-forward."""
    return any(k.startswith("trf_blocks.") and k.endswith(".ff.gate.weight") for k in sd)


def _experts(path: Path, sd: dict[str, torch.Tensor], stated: int, k: int) -> int:
    """The experts the router scores, checked against the config and the weights."""
    router = sd.get("trf_blocks.0.ff.gate.weight")
    if router is None or router.dim() != 2 or FIRST_EXPERT not in sd:
        raise CheckpointError(path, f"no router (ff.gate) or no expert 0 in block 0: not a {WHAT} "
                                    "state dict")
    if router.shape[0] != stated:
        raise CheckpointError(path, f"config.json says {stated} experts but the router scores "
                                    f"{router.shape[0]}")
    if not 1 <= k <= stated:
        raise CheckpointError(path, f"config.json routes each token to {k} experts of {stated}: "
                                    "it must be from 1 to the number of experts")
    return stated


def hf_config(path: Path, sd: dict, info: dict, notices: list) -> GPTConfig:
    """The GPTConfig of a Qwen3-MoE or OLMoE config.json, every size checked against ``sd``."""
    hf = info.get("hf_config")
    if hf is None:
        raise CheckpointError(path, f"a {WHAT} state dict needs its config.json beside it")
    family, width = OPENS[hf.get("model_type")]
    if hf.get("clip_qkv") is not None:
        raise CheckpointError(path, f"config.json clips queries, keys and values (clip_qkv "
                                    f"{hf['clip_qkv']}); the explorer's {family.title} block does not")
    if hf.get("hidden_act", "silu") not in SILU:
        raise CheckpointError(path, f"config.json's hidden_act is {hf['hidden_act']!r}; the "
                                    "experts' SwiGLU uses silu")
    if hf.get("mlp_only_layers") or hf.get("decoder_sparse_step", 1) != 1:
        raise CheckpointError(path, "config.json mixes dense layers among the expert layers "
                                    "(mlp_only_layers, decoder_sparse_step); the explorer opens "
                                    "models whose every layer is a mixture of experts")
    if hf.get("use_sliding_window") or hf.get("attention_bias"):
        raise CheckpointError(path, "config.json asks for sliding windows or attention biases, "
                                    f"which a {family.title} block does not have")
    try:
        n = whole(hf.get("num_experts", hf.get("num_local_experts")), "num_experts in config.json")
        k = whole(hf.get("num_experts_per_tok"), "num_experts_per_tok in config.json")
    except ValueError as exc:
        raise CheckpointError(path, str(exc)) from None
    renorm = hf.get("norm_topk_prob", False)
    if not isinstance(renorm, bool):
        raise CheckpointError(path, f"norm_topk_prob must be true or false, got {renorm!r}")
    n = _experts(path, sd, n, k)
    fields = hf_fields(path, dict(hf, intermediate_size=hf.get(width)),
                       dict(sd, **{"trf_blocks.0.ff.fc1.weight": sd[FIRST_EXPERT]}), family.title)
    try:
        return GPTConfig(family=family, **fields, n_experts=n, experts_per_token=k,
                         norm_topk_prob=renorm)
    except ValueError as exc:
        raise CheckpointError(path, str(exc)) from None


def _book_fields(book: dict[str, Any], head_dim: int, sliding: tuple[int, ...]) -> dict:
    """The book's Qwen3 config dict: its experts, routed top-k then softmax over the k
    (the renormalised weights); RMSNorm eps 1e-6 as its Qwen3 classes have it."""
    return dict(context_length=int(book.get("context_length", 40960)),
                rope_base=float(book.get("rope_base", 1e6)), norm_eps=1e-6,
                qk_norm=bool(book.get("qk_norm", True)), n_experts=int(book["num_experts"]),
                experts_per_token=int(book["num_experts_per_tok"]), norm_topk_prob=True)


def book_config(path: Path, sd: dict, info: dict, notices: list) -> GPTConfig:
    """The book's Qwen3 with experts: its config dict saved as config.json beside it
    (``n_heads``, ``num_experts`` …), or the preset of the same shapes."""
    book = info.get("book_config") or {}
    if book:
        _experts(path, sd, book.get("num_experts", 0), book.get("num_experts_per_tok", 0))
    shaped = dict(sd, **{"trf_blocks.0.ff.fc1.weight": sd.get(FIRST_EXPERT, torch.empty(0, 0))})
    return book_blocks_config(path, shaped, info, QWEN3MOE, QWEN3MOE.title, _book_fields)


FORMATS = (
    NameFormat("hf-moe", lambda sd, info: is_llama_hf_state_dict(sd)
               and hf_model_type(info) in OPENS, convert_hf, hf_config),
    NameFormat("book-qwen3moe", lambda sd, info: is_book_state_dict(sd) and "config" not in info,
               lambda path, sd: convert_book(sd), book_config),
)
