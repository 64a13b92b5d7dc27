"""Statistics of captured tensors, computed where the tensor lives (CPU or GPU), so only
a few numbers travel to the CPU.

``tensor_stats(x, hist)``: one node's whole tensor (last axis = features); many vectors
at once, one row per node, are ``row_stats.py``'s (a generated token's), with the same
definitions.

Definitions: ``std`` is the population standard deviation (ddof 0, as LayerNorm uses);
``kurtosis`` is the excess kurtosis (0 for a Gaussian); ``rms`` = sqrt(mean(x^2));
``top_dims`` are the feature indices with the largest |value| (for a whole tensor: the
largest max |value| over all positions). NaN and Inf are counted, never dropped
silently: the moments are taken over the finite values and ``n_nan``/``n_inf`` say how
many were not. Owns no hooks (see capture.py).
"""

from __future__ import annotations

import math
import threading
import weakref
from dataclasses import dataclass, field
from functools import partial

import numpy as np
import torch

from ..base.cpu_work import AHEAD, chunks, one_torch_thread
from ..gpt.nodes import HistRange

DETAILS = ("top_dims", "top_values", "token_l2", "hist", "under", "over", "frac_neg", "frac_zero")
MOMENTS = ("mean", "std", "min", "max", "absmax", "rms", "kurtosis", "n_nan", "n_inf")
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

    # Lazy details. A pass can compute only the moments of a node (what the first view
    # needs) and leave the details (DETAILS) to a function that computes them from the
    # node's kept tensor later, on the engine's thread (``complete``) or on first read.
    @classmethod
    def later(cls, **fields) -> "NodeStats":  # DETAILS filled in later by _fill
        stats = cls.__new__(cls)
        stats.__dict__.update(fields, _pending=None)
        return stats

    # Moments computed ahead. ``ahead_stats`` leaves the moments too (MOMENTS) to a
    # function that returns them and the function of the details; the side thread
    # (cpu_work.AHEAD) computes them while the forward goes on, and whoever reads them
    # first and finds them missing computes them itself.
    @classmethod
    def ahead(cls, count: int, hist_range: HistRange, first) -> "NodeStats":
        stats = cls.__new__(cls)
        stats.__dict__.update(count=count, hist_range=hist_range, _first=_Pending(first),
                              _pending=_Pending(None))  # found by complete_moments()
        return stats

    def _fill(self, details: dict) -> None:
        self.__dict__.update(details)

    @property
    def ready(self) -> bool:
        """True when every field is computed."""
        return self.__dict__.get("_pending") is None

    @property
    def moments_ready(self) -> bool:
        """True when the moments are computed (the details may still be pending)."""
        return self.__dict__.get("_first") is None

    def complete_moments(self) -> None:
        """Compute the moments now if they are still pending (thread-safe, once)."""
        first = self.__dict__.get("_first")
        if first is None:
            return
        with first.lock:
            if self.__dict__.get("_first") is first:
                moments, details = first.compute()
                self.__dict__.update(moments, _pending=_Pending(details))
                self.__dict__["_first"] = None

    def complete(self) -> None:
        """Compute the details now if they are still pending (thread-safe, once)."""
        self.complete_moments()
        pending = self.__dict__.get("_pending")
        if pending is None:
            return
        with pending.lock:
            if self.__dict__.get("_pending") is pending:
                self._fill(pending.compute())
                self.__dict__["_pending"] = None

    def __getattr__(self, name: str):
        # only called for an attribute not set: a moment or a detail still pending
        if name in MOMENTS and self.__dict__.get("_first") is not None:
            self.complete_moments()
            return self.__dict__[name]
        if name in DETAILS and self.__dict__.get("_pending") is not None:
            self.complete()
            return self.__dict__[name]
        raise AttributeError(name)


def histogram(values: torch.Tensor, hist: HistRange, mx: float) -> tuple[np.ndarray, int, int]:
    """Counts of finite ``values`` (1-D) on ``hist``'s fixed bins, exactly as
    ``torch.histc`` bins them (the top edge belongs to the last bin), with the values
    below and above the range counted apart; ``mx`` is the values' maximum.

    About twice as fast as histc on a CPU: each value's bin is computed with histc's own
    float32 arithmetic, floor((x - lo) * bins / (hi - lo)), clamped into [-1, bins] and
    stored as one byte (+1), and the bytes are counted with bincount. Bucket 0 holds
    exactly the values below lo (x - lo < 0). The top bucket holds the values above hi
    and any at or just below hi that the division rounded up; those above are counted
    by comparison (only when ``mx`` says there are any), the rest join the last bin.
    On a CPU it goes a chunk at a time through a reused scratch (see ``chunks``)."""
    bins, lo, hi = hist.bins, hist.lo, hist.hi
    cpu = values.device.type == "cpu"
    code_type = torch.int8 if bins < 127 and cpu else torch.int64
    counts = np.zeros(bins + 2, dtype=np.int64)
    signs = []
    for part, b in chunks(values, one_thread=True):
        b = torch.sub(part, lo, out=b) if b is not None else part - lo
        b.mul_(bins).div_(hi - lo).floor_().clamp_(-1, bins).add_(1)
        counts += torch.bincount(b.to(code_type), minlength=bins + 2).cpu().numpy()
        if mx > hi:  # x > hi exactly when x - hi > 0: count the positive signs
            signs.append(torch.stack(_exact_counts(torch.sub(part, hi, out=b).sign_())))
    over = 0
    if signs:
        balance, nonzero = torch.stack(signs).double().sum(0).tolist()
        over = round((nonzero + balance) / 2)
    under = int(counts[0])
    counts[bins] += counts[bins + 1] - over  # hi itself belongs to the last bin
    return counts[1:bins + 1], under, over


