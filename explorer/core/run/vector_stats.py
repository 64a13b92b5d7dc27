"""One vector's statistics with numpy only, for the window's GUI thread: a torch call
there would share torch's threads with the engine's pass. The definitions are those of
``stats.tensor_stats`` (a test checks that the two agree): the moments over the finite
values, NaN and Inf counted, the fixed bins of the node's range with the values below
and above counted apart, the features with the largest |value|."""

from __future__ import annotations

import math

import numpy as np

from ..gpt.nodes import HistRange
from .stats import NodeStats


def _bins(values: np.ndarray, hist: HistRange) -> tuple[np.ndarray, int, int]:
    """Counts on the range's bins as torch.histc makes them (float32 arithmetic, the top
    edge in the last bin), and the values below and above the range."""
    lo, hi, bins = np.float32(hist.lo), np.float32(hist.hi), hist.bins
    inside = values[(values >= lo) & (values <= hi)]
    index = np.floor((inside - lo) * np.float32(bins) / (hi - lo)).astype(np.int64)
    counts = np.bincount(np.clip(index, 0, bins - 1), minlength=bins)
    return counts.astype(np.int64), int((values < lo).sum()), int((values > hi).sum())


def vector_stats(vector: np.ndarray, hist: HistRange, topk: int = 5) -> NodeStats:
    """Statistics of one vector (its features), as ``tensor_stats`` gives them."""
    x = np.asarray(vector, dtype=np.float32).reshape(-1)
    finite = np.isfinite(x)
    values = x[finite].astype(np.float64)
    n_nan, n_inf = int(np.isnan(x).sum()), int(np.isinf(x).sum())
    m, nan = values.size, float("nan")
    if m:
        mean = float(values.mean())
        dev = values - mean
        var, m4 = float((dev ** 2).mean()), float((dev ** 4).mean())
        mn, mx = float(values.min()), float(values.max())
        moments = dict(mean=mean, std=math.sqrt(var), min=mn, max=mx,
                       absmax=max(abs(mn), abs(mx)), rms=math.sqrt(var + mean * mean),
                       kurtosis=m4 / (var * var) - 3.0 if var > 0 else nan,
                       frac_neg=float((values < 0).sum()) / m, frac_zero=float((values == 0).sum()) / m)
        counts, under, over = _bins(x[finite], hist)
    else:
        moments = dict(mean=nan, std=nan, min=nan, max=nan, absmax=nan, rms=nan, kurtosis=nan,
                       frac_neg=nan, frac_zero=nan)
        counts, under, over = np.zeros(hist.bins, dtype=np.int64), 0, 0
    under += int((x == -np.inf).sum())
    over += int((x == np.inf).sum())
    per_dim = np.where(finite, np.abs(x), 0.0).astype(np.float32)
    top = np.argsort(-per_dim, kind="stable")[:min(topk, per_dim.size)]
    stats = NodeStats.later(count=x.size, n_nan=n_nan, n_inf=n_inf, hist_range=hist, **{
        k: v for k, v in moments.items() if k not in ("frac_neg", "frac_zero")})
    stats._fill(dict(top_dims=top.astype(np.int64), top_values=per_dim[top],
                     token_l2=np.array([np.linalg.norm(x)], dtype=np.float32), hist=counts,
                     under=under, over=over, frac_neg=moments["frac_neg"],
                     frac_zero=moments["frac_zero"]))
    return stats
