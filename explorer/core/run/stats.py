"""Statistics of captured tensors, computed where the tensor lives (CPU or GPU), so only
a few numbers travel to the CPU, and each group of them only when something reads it.

``tensor_stats(x, hist)``: one node's whole tensor (last axis = features); many vectors
at once, one row per node, are ``row_stats.py``'s (a generated token's), with the same
definitions.

Definitions: ``std`` is the population standard deviation (ddof 0, as LayerNorm uses);
``kurtosis`` is the excess kurtosis (0 for a Gaussian); ``rms`` = sqrt(mean(x^2));
``top_dims`` are the feature indices with the largest |value| (for a whole tensor: the
largest max |value| over all positions). NaN and Inf are counted, never dropped
silently: the moments are taken over the finite values and ``n_nan``/``n_inf`` say how
many were not. Owns no hooks (see capture.py).

The statistics come in groups (``GROUPS``): the moments, the shares of signs, the
histogram, the top dimensions and the vectors' norms. A ``NodeStats`` made from a tensor
(``Source``) computes a group the first time one of its fields is read, or when asked
(``compute``, ``complete``), once, and keeps it; the same numbers as all at once.
"""

from __future__ import annotations

import math
import threading
import weakref
from dataclasses import dataclass, field

import numpy as np
import torch

from ..base.cpu_work import AHEAD, one_torch_thread
from ..gpt.nodes import HistRange
from .groups import ALL_GROUPS, DETAILS, GROUP_OF, GROUPS, MOMENTS, Group  # noqa: F401 (theirs)
from .stats_math import (FLOAT32_MAX, absmax_without, deviation_sums, histogram,
                         moment_fields, sign_counts, sum_without, sums_without, top_fields)
from . import fused
from .sweep import Sums, Sweep

DETAIL_GROUPS = tuple(g for g in ALL_GROUPS if g is not Group.MOMENTS)
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

    # Groups when read. ``of(source, now)`` computes the groups in ``now`` at once and
    # the others from ``source`` when first read; with ``keep=False`` the source is let
    # go and a field of a group not computed is an error that says so.
    @classmethod
    def of(cls, source: "Source", now=ALL_GROUPS, keep: bool = True) -> "NodeStats":
        stats = cls.__new__(cls)
        stats.__dict__.update(count=source.count, hist_range=source.hist, _source=source,
                              _todo=list(ALL_GROUPS), _lock=threading.RLock())
        with one_torch_thread(source.small and bool(now)):  # once for them all
            stats.compute_all(now)
        if not keep:
            stats.__dict__["_source"] = None
        return stats

    @classmethod
    def later(cls, **fields) -> "NodeStats":  # the rest filled in by _fill
        stats = cls.__new__(cls)
        stats.__dict__.update(fields)
        return stats

    def _fill(self, details: dict) -> None:
        self.__dict__.update(details)

    @property
    def ready(self) -> bool:
        """True when every field is computed."""
        return not self.__dict__.get("_todo")

    @property
    def moments_ready(self) -> bool:
        """True when the moments are computed (the details may still be pending)."""
        return Group.MOMENTS not in self.__dict__.get("_todo", ())

    def has(self, group: str) -> bool:
        """Whether a group (``GROUPS``) is computed."""
        return group not in (self.__dict__.get("_todo") or ())

    def compute(self, group: Group | str) -> None:
        """Compute one group now if it is still to compute (thread-safe, once)."""
        self.compute_all((Group(group),))

    def compute_all(self, groups) -> None:
        """Compute the groups in ``groups`` still to compute (and the moments, which the
        others need), in one sweep through the tensor where it allows one
        (``Source.sweep``), else one by one (thread-safe, once)."""
        todo = self.__dict__.get("_todo")
        if not todo or not any(g in todo for g in groups):
            return
        with self._lock:
            pending = [g for g in ALL_GROUPS if g in self._todo
                       and (g in groups or g is Group.MOMENTS)]
            if not any(g in groups for g in pending):
                return
            source = self.__dict__["_source"]
            if source is None:
                asked = next(g for g in pending if g in groups)
                raise AttributeError(f"the {asked} of this capture were not computed (it "
                                     f"computed only the {', '.join(self._done())})")
            fields = source.sweep(pending)
            if fields is None:  # group by group, the moments first
                fields = {}
                for group in pending:
                    fields.update(source.group(group))
            self.__dict__.update(fields)
            for group in list(self._todo):  # a sweep may give more groups than asked
                if all(name in fields for name in GROUPS[group]):
                    self._todo.remove(group)
            if not self._todo:
                self.__dict__["_source"] = None  # its tensors freed

    def _done(self) -> list[str]:
        return [g for g in ALL_GROUPS if g not in self._todo]

    def complete_moments(self) -> None:
        self.compute(Group.MOMENTS)

    def complete(self) -> None:
        """Compute every group still to compute."""
        self.compute_all(ALL_GROUPS)

    def __getattr__(self, name: str):
        # only called for an attribute not set: a field of a group still to compute
        group = GROUP_OF.get(name)
        if group is None or name.startswith("__") or group not in (self.__dict__.get("_todo") or ()):
            raise AttributeError(name)
        self.compute(group)
        return self.__dict__[name]


