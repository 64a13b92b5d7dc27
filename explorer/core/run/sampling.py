"""Live sampling: one step's next-token distribution reshaped by temperature, top-k and
top-p without running the model again — from the step's own logits, through the very
filtering code that generation samples with (``generation.sampling_probabilities``) —
and a seeded histogram of draws with ``generation.pick`` beside the exact
probabilities."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

import numpy as np
import torch

from .generation import GenerationSettings, pick, sampling_probabilities


@dataclass
class Reshaped:
    before: np.ndarray  # (V,) the model's probabilities: temperature 1, nothing cut
    after: np.ndarray  # (V,) under the settings; exactly 0 where top-k or top-p cut
    chosen: int | None  # the token the step chose (None for a prompt's next token)

    @property
    def vocab(self) -> int:
        return len(self.before)

    @cached_property
    def kept(self) -> int:
        """How many tokens can still be drawn."""
        return int(np.count_nonzero(self.after))

    @staticmethod
    def entropy(p: np.ndarray) -> float:
        """In bits."""
        nz = p[p > 0]
        return float(-(nz * np.log2(nz)).sum())

    @cached_property
    def entropy_before(self) -> float:
        return self.entropy(self.before)

    @cached_property
    def entropy_after(self) -> float:
        return self.entropy(self.after)

    def rank(self, token: int) -> int | None:
        """1 for the most likely token under the settings; None where it is cut."""
        if self.after[token] <= 0:
            return None
        return int(np.count_nonzero(self.after > self.after[token])) + 1

    def shown(self, count: int = 20) -> np.ndarray:
        """The ids to draw: the most likely before the settings, then any that the
        settings lift above them (a high temperature changes no order, top-k none)."""
        return np.argsort(-self.before, kind="stable")[:count]


def reshape(logits: np.ndarray | torch.Tensor, settings: GenerationSettings,
            chosen: int | None = None) -> Reshaped:
    """The step's distribution before and after ``settings`` (greedy: all on the top)."""
    row = torch.as_tensor(logits).float()
    before = torch.softmax(row, dim=-1).numpy().astype(np.float64)
    after = sampling_probabilities(row, settings).numpy().astype(np.float64)
    return Reshaped(before, after, chosen)


def sample_counts(logits: np.ndarray | torch.Tensor, settings: GenerationSettings,
                  draws: int = 200, seed: int = 0) -> np.ndarray:
    """How often each id comes out of ``draws`` seeded draws with generation's own
    ``pick`` (the same filtering, the same multinomial)."""
    row = torch.as_tensor(logits).float()
    gen = torch.Generator().manual_seed(seed)
    counts = np.zeros(row.shape[-1], dtype=np.int64)
    for _ in range(draws):
        counts[pick(row, settings, gen)] += 1
    return counts


def chi_square(counts: np.ndarray, probs: np.ndarray, least: float = 5.0) -> tuple[float, int]:
    """Pearson's statistic of the counts against the probabilities, the ids expected
    fewer than ``least`` times pooled into one cell; (statistic, degrees of freedom)."""
    n = counts.sum()
    expected = probs * n
    big = expected >= least
    observed = np.append(counts[big], counts[~big].sum())
    wanted = np.append(expected[big], expected[~big].sum())
    keep = wanted > 0
    observed, wanted = observed[keep], wanted[keep]
    return float(((observed - wanted) ** 2 / wanted).sum()), max(1, len(wanted) - 1)
