"""Live sampling: one step's next-token distribution reshaped by temperature, top-k and
top-p without running the model again, from the step's own logits. ``reshape`` is
numpy (it runs on the GUI thread as a slider moves), the same steps as
``generation.sampling_probabilities``, the torch code that generation draws from (a test
holds the two equal at every setting); ``sample_counts`` draws with ``generation.pick``
itself (an engine job in the app)."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

import numpy as np
import torch

from .generation import GenerationSettings, pick


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
        return top_ids(self.before, count)


def top_ids(values: np.ndarray, count: int) -> np.ndarray:
    """The ids of the ``count`` largest values, largest first, ties by id:
    ``np.argsort(-values, kind="stable")[:count]`` without sorting the whole vocabulary
    (a slider's every move asks it of 50,257 to 262,144 values: 3–20 ms sorted)."""
    count = max(0, min(count, values.size))
    if count == 0:
        return np.zeros(0, dtype=np.int64)
    kth = np.partition(values, values.size - count)[values.size - count]  # the count-th largest
    above = np.flatnonzero(values > kth)
    tied = np.flatnonzero(values == kth)[:count - above.size]
    chosen = np.concatenate([above, tied])
    return chosen[np.lexsort((chosen, -values[chosen]))]


def softmax(z: np.ndarray) -> np.ndarray:
    e = np.exp(z - z.max())
    return e / e.sum()


def distribution(logits: np.ndarray, s: GenerationSettings) -> np.ndarray:
    """What a token is drawn from under ``s``: ``generation.sampling_probabilities`` in
    numpy — every id of the model's vocabulary, the temperature, top-k, then top-p keeping the token
    that crosses p; greedy puts everything on the most likely token."""
    z = np.asarray(logits, dtype=np.float64)  # every row of the model's vocabulary
    if s.greedy:
        out = np.zeros_like(z)
        out[int(np.argmax(z))] = 1.0
        return out
    z = z / s.temperature
    if s.top_k is not None and s.top_k < z.size:
        z = np.where(z < np.partition(z, -s.top_k)[-s.top_k], -np.inf, z)
    if s.top_p is not None and s.top_p < 1.0:
        order = np.argsort(-z, kind="stable")
        cumulative = np.cumsum(softmax(z[order]))
        remove = np.empty(z.size, dtype=bool)
        remove[0], remove[1:] = False, cumulative[:-1] > s.top_p  # keep the one crossing p
        z[order[remove]] = -np.inf
    return softmax(z)


def probability(logits: np.ndarray, token: int) -> float:
    """The model's probability of a token (temperature 1, nothing cut)."""
    return float(softmax(np.asarray(logits, dtype=np.float64))[token])


def reshape(logits: np.ndarray, settings: GenerationSettings,
            chosen: int | None = None) -> Reshaped:
    """The step's distribution before and after ``settings`` (greedy: all on the top)."""
    row = np.asarray(logits, dtype=np.float64)
    return Reshaped(softmax(row), distribution(row, settings), chosen)


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
