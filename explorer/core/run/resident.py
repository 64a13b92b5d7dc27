"""Capture on a GPU without a host sync per node: each hook holds its node's output
(``Batches``), the statistics are computed on the device a shape's nodes at a time with
tensor operations only (nothing is read back) as the pass ends, kept tensors stay on the
device, and then one copy of them goes into one pinned host buffer and one copy of every
node's numbers follows, the one wait (``gather``). On a CPU the capture works in
``capture.py``'s own way; the same code runs here with the CPU as the device in the
tests, equal to it field by field.

On a CUDA device the statistics are ``batch_numbers`` compiled (``torch.compile``: Triton
kernels), so that a shape's nodes take a few fused reductions that read their values about
once, instead of some forty kernels that each read and write all of them; where compiling
fails, or with GPT_EXPLORER_COMPILE=0, the same function runs as it is.

The numbers of one node travel as one float64 vector: ``HEAD`` scalars, the histogram,
the top dimensions and their values, and every vector's norm (counts and indices are
exact in float64)."""

from __future__ import annotations

import logging
import math

import numpy as np
import torch

from ..gpt.nodes import HistRange
from .fused import enabled  # the switch, GPT_EXPLORER_COMPILE, kept with the CPU's kernels
from .stats import NodeStats

_LOG = logging.getLogger("explorer.resident")
COMPILED_ON = ("cuda",)  # the devices whose statistics are compiled
_COMPILED = {"fn": None, "error": None}
HEAD = ("count", "mean", "std", "min", "max", "absmax", "rms", "kurtosis", "frac_neg",
        "frac_zero", "n_nan", "n_inf", "under", "over")
INTS = ("count", "n_nan", "n_inf", "under", "over")


def to_device(values: list[float], device: torch.device) -> torch.Tensor:
    """A few numbers on the device without waiting: a copy from pinned memory that does
    not block (an ordinary copy to a GPU waits for everything queued before it)."""
    if device.type != "cuda":
        return torch.tensor(values, device=device)
    return torch.tensor(values, pin_memory=True).to(device, non_blocking=True)


def batch_numbers(X: torch.Tensor, lo: torch.Tensor, hi: torch.Tensor, bins: int, topk: int,
                  real: torch.Tensor | None = None) -> torch.Tensor:
    """The statistics of R tensors of one shape at once, (R, P, C) as R nodes' P vectors
    of C features, each with its own histogram range ``lo``, ``hi`` (R,) of ``bins`` bins:
    (R, numbers) float64, a node's row as ``unpack`` reads it. Tensor operations only, nothing
    read back: a few dozen kernels for the lot. ``real``: (P,) bool, False at padding.
    The histogram bins each value with torch.histc's float32 arithmetic, as
    ``stats_math.histogram`` does, and counts them without reading anything back."""
    R, P, C = X.shape
    X = X.float()
    finite = torch.isfinite(X)
    pad = None if real is None else ~real.to(X.device, torch.bool).view(1, P, 1)
    counted = finite if pad is None else finite & ~pad
    inside = X if pad is None else X.masked_fill(pad, 0.0)  # padding: no NaN, no inf
    per_row = (1, 2)
    n = torch.full((R,), float(P * C), device=X.device, dtype=torch.float64) if pad is None \
        else (~pad).sum().double().mul(C).expand(R)
    m = counted.sum(per_row).double()
    n_nan = torch.isnan(inside).sum(per_row).double()
    pos_inf = (inside == math.inf).sum(per_row).double()
    neg_inf = (inside == -math.inf).sum(per_row).double()
    f64 = torch.float64  # float32 values, float64 sums (as the CPU's chunks sum)
    mean = torch.where(counted, X, 0.0).sum(per_row, dtype=f64) / m
    dev = torch.where(counted, X - mean.float().view(R, 1, 1), 0.0).square_()
    var = dev.sum(per_row, dtype=f64) / m
    m4 = dev.square_().sum(per_row, dtype=f64) / m
    nan = torch.full((), math.nan, device=X.device, dtype=torch.float64)  # no copy there
    none = m == 0
    mn = torch.where(none, nan, torch.where(counted, X, math.inf).amin(per_row).double())
    mx = torch.where(none, nan, torch.where(counted, X, -math.inf).amax(per_row).double())
    kurt = torch.where(var > 0, m4 / (var * var) - 3.0, nan)
    neg = (counted & (X < 0)).sum(per_row).double()
    zeros = (counted & (X == 0)).sum(per_row).double()
    lo_, hi_ = lo.float().view(R, 1, 1), hi.float().view(R, 1, 1)
    code = (X - lo_).mul_(bins).div_(hi_ - lo_).floor_().clamp_(-1, bins).add_(1)
    code = torch.where(counted, code, float(bins + 2))  # the rest in a bucket of their own
    buckets = _bucket_counts(code, bins + 3)
    above = (counted & (X > hi_)).sum(per_row)
    counts = buckets[:, 1:bins + 1].clone()
    counts[:, -1] += buckets[:, bins + 1] - above  # hi itself belongs to the last bin
    per_dim = torch.where(counted, X.abs(), 0.0).amax(dim=1)  # (R, C)
    if pad is not None:
        per_dim = torch.where(pad.all(), nan.float(), per_dim)
    top = torch.topk(per_dim, min(topk, C), dim=1)
    norms = torch.linalg.vector_norm(X, dim=2)  # (R, P)
    if pad is not None:
        norms = norms.masked_fill(pad.view(1, P), math.nan)
    head = torch.stack([n, mean, var.sqrt(), mn, mx, torch.maximum(mn.abs(), mx.abs()),
                        (var + mean * mean).sqrt(), kurt, neg / m, zeros / m, n_nan,
                        pos_inf + neg_inf, buckets[:, 0].double() + neg_inf,
                        above.double() + pos_inf], dim=1)
    return torch.cat([head, counts.double(), top.indices.double(), top.values.double(),
                      norms.double()], dim=1)


