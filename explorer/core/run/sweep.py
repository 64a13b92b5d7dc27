"""Every statistic of a tensor on a CPU in one sweep: the tensor is read from memory once,
a block of rows at a time, and every group asked for (``groups.Group``) is worked out
from that block while it sits in the core's cache; the numbers are those of
``stats.Source``'s groups one by one (the same definitions, the same histogram codes),
which read the whole tensor again for each.

Group by group, each group reads each tensor from memory again; here three things more
keep a block's work short:

- The histogram codes are stored as bytes and counted two at a time, as 16-bit numbers
  (``pair_counts``), with every other pair's low byte moved up by 128: two neighbouring
  values never add to the same count, so a histogram of one bin counts as fast as a
  spread one.
- Counts come from float32 sums of signs over a block, each an exact integer.
- One kind of infinity (``skip``, the masked scores' -inf) is replaced in the block by
  the mean of the other values, which changes no sum of deviations, no extreme and no
  sign; the few counts it does change (its bin, the negatives or zeros where the mean is
  one) are taken back, and the largest |value| per feature sees it as 0.
"""

from __future__ import annotations

import math
import threading
from dataclasses import dataclass

import torch

from ..base.cpu_work import CHUNK, one_torch_thread, scratch
from ..gpt.nodes import HistRange
from .groups import Group
from .stats_math import bucket, exact_counts

_LOCAL = threading.local()
PAIRS = 1 << 15  # the 16-bit numbers two byte codes make: both below 128, the low below 256