# Below this many values, torch's threads cost more than they save (waking them up for
# each of the ~30 small operations): measured in a forward pass of gpt2-small at T=128,
# a (128, 768) tensor's statistics took 0.6 ms on one thread and 1.1 ms on two; a
# (128, 3072) tensor's were quicker on two.
ONE_THREAD_BELOW = 1 << 18


def tensor_stats(x: torch.Tensor, hist: HistRange, topk: int = 5,
                 valid: torch.Tensor | None = None, later: bool = False,
                 now=ALL_GROUPS) -> NodeStats:
    """Statistics of a whole tensor; the last axis holds the features.

    valid: optional bool tensor of shape ``x.shape[:-1]``; only the vectors where it is
    True count (a batch's padding positions are False). Their ``token_l2`` is NaN.
    later: compute only the moments now; the DETAILS (histogram, shares of negatives and
    zeros, top dimensions, token norms) are computed from ``x`` when first read or
    ``complete()``d, so ``x`` must not change meanwhile (the same numbers as at once).
    now: the groups computed at once (``GROUPS``); the others when read, from ``x``."""
    return NodeStats.of(Source(x, hist, topk, valid), (Group.MOMENTS,) if later else now)


def ahead_stats(x: torch.Tensor, hist: HistRange, topk: int = 5) -> NodeStats:
    """``tensor_stats(x, hist, topk, now=())``, and the side thread (``cpu_work.AHEAD``,
    on a core torch leaves free) computes the moments, then the rest, while the caller
    goes on; whoever reads a group first and finds it missing computes it itself. ``x``
    must not change meanwhile."""
    stats = NodeStats.of(Source(x, hist, topk), now=())
    ref = weakref.ref(stats)  # work on statistics nobody keeps is skipped
    AHEAD.submit(lambda: (s := ref()) is not None and s.complete_moments(), urgent=True)
    AHEAD.submit(lambda: (s := ref()) is not None and s.complete())
    return stats


