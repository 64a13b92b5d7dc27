"""Statistics of captured tensors, computed where the tensor lives (CPU or GPU), so only
a few numbers travel to the CPU.

Two entry points with the same definitions:
- ``tensor_stats(x, hist)``: one node's whole tensor (last axis = features).
- ``row_stats(X, lo, width, bins)``: many vectors at once (one row per node), used per
  generated token, where one vectorised pass beats a hundred small ones.

Definitions: ``std`` is the population standard deviation (ddof 0, as LayerNorm uses);
``kurtosis`` is the excess kurtosis (0 for a Gaussian); ``rms`` = sqrt(mean(x^2));
``top_dims`` are the feature indices with the largest |value| (for a whole tensor: the
largest max |value| over all positions). NaN and Inf are counted, never dropped
silently: the moments are taken over the finite values and ``n_nan``/``n_inf`` say how
many were not. Owns no hooks (see capture.py).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
import torch

from .nodes import HistRange

SCALAR_NAMES = ("mean", "std", "min", "max", "absmax", "rms", "kurtosis", "frac_neg",
                "frac_zero")


@dataclass
class NodeStats:
    """What is known about one captured tensor (or one vector of it)."""

    count: int
    mean: float
    std: float
    min: float
    max: float
    absmax: float
    rms: float
    kurtosis: float
    frac_neg: float
    frac_zero: float
    n_nan: int
    n_inf: int
    top_dims: np.ndarray  # (k,) int64 feature indices, largest |value| first
    top_values: np.ndarray  # (k,) float32 |value| at those dims
    token_l2: np.ndarray  # L2 norm over the last axis, shape = tensor shape[:-1]
    hist: np.ndarray  # (bins,) int64 counts on hist_range's fixed edges
    under: int  # values below hist_range.lo (and -inf)
    over: int  # values above hist_range.hi (and +inf)
    hist_range: HistRange = field(default_factory=lambda: HistRange(-1.0, 1.0, 10))

    def scalars(self) -> dict[str, float]:
        return {name: getattr(self, name) for name in SCALAR_NAMES}


def _kurtosis(var: float, m4: float) -> float:
    return m4 / (var * var) - 3.0 if var > 0 else float("nan")


def tensor_stats(x: torch.Tensor, hist: HistRange, topk: int = 5,
                 valid: torch.Tensor | None = None) -> NodeStats:
    """Statistics of a whole tensor; the last axis holds the features.

    valid: optional bool tensor of shape ``x.shape[:-1]``; only the vectors where it is
    True count (a batch's padding positions are False). Their ``token_l2`` is NaN."""
    x = x.detach()
    if x.dim() == 0:
        x = x.reshape(1)
    all_rows = x.reshape(-1, x.shape[-1])
    if all_rows.dtype != torch.float32:
        all_rows = all_rows.float()
    keep = None
    if valid is not None:
        if tuple(valid.shape) != tuple(x.shape[:-1]):
            raise ValueError(f"the mask's shape {tuple(valid.shape)} does not match the "
                             f"tensor's positions {tuple(x.shape[:-1])}")
        keep = valid.to(device=x.device, dtype=torch.bool).reshape(-1)
    rows = all_rows if keep is None else all_rows[keep]
    n = rows.numel()
    values = rows.reshape(-1)
    mean_t = values.mean() if n else torch.tensor(float("nan"))
    n_nan = n_inf = pos_inf = neg_inf = 0
    finite_mask = None
    if n and not bool(torch.isfinite(mean_t)):
        # rare path: count the non-finite values and take the moments over the rest
        nan_mask, inf_mask = torch.isnan(rows), torch.isinf(rows)
        n_nan, n_inf = int(nan_mask.sum()), int(inf_mask.sum())
        pos_inf, neg_inf = int((rows == math.inf).sum()), int((rows == -math.inf).sum())
        finite_mask = ~(nan_mask | inf_mask)
        values = rows[finite_mask]
        mean_t = values.mean() if values.numel() else mean_t
    m = values.numel()
    if m == 0:
        nan = float("nan")
        mean = std = mn = mx = absmax = rms = kurt = frac_neg = frac_zero = nan
        hist_counts = torch.zeros(hist.bins, dtype=torch.int64)
        under, over = neg_inf, pos_inf
    else:
        d2 = (values - mean_t).square_()  # (m,) squared deviations
        var_t = d2.mean()
        m4_t = torch.dot(d2, d2) / m
        del d2
        mn_t, mx_t = torch.aminmax(values)
        neg_t = torch.count_nonzero(values < 0)
        nonzero_t = torch.count_nonzero(values)
        mean, var, m4, mn, mx, neg, nonzero = torch.stack([
            mean_t, var_t, m4_t, mn_t, mx_t, neg_t.float(), nonzero_t.float()]).tolist()
        std = math.sqrt(var)
        absmax = max(abs(mn), abs(mx))
        rms = math.sqrt(var + mean * mean)
        kurt = _kurtosis(var, m4)
        frac_neg, frac_zero = neg / m, (m - nonzero) / m
        hist_counts = torch.histc(values, bins=hist.bins, min=hist.lo, max=hist.hi)
        under = (int(torch.count_nonzero(values < hist.lo)) if mn < hist.lo else 0) + neg_inf
        over = (int(torch.count_nonzero(values > hist.hi)) if mx > hist.hi else 0) + pos_inf
    # Per feature: the largest |value| over every position.
    absrows = rows.abs()
    if finite_mask is not None:
        absrows = torch.where(finite_mask, absrows, torch.zeros((), device=rows.device))
    if rows.shape[0]:
        per_dim = absrows.amax(dim=0)
    else:  # every position is padding
        per_dim = torch.full((rows.shape[1],), float("nan"), device=rows.device)
    k = min(topk, per_dim.numel())
    top = torch.topk(per_dim, k)
    token_l2 = torch.linalg.vector_norm(all_rows, dim=-1)
    if keep is not None:
        token_l2 = token_l2.masked_fill(~keep, float("nan"))
    token_l2 = token_l2.reshape(x.shape[:-1])
    return NodeStats(
        count=n, mean=mean, std=std, min=mn, max=mx, absmax=absmax, rms=rms, kurtosis=kurt,
        frac_neg=frac_neg, frac_zero=frac_zero, n_nan=n_nan, n_inf=n_inf,
        top_dims=top.indices.cpu().numpy(), top_values=top.values.cpu().numpy(),
        token_l2=token_l2.cpu().numpy(), hist=hist_counts.round().long().cpu().numpy(),
        under=under, over=over, hist_range=hist)


@dataclass
class RowStats:
    """Statistics of R vectors computed in one pass; index with ``[r]`` for one row."""

    scalars: np.ndarray  # (R, len(SCALAR_NAMES)) float64
    n_nan: np.ndarray  # (R,)
    n_inf: np.ndarray  # (R,)
    top_dims: np.ndarray  # (R, k)
    top_values: np.ndarray  # (R, k)
    l2: np.ndarray  # (R,)
    hist: np.ndarray  # (R, bins) int64
    under: np.ndarray  # (R,)
    over: np.ndarray  # (R,)
    count: int  # values per row

    def node_stats(self, r: int, hist: HistRange) -> NodeStats:
        values = dict(zip(SCALAR_NAMES, self.scalars[r].tolist()))
        return NodeStats(count=self.count, **values, n_nan=int(self.n_nan[r]),
                         n_inf=int(self.n_inf[r]), top_dims=self.top_dims[r],
                         top_values=self.top_values[r], token_l2=np.asarray(self.l2[r]),
                         hist=self.hist[r], under=int(self.under[r]), over=int(self.over[r]),
                         hist_range=hist)


def row_stats(X: torch.Tensor, lo: torch.Tensor, width: torch.Tensor, bins: int,
              topk: int = 5) -> RowStats:
    """Statistics of each row of X (R, C); row r's histogram has ``bins`` bins of
    ``width[r]`` from ``lo[r]`` (the same convention as ``torch.histc``: the top edge
    belongs to the last bin)."""
    X = X.detach().float()
    R, C = X.shape
    finite = torch.isfinite(X)
    n_nan = torch.isnan(X).sum(1)
    n_inf = (~finite).sum(1) - n_nan
    all_finite = bool(finite.all())
    Xf = X if all_finite else torch.where(finite, X, torch.zeros((), device=X.device))
    m = finite.sum(1).clamp_min(1).float()  # (R,) finite values per row
    mean = Xf.sum(1) / m
    d2 = (Xf - mean[:, None]).square_()
    if not all_finite:
        d2 = d2 * finite
    var = d2.sum(1) / m
    m4 = (d2 * d2).sum(1) / m
    big = torch.finfo(torch.float32).max
    mn = torch.where(finite, X, torch.full((), big, device=X.device)).amin(1)
    mx = torch.where(finite, X, torch.full((), -big, device=X.device)).amax(1)
    absmax = torch.maximum(mn.abs(), mx.abs())
    rms = (var + mean * mean).sqrt()
    kurt = torch.where(var > 0, m4 / (var * var) - 3.0, torch.full((), float("nan"), device=X.device))
    frac_neg = ((X < 0) & finite).sum(1) / m
    frac_zero = (X == 0).sum(1) / m
    scalars = torch.stack([mean, var.sqrt(), mn, mx, absmax, rms, kurt, frac_neg, frac_zero], 1)
    absX = Xf.abs()
    k = min(topk, C)
    top = torch.topk(absX, k, dim=1)
    l2 = torch.linalg.vector_norm(X, dim=1)
    idx = torch.floor((X - lo[:, None]) / width[:, None])
    hi = lo + width * bins
    idx = torch.where(X == hi[:, None], torch.full((), bins - 1.0, device=X.device), idx)
    idx = idx.clamp(-1, bins).nan_to_num(nan=0.0).long() + 1  # 0 = under, bins+1 = over
    counts = torch.zeros(R, bins + 2, device=X.device)
    counts.scatter_add_(1, idx, (~torch.isnan(X)).float())
    counts = counts.round().long().cpu().numpy()
    return RowStats(
        scalars=scalars.double().cpu().numpy(), n_nan=n_nan.cpu().numpy(),
        n_inf=n_inf.cpu().numpy(), top_dims=top.indices.cpu().numpy(),
        top_values=top.values.cpu().numpy(), l2=l2.cpu().numpy(), hist=counts[:, 1:-1],
        under=counts[:, 0], over=counts[:, -1], count=C)


def branch_ratio(added: np.ndarray, branch: np.ndarray) -> np.ndarray:
    """Per position, ||branch|| / ||shortcut|| for a residual add ``added = branch +
    shortcut`` (the shortcut is recovered as ``added - branch``); shape = shape[:-1]."""
    added = np.asarray(added, dtype=np.float64)
    branch = np.asarray(branch, dtype=np.float64)
    shortcut = np.linalg.norm(added - branch, axis=-1)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.linalg.norm(branch, axis=-1) / shortcut
