"""The arithmetic of a tensor's statistics on a CPU or a GPU (``stats.py`` says what each
statistic is): a chunk at a time through a reused scratch on a CPU (``cpu_work.chunks``),
exact counts from float32 sums, and one infinity left out without copying the rest (a
masked score's -inf: half of a causal T × T tensor)."""

from __future__ import annotations

import math

import numpy as np
import torch

from ..base.cpu_work import CHUNK, chunks, one_torch_thread, scratch
from ..gpt.nodes import HistRange


def _filled(part: torch.Tensor, skip: float, value: float, scratch) -> torch.Tensor:
    """``part`` with every value equal to ``skip`` (an infinity) replaced by ``value``."""
    kw = {"posinf": value} if skip > 0 else {"neginf": value}
    return torch.nan_to_num(part, out=scratch, **kw) if scratch is not None else \
        torch.nan_to_num(part, **kw)


def sum_without(values: torch.Tensor, skip: float) -> tuple[float, int]:
    """(the sum of the values other than ``skip``, how many equal ``skip``) for values
    with no NaN and ``skip`` their only kind of infinity: each part's float32 sum with
    ``skip`` set to 0, and the count from signs (a value set to 0 loses its sign), exact."""
    total, lost = [], []
    key = "posinf" if skip > 0 else "neginf"
    for part, b in chunks(values, one_thread=True):
        f = torch.sign(part, out=b) if b is not None else torch.sign(part)
        before = torch.dot(f, f)
        torch.nan_to_num(part, out=f, **{key: 0.0})
        total.append(f.sum())
        f.sign_()
        lost.append(before - torch.dot(f, f))
    return float(torch.stack(total).double().sum()), int(torch.stack(lost).double().sum())


def sums_without(values: torch.Tensor, skip: float) -> tuple[int, float, float, float]:
    """(how many values equal ``skip``, the sum, min and max of the others) for values
    with no NaN and one kind of infinity, ``skip``; min and max are NaN when none is left."""
    total, skipped = sum_without(values, skip)
    if skipped == values.numel():
        return skipped, total, math.nan, math.nan
    big = torch.finfo(torch.float32).max
    lo, hi = math.inf, -math.inf
    for part, b in chunks(values, one_thread=True):
        if skip < 0:  # -inf never the max; as +big never the min
            mx, mn = part.amax(), _filled(part, skip, big, b).amin()
        else:
            mn, mx = part.amin(), _filled(part, skip, -big, b).amax()
        lo, hi = min(lo, float(mn)), max(hi, float(mx))
    return skipped, total, lo, hi


