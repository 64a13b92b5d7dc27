"""Several prompts at once, as the book traces them (a batch of 2 samples x 3 tokens):
the batch dimension becomes visible at every node.

Prompts of unequal length are padded on the right to the longest. Right padding keeps
every real token's values exactly what they are when its prompt runs alone: attention is
causal, so a real position never looks at a later (padding) one. The padding positions
still flow through the model and produce values; ``Batch.mask`` marks the real ones,
and captures use it so padding is never mixed into statistics (see ``capture.Capture``).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from .generation import prepare_prompt
from ..gpt.tokenizer import Tokenizer, gpt2_tokenizer

PAD_ID = 0  # an id of every vocabulary: padding is masked out, so what it holds never counts
PAD_LABEL = "[pad]"
MAX_BATCH = 16


def shown_piece(piece: str) -> str:
    """A token piece as labels show it: quoted, except the padding marker."""
    return piece if piece == PAD_LABEL else repr(piece)


@dataclass(frozen=True)
class Batch:
    """Token ids of B prompts padded to T positions, and which positions are real."""

    ids: tuple[tuple[int, ...], ...]  # (B, T), padded with PAD_ID
    lengths: tuple[int, ...]  # real tokens per sample
    notices: tuple[str, ...] = ()
    tokenizer: Tokenizer | None = field(default=None, compare=False, repr=False)  # None: GPT-2's

    @property
    def size(self) -> int:
        return len(self.ids)

    @property
    def width(self) -> int:
        return len(self.ids[0]) if self.ids else 0

    @property
    def padded(self) -> int:
        """Padding positions in the whole batch."""
        return self.size * self.width - sum(self.lengths)

    @property
    def mask(self) -> np.ndarray:
        """(B, T) bool: True at real tokens, False at padding."""
        return np.arange(self.width)[None, :] < np.asarray(self.lengths)[:, None]

    def sample(self, b: int) -> list[int]:
        """Sample b's real ids (no padding)."""
        return list(self.ids[b][: self.lengths[b]])

    def pieces(self, b: int) -> list[str]:
        """Sample b's row of pieces, padding positions labelled ``[pad]``."""
        tok = self.tokenizer or gpt2_tokenizer()
        return [tok.token_piece(t) if i < self.lengths[b] else PAD_LABEL
                for i, t in enumerate(self.ids[b])]

    def row_labels(self) -> list[str]:
        """One label per (sample, position), in the order of ``x.reshape(-1, C)``."""
        return [f"s{b} {t}: {shown_piece(p)}"
                for b in range(self.size) for t, p in enumerate(self.pieces(b))]

    def describe(self) -> str:
        shape = f"{self.size} prompts × {self.width} positions"
        if not self.padded:
            return shape
        return (f"{shape}; {self.padded} padding position"
                f"{'s' if self.padded != 1 else ''} kept out of every statistic")


def split_prompts(text: str) -> list[str]:
    """One prompt per line (a line ends at a newline only: a form feed or U+2028 inside a
    prompt stays in it); blank lines are skipped."""
    return [line.removesuffix("\r") for line in text.split("\n") if line.strip()]


def check_prompts(prompts: list) -> None:
    """A batch's count, and no prompt empty as typed (before any tokenizer reads it):
    ValueError naming the prompt."""
    if not prompts:
        raise ValueError("the batch is empty: type one prompt per line")
    if len(prompts) > MAX_BATCH:
        raise ValueError(f"the batch has {len(prompts)} prompts; at most {MAX_BATCH} are shown at once")
    for b, prompt in enumerate(prompts):
        if len(prompts) > 1 and not prompt:
            raise ValueError(f"prompt {b + 1} of the batch is empty")


def make_batch(prompts: list[str] | list[list[int]], context_length: int,
               tokenizer: Tokenizer | None = None) -> Batch:
    """Tokenize (when given text), crop each prompt to the context, pad on the right.
    Raises ValueError, naming the prompt, for an empty batch or an empty prompt."""
    check_prompts(prompts)
    rows, notices = [], []
    for b, prompt in enumerate(prompts):
        ids = (tokenizer or gpt2_tokenizer()).encode(prompt) if isinstance(prompt, str) else list(prompt)
        if not ids:
            raise ValueError(f"prompt {b + 1} of the batch is empty")
        ids, notes = prepare_prompt(ids, context_length, tokenizer=tokenizer)
        notices += [f"prompt {b + 1}: {n}" for n in notes]
        rows.append(ids)
    width = max(len(r) for r in rows)
    return Batch(ids=tuple(tuple(r + [PAD_ID] * (width - len(r))) for r in rows),
                 lengths=tuple(len(r) for r in rows), notices=tuple(notices), tokenizer=tokenizer)
