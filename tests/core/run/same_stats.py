"""One tensor's statistics two ways, compared: group by group (``Source.group``, each
group a pass of its own) and as ``NodeStats`` computes them (one sweep, or the compiled
kernels): counts equal, sums to float32's rounding."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch

from explorer.core.gpt.nodes import _HIST_BY_KIND as HIST_BY_KIND, HistRange, Kind
from explorer.core.run.stats import ALL_GROUPS, NodeStats, Source

NEG_INF, POS_INF = float("-inf"), float("inf")


def group_by_group(x: torch.Tensor, hist: HistRange, valid=None) -> dict:
    source, out = Source(x, hist, 5, valid), {}
    for group in ALL_GROUPS:
        out.update(source.group(group))
    return out


def at_once(x: torch.Tensor, hist: HistRange, valid=None) -> dict:
    stats = NodeStats.of(Source(x, hist, 5, valid))
    return {name: getattr(stats, name) for name in group_by_group(x, hist, valid)}


def differences(x: torch.Tensor, hist: HistRange, valid=None) -> list:
    """The fields that differ: counts and codes at all, sums past float32's rounding."""
    a, b = group_by_group(x, hist, valid), at_once(x, hist, valid)
    wrong = []
    for name, u in a.items():
        v = b[name]
        if isinstance(u, np.ndarray):
            same = (np.array_equal(u, v) if u.dtype.kind in "iu" else
                    np.allclose(u, v, rtol=1e-5, atol=1e-6, equal_nan=True))
        elif isinstance(u, int) or name in ("n_nan", "n_inf", "under", "over"):
            same = u == v
        else:  # a mean near 0 to the spread's rounding; the kurtosis, of fourth powers,
            # to 1e-4 (float32 sums of squares lose 1e-5 over a million values)
            near = {"mean": 1e-6 * abs(a["std"]), "kurtosis": 1e-4}.get(name, 1e-9)
            same = (math.isnan(u) and math.isnan(v)) or math.isclose(
                u, v, rel_tol=1e-4 if name == "kurtosis" else 2e-5, abs_tol=near)
        if not same:
            wrong.append((name, u, v))
    return wrong


def causal(rows: int, heads: int, seed: int, fill: float, scale: float = 1.0) -> torch.Tensor:
    """Scores (heads, rows, rows) with ``fill`` above the diagonal, as a masked step has."""
    g = torch.Generator().manual_seed(seed)
    above = torch.ones(rows, rows, dtype=torch.bool).triu(1)
    return (torch.randn(heads, rows, rows, generator=g) * scale).masked_fill(above, fill)


@dataclass
class Case:
    """A tensor to take the statistics of, its histogram's range, and whether the compiled
    kernels take it (they leave a histogram past 126 bins, and a block whose float32 sum
    overflows, to the other ways)."""

    x: torch.Tensor
    hist: HistRange
    kernels: bool = True


MASKED = "masked scores"  # the case several tests open


def cases(rows: int, seed: int = 0) -> dict[str, Case]:
    """Tensors of every kind a pass makes, ``rows`` vectors of each (a pattern's queries),
    each with its node kind's histogram range; and the edges of the arithmetic."""
    g = torch.Generator().manual_seed(seed)
    spread, masked = HIST_BY_KIND[Kind.NORM], HIST_BY_KIND[Kind.MASK]
    scores = causal(rows, 4, seed, NEG_INF, 30.0)
    return {
        "residual": Case(torch.randn(rows, 768, generator=g) * 4, HIST_BY_KIND[Kind.ADD]),
        "odd rows of logits": Case(torch.randn(rows, 1001, generator=g) * 60,
                                   HIST_BY_KIND[Kind.LOGITS]),
        "pattern: one bin": Case(torch.softmax(scores, -1), HIST_BY_KIND[Kind.PATTERN]),
        MASKED: Case(scores, masked),
        "masked, mean below 0": Case(scores - 200, masked),
        "masked, mean above the top": Case(scores + 300, masked),
        "+inf": Case((torch.randn(rows, 64, generator=g) * 20).masked_fill(
            torch.rand(rows, 64, generator=g) < 0.3, POS_INF), spread),
        "NaN": Case(torch.randn(rows, 64, generator=g).masked_fill(
            torch.rand(rows, 64, generator=g) < 0.3, float("nan")), spread),
        "both infinities": Case(torch.randn(rows, 64, generator=g).masked_fill(
            torch.rand(rows, 64, generator=g) < 0.1, POS_INF).masked_fill(
            torch.rand(rows, 64, generator=g) < 0.1, NEG_INF), spread),
        "values on every edge": Case((torch.arange(-2000, 2001).float() / 100).repeat(rows, 1),
                                     spread),
        "nothing negative": Case(torch.rand(rows, 77, generator=g),
                                 HIST_BY_KIND[Kind.PATTERN]),
        "all zero": Case(torch.zeros(rows, 96), spread),
        "all -inf but one": Case(torch.full((rows, 40), NEG_INF).index_fill(
            1, torch.tensor([3]), 2.5), spread),
        "300 bins": Case(torch.randn(rows, 33, generator=g), HistRange(-3.0, 3.0, 300),
                         kernels=False),
        "sums past float32": Case(torch.full((rows, 64), 3e36).index_fill(
            1, torch.tensor([5]), -1.0), spread, kernels=False),
        "columns of a wider tensor": Case(torch.randn(rows, 100, generator=g)[:, ::2], spread),
    }