def absmax_without(rows: torch.Tensor, skip: float) -> torch.Tensor:
    """Per feature (column), the largest |value| of ``rows`` (no NaN), the values equal
    to ``skip`` (an infinity) counted as 0; on a CPU a few rows at a time, in cache."""
    if rows.device.type != "cpu" or rows.shape[1] > CHUNK:
        return torch.nan_to_num(rows.abs(), posinf=0.0).amax(dim=0)
    buf, top = scratch(), torch.zeros(rows.shape[1])
    with one_torch_thread():
        for block in rows.split(max(1, CHUNK // rows.shape[1])):
            b = _filled(block, skip, 0.0, buf[:block.numel()].view_as(block))
            lo, hi = torch.aminmax(b, dim=0)
            torch.maximum(top, torch.maximum(hi, lo.neg_()), out=top)
    return top


def histogram(values: torch.Tensor, hist: HistRange, mx: float) -> tuple[np.ndarray, int, int]:
    """Counts of ``values`` (1-D, no NaN) on ``hist``'s fixed bins, exactly as
    ``torch.histc`` bins them (the top edge belongs to the last bin), with the values
    below and above the range counted apart (an infinity among them); ``mx`` is the
    values' maximum (+inf when there is one).

    About twice as fast as histc on a CPU: each value's bin is computed with histc's own
    float32 arithmetic, floor((x - lo) * bins / (hi - lo)), clamped into [-1, bins] and
    stored as one byte (+1), and the bytes are counted with bincount. Bucket 0 holds
    exactly the values below lo (x - lo < 0). The top bucket holds the values above hi
    and any at or just below hi that the division rounded up; those above are counted
    by comparison (only when ``mx`` says there are any), the rest join the last bin.
    On a CPU it goes a chunk at a time through a reused scratch (see ``chunks``)."""
    bins, hi = hist.bins, hist.hi
    cpu = values.device.type == "cpu"
    small = bins < 127 and cpu  # the codes, 0 to bins + 1, fit a signed byte
    counts = np.zeros(bins + 2, dtype=np.int64)
    signs = []
    for part, b in chunks(values, one_thread=True):
        b = bucket(part, b if b is not None else torch.empty_like(part), hist)
        # codes in [0, 127]: +1 added to bytes, a quarter of the floats' width, and the
        # signed bytes read as unsigned (the same bits), which bincount counts a third
        # faster; a float converts to a signed byte far faster than to an unsigned one
        codes = b.to(torch.int8).add_(1).view(torch.uint8) if small else b.add_(1).long()
        counts += torch.bincount(codes, minlength=bins + 2).cpu().numpy()
        if mx > hi:  # x > hi exactly when x - hi > 0: count the positive signs
            signs.append(torch.stack(exact_counts(torch.sub(part, hi, out=b).sign_())))
    over = 0
    if signs:
        balance, nonzero = torch.stack(signs).double().sum(0).tolist()
        over = round((nonzero + balance) / 2)
    under = int(counts[0])
    counts[bins] += counts[bins + 1] - over  # hi itself belongs to the last bin
    return counts[1:bins + 1], under, over


def bucket(src: torch.Tensor, b: torch.Tensor, h: HistRange) -> torch.Tensor:
    """Each value's bucket as histc's float32 arithmetic finds it,
    floor((x - lo) * bins / (hi - lo)), clamped to [-1, bins] (in ``b``)."""
    if h.lo:
        torch.sub(src, h.lo, out=b).mul_(h.bins)
    else:  # x - 0 is x: one pass fewer
        torch.mul(src, h.bins, out=b)
    if h.hi - h.lo != 1:  # a division by 1 changes nothing
        b.div_(h.hi - h.lo)
    return b.floor_().clamp_(-1, h.bins)


def deviation_sums(values: torch.Tensor, mean: torch.Tensor | float,
                   skip: float | None = None) -> list[float]:
    """sum (x - mean)^2 and sum (x - mean)^4 of ``values``; ``skip`` (+inf or -inf):
    values equal to it count as the mean (they add nothing)."""
    parts = []
    for part, b in chunks(values, one_thread=True):
        if skip is not None:
            part = _filled(part, skip, float(mean), b)
        b = torch.sub(part, mean, out=b) if b is not None else part - mean
        s2 = torch.dot(b, b)
        b.square_()
        parts.append(torch.stack([s2.double(), torch.dot(b, b).double()]))
    return torch.stack(parts).sum(0).tolist()


def sign_counts(values: torch.Tensor) -> tuple[float, float]:
    """(negatives, exact zeros) of ``values``, from one pass of signs (sign(-0.0) is 0:
    not negative, like numpy); exact (float32 sums of at most 2**24 signs)."""
    parts = []
    for part, b in chunks(values, one_thread=True):
        b = torch.sign(part, out=b) if b is not None else torch.sign(part)
        parts.append(torch.stack([t.double() for t in exact_counts(b)]))
    balance, nonzero = torch.stack(parts).sum(0).tolist()
    return (nonzero - balance) / 2, values.numel() - nonzero


def exact_counts(signs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """From a tensor of signs (-1, 0, +1): (positives - negatives, nonzeros), summed in
    float32 chunks small enough (2**24) that every partial sum is an exact integer."""
    chunk = 1 << 24
    if signs.numel() <= chunk:
        return signs.sum(), torch.dot(signs, signs)
    parts = signs.split(chunk)
    return (torch.stack([p.sum() for p in parts]).double().sum(),
            torch.stack([torch.dot(p, p) for p in parts]).double().sum())


def kurtosis(var: float, m4: float) -> float:
    return m4 / (var * var) - 3.0 if var > 0 else float("nan")


FLOAT32_MAX = float(torch.finfo(torch.float32).max)


def moment_fields(mean: float, s2: float, s4: float, mn: float, mx: float, m: int,
                  n_nan: int, n_inf: int) -> dict:
    """The moments' fields from the sums of squared and fourth-power deviations of ``m``
    finite values about their ``mean``, and their extremes."""
    var, m4 = s2 / m, s4 / m
    return dict(mean=mean, std=math.sqrt(var), min=mn, max=mx,
                absmax=max(abs(mn), abs(mx)), rms=math.sqrt(var + mean * mean),
                kurtosis=kurtosis(var, m4), n_nan=n_nan, n_inf=n_inf)


def top_fields(per_dim: torch.Tensor, topk: int) -> dict:
    """The features with the largest values of ``per_dim`` (each feature's largest |x|)."""
    top = torch.topk(per_dim, min(topk, per_dim.numel()))
    return dict(top_dims=top.indices.cpu().numpy(), top_values=top.values.cpu().numpy())
