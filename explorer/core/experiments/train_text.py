"""The text a small GPT trains on: "The Verdict" by default, or a file of UTF-8 text of
bounded size, checked before a byte is read, and tokenized a piece at a time."""

from __future__ import annotations

from pathlib import Path

import torch

from ..base.cancel import check
from ..base.devices import check_memory
from ..base.errors import CheckpointError
from ..base.resources import resource_path
from ..base.validate import regular_file
from ..gpt.tokenizer import encode

MAX_TEXT_BYTES = 256 * 1024 * 1024  # ~60 million tokens: far more than hours of CPU training use
CHUNK_CHARS = 1 << 16  # tokenized a piece at a time: the tokenizer's regex fails on huge runs


def _cut(text: str, start: int) -> int:
    """Where the piece starting at ``start`` ends: before a word's leading space, so the
    pieces tokenize as the whole text does; a hard cut only in a run without words."""
    end = start + CHUNK_CHARS
    if end >= len(text):
        return len(text)
    i = text.rfind(" ", start + CHUNK_CHARS // 2, end)
    while i > start and (text[i - 1].isspace() or i + 1 >= len(text) or text[i + 1].isspace()):
        i = text.rfind(" ", start + CHUNK_CHARS // 2, i)
    return i if i > start else end


def tokens_of(text: str, should_stop=None) -> torch.Tensor:
    """Token ids of a text of any length, encoded a piece at a time (int64)."""
    parts, start = [], 0
    while start < len(text):
        check(should_stop)
        end = _cut(text, start)
        parts.append(torch.tensor(encode(text[start:end]), dtype=torch.long))
        start = end
    return torch.cat(parts) if parts else torch.zeros(0, dtype=torch.long)


def default_text() -> str:
    return resource_path("the-verdict.txt").read_text(encoding="utf-8")


def read_text(path: str | Path) -> str:
    """A training text: a regular file of UTF-8 text (a FIFO would wait forever) of at
    most MAX_TEXT_BYTES, checked before a byte is read."""
    try:
        regular_file(path)
        size = Path(path).stat().st_size
        if size > MAX_TEXT_BYTES:
            raise ValueError(f"{path}: {size / 1e6:,.0f} MB of text; training reads at most "
                             f"{MAX_TEXT_BYTES / 1e6:,.0f} MB (about 60 million tokens, more than "
                             "a CPU trains on in hours): use a part of it")
        check_memory(4 * size, torch.device("cpu"), f"reading {Path(path).name}")
        return Path(path).read_text(encoding="utf-8")
    except CheckpointError as exc:
        raise ValueError(str(exc)) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ValueError(f"{path}: cannot read it as UTF-8 text ({exc})") from None