def _deviation_sums(values: torch.Tensor, mean: torch.Tensor) -> list[float]:
    """sum (x - mean)^2 and sum (x - mean)^4 of ``values``."""
    parts = []
    for part, b in chunks(values, one_thread=True):
        b = torch.sub(part, mean, out=b) if b is not None else part - mean
        s2 = torch.dot(b, b)
        b.square_()
        parts.append(torch.stack([s2.double(), torch.dot(b, b).double()]))
    return torch.stack(parts).sum(0).tolist()


def _sign_counts(values: torch.Tensor) -> tuple[float, float]:
    """(negatives, exact zeros) of ``values``, from one pass of signs (sign(-0.0) is 0:
    not negative, like numpy); exact (float32 sums of at most 2**24 signs)."""
    parts = []
    for part, b in chunks(values, one_thread=True):
        b = torch.sign(part, out=b) if b is not None else torch.sign(part)
        parts.append(torch.stack([t.double() for t in _exact_counts(b)]))
    balance, nonzero = torch.stack(parts).sum(0).tolist()
    return (nonzero - balance) / 2, values.numel() - nonzero


def _exact_counts(signs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """From a tensor of signs (-1, 0, +1): (positives - negatives, nonzeros), summed in
    float32 chunks small enough (2**24) that every partial sum is an exact integer."""
    chunk = 1 << 24
    if signs.numel() <= chunk:
        return signs.sum(), torch.dot(signs, signs)
    parts = signs.split(chunk)
    return (torch.stack([p.sum() for p in parts]).double().sum(),
            torch.stack([torch.dot(p, p) for p in parts]).double().sum())


def _kurtosis(var: float, m4: float) -> float:
    return m4 / (var * var) - 3.0 if var > 0 else float("nan")


# Below this many values, torch's threads cost more than they save (waking them up for
# each of the ~30 small operations): measured in a forward pass of gpt2-small at T=128,
# a (128, 768) tensor's statistics took 0.6 ms on one thread and 1.1 ms on two; a
# (128, 3072) tensor's were quicker on two.
ONE_THREAD_BELOW = 1 << 18
def tensor_stats(x: torch.Tensor, hist: HistRange, topk: int = 5,
                 valid: torch.Tensor | None = None, later: bool = False) -> NodeStats:
    """Statistics of a whole tensor; the last axis holds the features.

    valid: optional bool tensor of shape ``x.shape[:-1]``; only the vectors where it is
    True count (a batch's padding positions are False). Their ``token_l2`` is NaN.
    later: compute only the moments now; the DETAILS (histogram, shares of negatives and
    zeros, top dimensions, token norms) are computed from ``x`` when first read or
    ``complete()``d, so ``x`` must not change meanwhile (the same numbers as at once)."""
    if _small(x):
        return _one_thread(_tensor_stats, x, hist, topk, valid, later)
    return _tensor_stats(x, hist, topk, valid, later)


def ahead_stats(x: torch.Tensor, hist: HistRange, topk: int = 5) -> NodeStats:
    """``tensor_stats(x, hist, topk, later=True)`` with the moments also left to compute:
    the side thread (``cpu_work.AHEAD``, on a core torch leaves free) computes them, and
    then the details, while the caller goes on; ``complete_moments()``, ``complete()``
    or the first read computes what it has not yet. ``x`` must not change meanwhile."""
    small = _small(x)
    first = partial(_first_phase, x, hist, topk, None)

    def moments_and_details():
        fields, details = _one_thread(first) if small else first()
        return fields, partial(_one_thread, details) if small else details

    stats = NodeStats.ahead(x.numel(), hist, moments_and_details)
    ref = weakref.ref(stats)  # work on statistics nobody keeps is skipped
    AHEAD.submit(lambda: (s := ref()) is not None and s.complete_moments(), urgent=True)
    AHEAD.submit(lambda: (s := ref()) is not None and s.complete())
    return stats


def _tensor_stats(x: torch.Tensor, hist: HistRange, topk: int,
                  valid: torch.Tensor | None, later: bool) -> NodeStats:
    fields, details = _first_phase(x, hist, topk, valid)
    stats = NodeStats.later(**fields)
    if later:  # computed on another thread, which may have more torch threads
        stats._pending = _Pending(partial(_one_thread, details) if _small(x) else details)
    else:
        stats._fill(details())
    return stats


def _first_phase(x: torch.Tensor, hist: HistRange, topk: int, valid: torch.Tensor | None):
    """The moments (NodeStats' fields but the details) and the function of the details."""
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
        # count the non-finite values (a masked score's −inf, a NaN) and take the moments
        # over the rest; count_nonzero, not a bool tensor's sum (6× quicker at 12M values)
        finite_mask = torch.isfinite(rows)
        n_nan = int(torch.count_nonzero(torch.isnan(rows)))
        n_inf = n - int(torch.count_nonzero(finite_mask)) - n_nan
        pos_inf = int(torch.count_nonzero(rows == math.inf)) if n_inf else 0
        neg_inf = n_inf - pos_inf
        values = rows[finite_mask]
        mean_t = values.mean() if values.numel() else mean_t
    m = values.numel()
    if m == 0:
        nan = float("nan")
        moments = dict(mean=nan, std=nan, min=nan, max=nan, absmax=nan, rms=nan,
                       kurtosis=nan)
        mn = mx = nan
    else:
        mn_t, mx_t = torch.aminmax(values)
        s2, s4 = _deviation_sums(values, mean_t)
        mean, mn, mx = torch.stack([mean_t, mn_t, mx_t]).tolist()
        var, m4 = s2 / m, s4 / m
        moments = dict(mean=mean, std=math.sqrt(var), min=mn, max=mx,
                       absmax=max(abs(mn), abs(mx)), rms=math.sqrt(var + mean * mean),
                       kurtosis=_kurtosis(var, m4))
    fields = dict(count=n, n_nan=n_nan, n_inf=n_inf, hist_range=hist, **moments)
    return fields, partial(_details, x, all_rows, rows, values, keep, finite_mask, hist,
                           topk, (mn, mx), (neg_inf, pos_inf))


def _details(x, all_rows, rows, values, keep, finite_mask, hist: HistRange,
             topk: int, extremes: tuple[float, float], infs: tuple[int, int]) -> dict:
    """The statistics beyond the moments: the fixed-bin histogram, the shares of negatives
    and zeros, the top dimensions and every vector's L2 norm (``tensor_stats`` computes
    them at once, or later)."""
    neg_inf, pos_inf = infs
    mn, mx = extremes
    m = values.numel()
    if m:
        hist_counts, under, over = histogram(values, hist, mx)
        if mn >= 0:  # nothing negative (e.g. attention weights): count the zeros only
            neg, zeros = 0, m - int(torch.count_nonzero(values))
        else:
            neg, zeros = _sign_counts(values)
        frac_neg, frac_zero = neg / m, zeros / m
    else:
        hist_counts, under, over = np.zeros(hist.bins, dtype=np.int64), 0, 0
        frac_neg = frac_zero = float("nan")
    # Per feature: the largest |value| over every position.
    if rows.shape[0] == 1 and finite_mask is None:  # one vector (a generated token's logits)
        per_dim = rows[0].abs()
    elif rows.shape[0] > 1 and finite_mask is None and mn >= 0:  # e.g. attention weights
        per_dim = rows.amax(dim=0)  # |x| = x: one pass, not two
    elif rows.shape[0] > 1 and finite_mask is None:
        per_dim = torch.maximum(rows.amax(dim=0), rows.amin(dim=0).neg())
    elif rows.shape[0]:
        absrows = torch.where(finite_mask, rows.abs(), torch.zeros((), device=rows.device))
        per_dim = absrows.amax(dim=0)
    else:  # every position is padding
        per_dim = torch.full((rows.shape[1],), float("nan"), device=rows.device)
    k = min(topk, per_dim.numel())
    top = torch.topk(per_dim, k)
    token_l2 = torch.linalg.vector_norm(all_rows, dim=-1)
    if keep is not None:
        token_l2 = token_l2.masked_fill(~keep, float("nan"))
    token_l2 = token_l2.reshape(x.shape[:-1])
    return dict(top_dims=top.indices.cpu().numpy(), top_values=top.values.cpu().numpy(),
                token_l2=token_l2.cpu().numpy(), hist=np.asarray(hist_counts, dtype=np.int64),
                under=under + neg_inf, over=over + pos_inf, frac_neg=frac_neg,
                frac_zero=frac_zero)


def _small(x: torch.Tensor) -> bool:
    """Whether x's statistics are quicker on one torch thread (ONE_THREAD_BELOW)."""
    return x.device.type == "cpu" and x.numel() < ONE_THREAD_BELOW


def _one_thread(fn, *args):
    """``fn(*args)`` on one torch thread (small tensors' statistics)."""
    with one_torch_thread():
        return fn(*args)


class _Pending:
    """Details still to compute, once, by whichever thread asks first."""

    def __init__(self, compute) -> None:
        self.compute = compute
        self.lock = threading.Lock()
