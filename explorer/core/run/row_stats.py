"""Statistics of many vectors at once, one row per node, as ``stats.tensor_stats``
defines them for a whole tensor: used per generated token, where one vectorised pass
beats a hundred small ones."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from ..gpt.nodes import HistRange
from .stats import SCALAR_NAMES, NodeStats


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


def row_stats(X: torch.Tensor, lo: torch.Tensor, hi: torch.Tensor, bins: int,
              topk: int = 5) -> RowStats:
    """Statistics of each row of X (R, C); row r's histogram has ``bins`` equal bins
    from ``lo[r]`` to ``hi[r]``, binned exactly as ``histogram``/``torch.histc`` do (the
    top edge belongs to the last bin)."""
    X = X.detach().float()
    R, C = X.shape
    finite = torch.isfinite(X)
    all_finite = bool(finite.all())
    if all_finite:  # the usual case: no masking, no NaN to count
        n_nan = n_inf = torch.zeros(R, dtype=torch.int64)
        Xf, m = X, torch.full((R,), float(C), device=X.device)
        mean = X.sum(1) / m
        d2 = (X - mean[:, None]).square_()
        mn, mx = X.amin(1), X.amax(1)
        frac_neg = (X < 0).sum(1) / m
    else:
        n_nan = torch.isnan(X).sum(1)
        n_inf = (~finite).sum(1) - n_nan
        Xf = torch.where(finite, X, torch.zeros((), device=X.device))
        m = finite.sum(1).clamp_min(1).float()  # (R,) finite values per row
        mean = Xf.sum(1) / m
        d2 = (Xf - mean[:, None]).square_() * finite
        big = torch.finfo(torch.float32).max
        mn = torch.where(finite, X, torch.full((), big, device=X.device)).amin(1)
        mx = torch.where(finite, X, torch.full((), -big, device=X.device)).amax(1)
        frac_neg = ((X < 0) & finite).sum(1) / m
    var = d2.sum(1) / m
    m4 = (d2 * d2).sum(1) / m
    absmax = torch.maximum(mn.abs(), mx.abs())
    rms = (var + mean * mean).sqrt()
    kurt = torch.where(var > 0, m4 / (var * var) - 3.0, torch.full((), float("nan"), device=X.device))
    frac_zero = (X == 0).sum(1) / m
    scalars = torch.stack([mean, var.sqrt(), mn, mx, absmax, rms, kurt, frac_neg, frac_zero], 1)
    absX = Xf.abs()
    k = min(topk, C)
    top = torch.topk(absX, k, dim=1)
    l2 = torch.linalg.vector_norm(X, dim=1)
    lo, hi = lo.float().to(X.device), hi.float().to(X.device)
    # histc's float32 arithmetic: (x - lo) * bins / (hi - lo); hi itself -> the last bin
    idx = ((X - lo[:, None]) * bins / (hi - lo)[:, None]).floor_().clamp_(-1, bins - 1)
    idx = torch.where(X < lo[:, None], -1.0, torch.where(X > hi[:, None], float(bins), idx))
    idx = (idx if all_finite else idx.nan_to_num(nan=0.0)).long() + 1  # 0 under, bins+1 over
    counts = torch.zeros(R, bins + 2, device=X.device)
    counts.scatter_add_(1, idx, torch.ones((), device=X.device).expand(R, C) if all_finite
                        else (~torch.isnan(X)).float())
    counts = counts.round().long().cpu().numpy()
    return RowStats(
        scalars=scalars.double().cpu().numpy(), n_nan=n_nan.cpu().numpy(),
        n_inf=n_inf.cpu().numpy(), top_dims=top.indices.cpu().numpy(),
        top_values=top.values.cpu().numpy(), l2=l2.cpu().numpy(), hist=counts[:, 1:-1],
        under=counts[:, 0], over=counts[:, -1], count=C)