class Source:
    """One tensor's statistics, group by group (``group(name)``; the moments first). The
    tensor must not change while a group is still to compute."""

    def __init__(self, x: torch.Tensor, hist: HistRange, topk: int = 5,
                 valid: torch.Tensor | None = None) -> None:
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
        self.tensor, self.all_rows, self.keep = x, all_rows, keep
        self.positions = tuple(x.shape[:-1])
        self.rows = all_rows if keep is None else all_rows[keep]
        self.count = self.rows.numel()
        self.hist, self.topk = hist, topk
        self.small = x.device.type == "cpu" and x.numel() < ONE_THREAD_BELOW
        # what the moments find, for the other groups: the finite values (or all of them,
        # with ``skip`` the one kind of infinity among them), their extremes, the infinities
        self.values = self.finite_mask = self.skip = None
        self.extremes, self.infs = (math.nan, math.nan), (0, 0)
        self.mean = None  # of the finite values, once the moments are known

    def group(self, name: str) -> dict:
        fn = getattr(self, "_" + name)
        if self.small:
            with one_torch_thread():
                return fn()
        return fn()

    def sweep(self, groups) -> dict | None:
        """The fields of ``groups`` (the moments among them unless known) from one sweep
        through the tensor: the compiled kernels' (``fused``) when they are ready and
        every detail is asked for (the moments too, or known), else ``sweep.Sweep``'s;
        None where neither applies: not on a CPU, NaN among the values, no finite value,
        or a sum past float32's range (each group then alone)."""
        if self.rows.device.type != "cpu" or not self.count or self.finite_mask is not None:
            return None
        rows = self.rows if self.rows.is_contiguous() else self.rows.contiguous()
        if set(DETAIL_GROUPS) <= set(groups):  # the kernels give every group at once
            raw = fused.statistics(rows, self.hist)
            if raw is not None:
                if Group.MOMENTS in groups:  # else those already computed stay
                    self.mean, self.values = raw.mean, rows.reshape(-1)
                    self.infs = (raw.neg_inf, raw.pos_inf)
                    self.extremes = (raw.min, raw.max)
                return self._fields(raw, groups)
        if Group.MOMENTS in groups and not self._first_mean(rows.reshape(-1)):
            return None
        if self.mean is None or not abs(self.mean) < FLOAT32_MAX:
            return None
        mn, mx = self.extremes
        known = Group.MOMENTS not in groups
        raw = Sweep(rows, self.mean, self.hist, groups, skip=self.skip, skipped=sum(self.infs),
                    mx=mx if known else None, mn=mn if known else None,
                    norms=self.keep is None).run()
        if not known:
            self.extremes = (raw.min, raw.max)
        return self._fields(raw, groups)

    def _fields(self, raw: Sums, groups) -> dict:
        """The fields of ``groups`` from a sweep's sums."""
        fields, n_inf = {}, sum(self.infs)
        m = self.count - raw.n_nan - n_inf
        if Group.MOMENTS in groups:
            fields.update(moment_fields(self.mean, raw.s2, raw.s4, raw.min, raw.max, m,
                                        raw.n_nan, n_inf))
        if Group.SIGNS in groups:
            fields.update(frac_neg=raw.neg / m, frac_zero=raw.zeros / m)
        if Group.HIST in groups:
            codes, bins = raw.codes.numpy().copy(), self.hist.bins
            codes[bins] += codes[bins + 1] - raw.over  # hi itself: the last bin
            fields.update(hist=codes[1:bins + 1].astype(np.int64), under=int(codes[0]),
                          over=int(raw.over))
        if Group.TOP in groups:
            fields.update(top_fields(raw.per_dim, self.topk))
        if Group.NORMS in groups:
            fields.update(self._norms() if self.keep is not None else
                          dict(token_l2=raw.l2.reshape(self.positions).numpy()))
        return fields

    def _first_mean(self, values: torch.Tensor) -> bool:
        """The mean of the finite values, with one kind of infinity left out (``skip``);
        False where there is NaN, no finite value or a sum past float32's range. On one
        torch thread, as the sweep: the same float32 sum wherever it is taken (a sum's
        rounding follows how many threads share it)."""
        with one_torch_thread():
            mean_t = values.mean()
        first = float(mean_t)
        if math.isfinite(first):
            self.mean, self.skip, self.infs = first, None, (0, 0)
        elif math.isinf(first):
            total, k = sum_without(values, first)
            if not k or k == self.count or not math.isfinite(total):
                return False
            self.mean, self.skip = total / (self.count - k), first
            self.infs = (k, 0) if first < 0 else (0, k)
        else:
            return False
        self.values = values
        return True

    def _moments(self) -> dict:
        rows, n = self.rows, self.count
        values = rows.reshape(-1)
        mean_t = values.mean() if n else torch.tensor(float("nan"))
        n_nan = n_inf = pos_inf = neg_inf = 0
        mean = None
        if n and not bool(torch.isfinite(mean_t)):
            first = float(mean_t)
            if math.isinf(first):  # one kind of infinity, no NaN: left out, nothing copied
                n_inf, total, mn, mx = sums_without(values, first)
                pos_inf, neg_inf = (n_inf, 0) if first > 0 else (0, n_inf)
                self.skip = first
                m = n - n_inf
                mean = total / m if m else math.nan
            else:  # count the NaN and infinities, and take the moments over the rest
                self.finite_mask = torch.isfinite(rows)
                n_nan = int(torch.count_nonzero(torch.isnan(rows)))
                n_inf = n - int(torch.count_nonzero(self.finite_mask)) - n_nan
                pos_inf = int(torch.count_nonzero(rows == math.inf)) if n_inf else 0
                neg_inf = n_inf - pos_inf
                values = rows[self.finite_mask]
                mean_t = values.mean() if values.numel() else mean_t
        m = n - n_nan - n_inf
        self.values, self.infs = values, (neg_inf, pos_inf)
        if m == 0:
            nan = math.nan
            self.extremes = (nan, nan)
            return dict(mean=nan, std=nan, min=nan, max=nan, absmax=nan, rms=nan,
                        kurtosis=nan, n_nan=n_nan, n_inf=n_inf)
        if mean is None:
            mn_t, mx_t = torch.aminmax(values)
            mean, mn, mx = torch.stack([mean_t, mn_t, mx_t]).tolist()
            s2, s4 = deviation_sums(values, mean_t)
        else:
            s2, s4 = deviation_sums(values, torch.tensor(mean, dtype=torch.float32,
                                                         device=values.device), self.skip)
        self.extremes, self.mean = (mn, mx), mean
        return moment_fields(mean, s2, s4, mn, mx, m, n_nan, n_inf)

    def _signs(self) -> dict:
        values, (mn, _) = self.values, self.extremes
        m = values.numel() - (self.infs[0] + self.infs[1] if self.skip is not None else 0)
        if not m:
            return dict(frac_neg=math.nan, frac_zero=math.nan)
        if mn >= 0:  # nothing negative (e.g. attention weights): count the zeros only
            neg, zeros = 0, values.numel() - int(torch.count_nonzero(values))
        else:
            neg, zeros = sign_counts(values)
            if self.skip is not None and self.skip < 0:
                neg -= self.infs[0]  # the -inf left out were counted negative
        return dict(frac_neg=neg / m, frac_zero=zeros / m)

    def _hist(self) -> dict:
        values, (_, mx), (neg_inf, pos_inf) = self.values, self.extremes, self.infs
        hist = self.hist
        if math.isnan(mx):
            return dict(hist=np.zeros(hist.bins, dtype=np.int64), under=neg_inf, over=pos_inf)
        if self.skip is not None:  # the infinity counted below or above the range
            counts, under, over = histogram(values, hist, math.inf if pos_inf else mx)
        else:
            counts, under, over = histogram(values, hist, mx)
            under, over = under + neg_inf, over + pos_inf
        return dict(hist=np.asarray(counts, dtype=np.int64), under=int(under), over=int(over))

    def _top(self) -> dict:
        """Per feature: the largest |value| over every position; the features where it
        is largest."""
        rows, mn = self.rows, self.extremes[0]
        if rows.shape[0] == 0:  # every position is padding
            per_dim = torch.full((rows.shape[1],), float("nan"), device=rows.device)
        elif self.finite_mask is not None:
            per_dim = torch.where(self.finite_mask, rows.abs(),
                                  torch.zeros((), device=rows.device)).amax(dim=0)
        elif self.skip is not None:
            per_dim = absmax_without(rows, self.skip)
        elif rows.shape[0] == 1:  # one vector (a generated token's logits)
            per_dim = rows[0].abs()
        elif mn >= 0:  # e.g. attention weights: |x| = x, one pass, not two
            per_dim = rows.amax(dim=0)
        else:
            per_dim = torch.maximum(rows.amax(dim=0), rows.amin(dim=0).neg())
        return top_fields(per_dim, self.topk)

    def _norms(self) -> dict:
        token_l2 = torch.linalg.vector_norm(self.all_rows, dim=-1)
        if self.keep is not None:
            token_l2 = token_l2.masked_fill(~self.keep, float("nan"))
        return dict(token_l2=token_l2.reshape(self.positions).cpu().numpy())

