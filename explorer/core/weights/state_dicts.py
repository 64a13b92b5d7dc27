"""Which names a state dict uses — one of the formats each family's key-map module lists
(``BlockFamily.files.key_maps``: Hugging Face's GPT-2, Llama or Qwen names; the book's
GPT-2 or Llama / Qwen3; the explorer's own) — its tensors under ours, and the config
that describes it (given, stated beside it, or read off its shapes)."""

from __future__ import annotations

import importlib
from pathlib import Path

from ..gpt.config import GPTConfig
from ..gpt.families import FAMILIES
from ..base.errors import CheckpointError
from .keymaps import NameFormat

PROJECT_FORMAT = "gpt-block-explorer"


def formats() -> list[NameFormat]:
    """Every registered family's formats, each module once, in the families' order, the
    catch-all ones (a family's own names) last."""
    modules = dict.fromkeys(f.files.key_maps for f in FAMILIES.values())
    found = [fmt for name in modules for fmt in importlib.import_module(name).FORMATS]
    return [f for f in found if not f.catch_all] + [f for f in found if f.catch_all]


def converted(p: Path, sd: dict, info: dict, config: GPTConfig | None,
              notices: list[str]) -> tuple[dict, GPTConfig, NameFormat]:
    """The state dict in our names, its config (given, or from the file and its shapes)
    and the format of names it was in."""
    _one_name_each(p, sd)
    fmt = next(f for f in formats() if f.detects(sd, info))
    sd = fmt.convert(p, sd)
    cfg = config if config is not None else fmt.config(p, sd, info, notices)
    return sd, cfg, fmt


PREFIXES = ("model.", "transformer.", "module.")  # what a saved name may carry before ours


def _one_name_each(p: Path, sd: dict) -> None:
    """A parameter stored under two names (``embed_tokens.weight`` beside
    ``model.embed_tokens.weight``) is refused: which one the file means is not known, and
    the other order of the same bytes would give another model."""
    for key in sd:
        twin = next((f"{prefix}{key}" for prefix in PREFIXES if f"{prefix}{key}" in sd), None)
        if twin is not None:
            raise CheckpointError(p, f"'{key}' and '{twin}' are one parameter under two "
                                     "names: the file holds both, so which one it means is "
                                     "not known")

