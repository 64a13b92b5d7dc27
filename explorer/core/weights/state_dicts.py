"""Which names a state dict uses — Hugging Face's GPT-2, Llama or Qwen; the book's
GPT-2 or Llama / Qwen3; the explorer's own — its tensors under ours, and the config that
describes it (given, stated beside it, or read off its shapes)."""

from __future__ import annotations

from pathlib import Path

from ..base.errors import CheckpointError
from ..gpt.config import GPTConfig
from . import llama_keys
from .keymaps import convert_hf_state_dict, drop_book_buffers, infer_config, is_hf_state_dict

PROJECT_FORMAT = "gpt-block-explorer"


def converted(p: Path, sd: dict, info: dict, config: GPTConfig | None, notices: list[str]):
    """The state dict in our names, its config (given, or from the file and its shapes)
    and its family of names: "hf", "hf-llama", "book-llama", "explorer" or "book"."""
    if is_hf_state_dict(sd):
        sd = convert_hf_state_dict(p, sd)
        family = "hf"
    elif llama_keys.is_llama_hf_state_dict(sd):
        sd = llama_keys.convert_hf(p, sd)
        family = "hf-llama"
    elif llama_keys.is_llama_book_state_dict(sd) and info["format"] != PROJECT_FORMAT:
        sd = llama_keys.convert_book(sd)
        family = "book-llama"
    else:
        sd = drop_book_buffers(sd)
        family = "explorer" if info["format"] == PROJECT_FORMAT else "book"
    if config is not None:
        cfg = config
    elif family == "hf-llama":
        if "hf_config" not in info:
            raise CheckpointError(p, "a Llama / Qwen state dict needs its config.json beside it "
                                     "(heads, rotary base, norm epsilon are not in the weights)")
        cfg = llama_keys.hf_config(p, info["hf_config"], sd)
    elif family == "book-llama":
        cfg = llama_keys.book_config(p, sd, info.get("book_config") or {})
    else:
        cfg = infer_config(p, sd, info, notices)
    return sd, cfg, family
