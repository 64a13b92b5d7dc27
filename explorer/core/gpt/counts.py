"""A model's parameters per component, as a family counts them from its config
(``Counting.count``), and the rows of the size table (``Counting.rows``). Records only:
no torch, no family, no config."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class ParameterCounts:
    embeddings: int
    attention: int
    feed_forward: int
    norms: int
    head: int  # 0 when tied to the token embedding
    # the components as the family names them: embeddings, attention, feed-forward, norms
    names: tuple[str, str, str, str] = ("embeddings", "attention", "feed-forward", "norms")

    @property
    def total(self) -> int:
        return self.embeddings + self.attention + self.feed_forward + self.norms + self.head

    def rows(self) -> list[tuple[str, int]]:
        return [
            (self.names[0], self.embeddings),
            (self.names[1], self.attention),
            (self.names[2], self.feed_forward),
            (self.names[3], self.norms),
            ("output head (out_head)" + (", tied" if not self.head else ""), self.head),
            ("total", self.total),
        ]


@dataclass(frozen=True)
class Row:
    component: str
    count: int
    per_block: int | None  # the same component in one block (None outside the blocks)