def compiled():
    """``batch_numbers`` compiled (once per process; any device's tensors, any shape)."""
    if _COMPILED["fn"] is None:
        _COMPILED["fn"] = torch.compile(batch_numbers, dynamic=True)
    return _COMPILED["fn"]


def how() -> str:
    """How the device's statistics were computed, in words (a benchmark's line)."""
    if _COMPILED["error"] is not None:
        return f"as they are ({_COMPILED['error']})"
    return "compiled" if enabled() and _COMPILED["fn"] is not None else "as they are"


def numbers(X: torch.Tensor, lo: torch.Tensor, hi: torch.Tensor, bins: int, topk: int,
            real: torch.Tensor | None = None) -> torch.Tensor:
    """``batch_numbers``'s rows, compiled on a device of ``COMPILED_ON`` (module docstring)."""
    if X.device.type in COMPILED_ON and enabled() and _COMPILED["error"] is None:
        try:
            return compiled()(X, lo, hi, bins, topk, real)
        except Exception as exc:  # noqa: BLE001 - no Triton, no compiler: the same numbers, slower
            _COMPILED["error"] = f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"
            _LOG.info("device statistics without compiling: %s", _COMPILED["error"])
    return batch_numbers(X, lo, hi, bins, topk, real)


class Batches:
    """The nodes whose numbers are still to compute, held (a reference, no copy) until the
    pass ends or until those not kept anyway hold ``limit`` bytes; then computed a shape
    at a time (``batch_numbers``), at most ``ROOM`` values in one go."""

    ROOM = 1 << 26

    def __init__(self, topk: int, limit: int) -> None:
        self.topk, self.limit = topk, limit
        self.items: list[tuple[str, torch.Tensor, HistRange, torch.Tensor | None]] = []
        self.held = 0
        self.numbers: dict[str, torch.Tensor] = {}  # name -> its row of numbers, there
        self.twins: dict[str, str] = {}  # name -> the node whose numbers are its own

    def add(self, name: str, x: torch.Tensor, hist: HistRange, valid: torch.Tensor | None,
            kept: bool) -> None:
        self.items.append((name, x.detach(), hist, valid))
        if not kept:
            self.held += x.numel() * x.element_size()
            if self.held > self.limit:
                self.flush()

    def flush(self) -> None:
        groups: dict[tuple, list] = {}
        for item in self.items:
            _, x, hist, valid = item
            groups.setdefault((tuple(x.shape), hist.bins, id(valid)), []).append(item)
        for items in groups.values():
            per = max(1, self.ROOM // max(1, items[0][1].numel()))
            for at in range(0, len(items), per):
                part = items[at:at + per]
                x, valid = part[0][1], part[0][3]
                X = torch.stack([i[1].reshape(-1, x.shape[-1] if x.dim() else 1) for i in part])
                lo, hi = (to_device([getattr(i[2], e) for i in part], x.device)
                          for e in ("lo", "hi"))
                rows = numbers(X, lo, hi, part[0][2].bins, self.topk,
                               None if valid is None else valid.reshape(-1))
                for i, row in zip(part, rows):
                    self.numbers[i[0]] = row
        self.items, self.held = [], 0

    def all_numbers(self) -> dict[str, torch.Tensor]:
        """Every node's numbers (the pass has ended)."""
        self.flush()
        for name, twin in self.twins.items():
            self.numbers[name] = self.numbers[twin]
        return self.numbers


LANES = 32  # copies of a histogram, one per lane of a warp: no two threads add to one count


def _bucket_counts(code: torch.Tensor, width: int) -> torch.Tensor:
    """(R, width) counts of the integer codes 0 .. width - 1 of each of R rows (R, P, C),
    read nothing back: one scatter-add of every row at once (histc and bincount take one
    row, bincount asks for the largest code), int64 counts, each row into ``LANES`` copies
    by feature index, so that neighbouring values (most fall in one bucket, e.g. an
    attention pattern's near-zero weights) do not wait on one another's count. Compiled,
    the indices are never written out: the adds read the codes as they are made."""
    R, _, C = code.shape
    lanes = min(LANES, C)
    lane = torch.arange(C, device=code.device) % lanes
    first = torch.arange(R, device=code.device).view(R, 1, 1) * (lanes * width)
    index = (first + lane.view(1, 1, C) * width + code.long()).reshape(-1)
    counts = torch.zeros(R * lanes * width, dtype=torch.int64, device=code.device)
    counts.scatter_add_(0, index, torch.ones_like(index))
    return counts.view(R, lanes, width).sum(1)


def unpack(numbers: np.ndarray, hist: HistRange, topk: int, shape: tuple[int, ...]) -> NodeStats:
    """The NodeStats of a node from its row of ``batch_numbers`` (on the host)."""
    head = dict(zip(HEAD, numbers[:len(HEAD)].tolist()))
    for name in INTS:
        head[name] = int(head[name])
    at = len(HEAD)
    counts = numbers[at:at + hist.bins].astype(np.int64)
    at += hist.bins
    k = min(topk, shape[-1] if shape else 1)
    top_dims, top_values = numbers[at:at + k].astype(np.int64), numbers[at + k:at + 2 * k].astype(np.float32)
    norms = numbers[at + 2 * k:].astype(np.float32).reshape(shape[:-1] if shape else ())
    return NodeStats(**head, top_dims=top_dims, top_values=top_values, token_l2=norms,
                     hist=counts, hist_range=hist)


def gather(records: dict, numbers: dict[str, torch.Tensor], topk: int) -> None:
    """At the end of a resident pass: every kept device tensor copied into one host
    buffer per dtype (pinned for CUDA, copies that do not wait), then every node's
    numbers in one copy, the one wait; each record's statistics and tensor set from them."""
    on_device: dict[int, torch.Tensor] = {}
    for record in records.values():
        if record.tensor is not None and record.tensor.device.type != "cpu":
            on_device.setdefault(id(record.tensor), record.tensor)
    host = _host_copies(list(on_device.values()))
    names = [n for n in records if n in numbers]
    flat = torch.cat([numbers[n] for n in names]).cpu().numpy() if names else None
    if flat is None and on_device and torch.cuda.is_available():
        torch.cuda.synchronize()  # nothing else to wait on
    at = 0
    for name in names:
        size = numbers[name].numel()
        record = records[name]
        record.stats = unpack(flat[at:at + size], record.node.hist, topk, record.shape)
        at += size
    for record in records.values():
        if record.tensor is not None and id(record.tensor) in on_device:
            record.tensor = host[id(record.tensor)]


def _host_copies(tensors: list[torch.Tensor]) -> dict[int, torch.Tensor]:
    """id(device tensor) -> its host copy, a view of one buffer per dtype; the copies are
    queued, not waited for (the caller's next blocking copy on the stream waits)."""
    host: dict[int, torch.Tensor] = {}
    for dtype in {t.dtype for t in tensors}:
        same = [t for t in tensors if t.dtype == dtype]
        pin = torch.cuda.is_available() and any(t.device.type == "cuda" for t in same)
        buf = torch.empty(sum(t.numel() for t in same), dtype=dtype, pin_memory=pin)
        at = 0
        for t in same:
            view = buf[at:at + t.numel()].view(t.shape)
            view.copy_(t, non_blocking=pin)
            host[id(t)] = view
            at += t.numel()
    return host