def _stripes(n: int) -> torch.Tensor:
    """Bytes to add to ``n`` codes: 1 (codes start at -1), and 128 more on the first byte
    of every other pair (little-endian: the low byte of its 16-bit number)."""
    stripes = scratch(n, torch.uint8, "stripes")
    full = stripes._base if stripes._base is not None else stripes
    if getattr(_LOCAL, "striped", None) is not full:  # new: fill all of it once
        with torch.inference_mode(False):
            pattern = torch.tensor([129, 1, 1, 1], dtype=torch.uint8)
            full.copy_(pattern.repeat((full.numel() + 3) // 4)[:full.numel()])
        _LOCAL.striped = full
    return stripes


def pair_counts(codes: torch.Tensor, table: torch.Tensor) -> None:
    """Add to ``table`` (PAIRS + 128 int64) the counts of ``codes`` (uint8, striped): the
    pairs' 16-bit numbers, and an odd one out in the last 128, by its code."""
    n = codes.numel() - codes.numel() % 2
    table[:PAIRS] += torch.bincount(codes[:n].view(torch.int16), minlength=PAIRS)
    if n < codes.numel():
        table[PAIRS + (int(codes[n]) & 127)] += 1


def fold(table: torch.Tensor, width: int) -> torch.Tensor:
    """The counts of each code (0 .. width - 1) from ``pair_counts``' table."""
    t = table[:PAIRS].view(128, 256)  # [high byte, low byte]
    low, high = t.sum(0), t.sum(1)
    return (low[:128] + low[128:] + high + table[PAIRS:])[:width]


def code_of(value: float, h: HistRange) -> int:
    """The code (bucket + 1) of one float32 value, as ``bucket`` finds it."""
    return int(bucket(torch.tensor([value]), torch.empty(1), h)[0]) + 1


@dataclass
class Sums:
    """A tensor's statistics before they are fields (``stats.Source``): what a sweep
    (``Sweep.run``) or the compiled kernels (``fused.statistics``) add up, for the groups
    asked for. ``codes``: each histogram code's count (0: below the range; bins + 1: at
    or above its top); ``over``: how many are above the top."""

    min: float = math.nan
    max: float = math.nan
    mean: float = math.nan  # the kernels' (a sweep is given it)
    s2: float = 0.0  # sum (x - mean)^2 of the finite values
    s4: float = 0.0
    neg: int = 0
    zeros: int = 0
    codes: torch.Tensor | None = None
    over: int = 0
    per_dim: torch.Tensor | None = None  # each feature's largest |value|
    l2: torch.Tensor | None = None  # each row's norm
    n_nan: int = 0
    pos_inf: int = 0
    neg_inf: int = 0

    def take_out(self, fill: float, k: int, hist: HistRange) -> None:
        """``k`` values that stood at ``fill`` for values not finite: out of the signs'
        counts and the bins."""
        self.neg -= k if fill < 0 else 0
        self.zeros -= k if fill == 0 else 0
        if self.codes is not None:
            self.codes[code_of(fill, hist)] -= k
            self.over -= k if fill > hist.hi else 0

    def infinities(self, neg_inf: int, pos_inf: int, hist: HistRange, nan: int = 0) -> None:
        """The infinities below and above the histogram's range; NaN in no bin."""
        self.n_nan, self.pos_inf, self.neg_inf = nan, pos_inf, neg_inf
        if self.codes is not None:
            self.codes[0] += neg_inf
            self.codes[hist.bins + 1] += pos_inf
            self.over += pos_inf


class Sweep:
    """The running sums of one sweep; ``run`` goes through the rows, block by block."""

    def __init__(self, rows: torch.Tensor, mean: float, hist: HistRange, groups,
                 skip: float | None = None, skipped: int = 0, mx: float | None = None,
                 mn: float | None = None, norms: bool = True) -> None:
        """rows: (vectors, features) float32, contiguous, no NaN; ``skip`` its one kind of
        infinity (``skipped`` of them), else none; ``mean`` of the other values; ``mx``,
        ``mn`` the extremes where known (they spare a pass); ``norms``: each row's L2
        norm too (when NORMS is asked for)."""
        self.rows, self.mean, self.skip, self.hist = rows, mean, skip, hist
        self.skipped = skipped
        self.fill = float(torch.tensor(mean, dtype=torch.float32))  # as the block sees it
        self.groups = set(groups)
        self.mx, self.mn = mx, mn  # the extremes where already known
        self.norms = norms and Group.NORMS in self.groups
        n, c = rows.shape
        self.block = max(1, (CHUNK // 2 if skip is not None else CHUNK) // max(c, 1))
        self.small = hist.bins < 127  # codes -1 .. bins + 1 fit seven bits
        self.ext, self.dev, self.signs, self.over = [], [], [], []
        self.table = torch.zeros(PAIRS + 128 if self.small else hist.bins + 2, dtype=torch.int64)
        self.top = torch.zeros(c) if Group.TOP in self.groups else None
        self.l2 = torch.empty(n) if self.norms else None

    def run(self) -> Sums:
        with one_torch_thread():
            for start in range(0, self.rows.shape[0], self.block):
                self._block(start, self.rows[start:start + self.block])
        return self._result()

    def _block(self, start: int, part: torch.Tensor) -> None:
        flat = part.reshape(-1)
        b = scratch(flat.numel(), slot="work")
        src = flat
        if self.skip is not None:  # the infinity as the mean: no deviation, no extreme
            src = scratch(flat.numel(), slot="fill")
            torch.nan_to_num(flat, out=src, **{self._key(): self.fill})
        chunk_max = None
        if Group.MOMENTS in self.groups:
            lo, hi = src.amin(), src.amax()
            self.ext.append(torch.stack([lo, hi]))
            chunk_max = float(hi)
            torch.sub(src, self.fill, out=b)
            s2 = torch.dot(b, b)
            b.square_()
            self.dev.append(torch.stack([s2, torch.dot(b, b)]))
        if Group.SIGNS in self.groups:
            torch.sign(src, out=b)
            self.signs.append(torch.stack(exact_counts(b)))
        if Group.HIST in self.groups:
            self._hist(src, b, chunk_max if chunk_max is not None else self.mx)
        if self.top is not None:
            self._top(flat, src, b, part.shape)
        if self.l2 is not None:
            torch.linalg.vector_norm(part, dim=-1, out=self.l2[start:start + part.shape[0]])

    def _key(self) -> str:
        return "posinf" if self.skip > 0 else "neginf"

    def _hist(self, src: torch.Tensor, b: torch.Tensor, mx: float | None) -> None:
        h = self.hist
        bucket(src, b, h)
        if self.small:
            codes = scratch(src.numel(), torch.uint8, "codes")
            codes.view(torch.int8).copy_(b)  # integers -1 .. 126: exact
            codes.add_(_stripes(src.numel()))
            pair_counts(codes, self.table)
        else:
            self.table += torch.bincount(b.add_(1).long(), minlength=h.bins + 2)
        if mx is None or mx > h.hi:  # x > hi exactly when x - hi > 0
            self.over.append(torch.stack(exact_counts(torch.sub(src, h.hi, out=b).sign_())))

    def _top(self, flat, src, b, shape) -> None:
        if self.skip is not None:  # the infinity counts as 0 here
            torch.nan_to_num(flat, out=b, **{self._key(): 0.0}).abs_()
            per_dim = b.view(shape).amax(0)
        elif self.mn is not None and self.mn >= 0:  # |x| = x
            per_dim = src.view(shape).amax(0)
        else:
            per_dim = torch.abs(src, out=b).view(shape).amax(0)
        torch.maximum(self.top, per_dim, out=self.top)

    def _result(self) -> Sums:
        out = Sums(mean=self.mean)
        if self.ext:
            ext = torch.stack(self.ext)
            out.min, out.max = float(ext[:, 0].min()), float(ext[:, 1].max())
            out.s2, out.s4 = torch.stack(self.dev).double().sum(0).tolist()
        if self.signs:
            balance, nonzero = torch.stack(self.signs).double().sum(0).tolist()
            out.neg, out.zeros = round((nonzero - balance) / 2), self.rows.numel() - round(nonzero)
        if Group.HIST in self.groups:
            h = self.hist
            out.codes = fold(self.table, h.bins + 2) if self.small else self.table.clone()
            if self.over:
                balance, nonzero = torch.stack(self.over).double().sum(0).tolist()
                out.over = round((nonzero + balance) / 2)
        out.per_dim, out.l2 = self.top, self.l2
        if self.skipped:  # they stood at the mean: out of the counts, then as infinities
            out.take_out(self.fill, self.skipped, self.hist)
            below = self.skipped if self.skip < 0 else 0
            out.infinities(below, self.skipped - below, self.hist)
        return out
