"""Every statistic of a tensor on a CPU from compiled kernels (``torch.compile``, where a
C++ compiler is there): ``sweep.Sweep``'s some twenty operations a block become one call
whose loops read the block once from memory and then from the core's cache.

A block of rows at a time (``blocks``, about a megabyte): ``_finite`` gives its extremes,
its sums of (x - c)^k for k = 1 to 4 about its own mean c (``deviations`` brings every
block's to the whole tensor's mean, so nothing waits for the mean first), the counts of
negatives, zeros and values above the histogram's top, each value's histogram code as a
byte (``sweep.pair_counts`` counts them), each feature's largest |value| and each row's
L2 norm. A block with NaN or an infinity, and every block after it, goes through
``_filled``: its values that are not finite stand at the mean of the others (no deviation,
no extreme) and are taken back out of the counts (``Sums.take_out``).

The counts are integer sums, exact; the codes are histc's float32 arithmetic, the same
bytes as ``Sweep``'s; the other sums agree with ``Sweep``'s to float32's rounding.
Compiling takes seconds (cached on disk by torch for the next start): ``warm()``
compiles (the window: on a thread of its own once it is on screen) and ``ready()`` says
when the kernels are there; until then, where compiling fails (no compiler), for small
tensors and for a shape of another kind than those compiled, the statistics are
``Sweep``'s. GPT_EXPLORER_COMPILE=0 turns the kernels off.
"""

from __future__ import annotations

import functools
import itertools
import logging
import math
import os
import sys
import threading
from concurrent.futures import ThreadPoolExecutor

import torch

from ..base.cpu_work import CHUNK, NICE, one_torch_thread
from ..gpt.nodes import HistRange
from .sweep import PAIRS, Sums, fold, pair_counts

_LOG = logging.getLogger("explorer.fused")
_STATE = {"kernels": None, "error": None, "started": False}
_LOCK = threading.Lock()
SMALLEST = 1 << 16  # fewer values than this are as quick through ``Sweep``
BLOCK = 2 * CHUNK  # values a block (two megabytes): measured quicker than one on two cores
SHARE = 3 << 17  # the fewest values a thread's share: fewer are quicker on the caller's alone
# the shapes compiled ahead: inductor's loops differ with a reduction's length (4,096)
SHAPES = ((70, 1024), (4100, 20), (3, 30000))


def _core(f: torch.Tensor, center: torch.Tensor, stripes: torch.Tensor, lo: float,
          bins: int, width: float, hi: float):
    """The sums of a block of values ``f`` (float64): their extremes, sum (x - center)^k
    for k = 1 to 4, the counts (int32: a block is far below 2**31) of negatives, zeros
    and values above ``hi``, and their codes (+ ``stripes``, features,)."""
    d = f.double() - center.double()  # in float64: float32's lanes lose 1e-5 in a block
    d2 = d * d
    codes = (((f - lo) * bins / width).floor().clamp(-1, bins) + 1).to(torch.uint8) + stripes
    sums = torch.stack([center.double(), f.amin().double(), f.amax().double(), d.sum(),
                        d2.sum(), (d2 * d).sum(), (d2 * d2).sum()])
    counts = torch.stack([(f < 0).sum(dtype=torch.int32), (f == 0).sum(dtype=torch.int32),
                          (f > hi).sum(dtype=torch.int32)])
    return sums, counts, codes


def _finite(x: torch.Tensor, stripes: torch.Tensor, lo: float, bins: int, width: float,
            hi: float):
    """Every statistic's sums of a block of finite values ``x`` (rows, features), about
    the block's own mean; with each feature's largest |value| and each row's norm."""
    sums, counts, codes = _core(x, x.mean(), stripes, lo, bins, width, hi)
    return sums, counts, codes, x.abs().amax(0), (x * x).sum(-1).sqrt()


def _filled(x: torch.Tensor, stripes: torch.Tensor, lo: float, bins: int, width: float,
            hi: float):
    """``_finite``'s sums with every value that is not finite taken as the mean of the
    others in the block (0 in each feature's largest |value|; the norms of the values as
    they are), and the counts of NaN, +inf and -inf after the others."""
    finite = torch.isfinite(x)
    centre = torch.where(finite, x, 0.0).sum() / finite.sum()  # NaN: none is finite
    f = torch.where(finite, x, centre)
    sums, counts, codes = _core(f, centre, stripes, lo, bins, width, hi)
    lost = torch.stack([torch.isnan(x).sum(dtype=torch.int32),
                        (x == float("inf")).sum(dtype=torch.int32),
                        (x == float("-inf")).sum(dtype=torch.int32)])
    per_dim = torch.where(finite, x.abs(), 0.0).amax(0)
    return sums, torch.cat([counts, lost]), codes, per_dim, (x * x).sum(-1).sqrt()


@functools.lru_cache(maxsize=64)
def stripes(features: int) -> torch.Tensor:
    """What to add to a row's codes: 128 at every fourth feature (0, 4, 8...), the low
    byte of every other pair of codes, so no two neighbours add to one count
    (``sweep.pair_counts``); where rows have an odd length a pair may straddle two, and
    nothing is added. Read only."""
    with torch.inference_mode(False):
        out = torch.zeros(features, dtype=torch.uint8)
        if features % 2 == 0:
            out[::4] = 128
    return out


def enabled() -> bool:
    return os.environ.get("GPT_EXPLORER_COMPILE", "1") != "0"


def ready() -> bool:
    """Whether the compiled kernels are there to use (``warm`` makes them)."""
    return _STATE["kernels"] is not None


def error() -> str | None:
    """Why the kernels could not be made (None: not tried, or made)."""
    return _STATE["error"]


def warm(wait: bool = True, force: bool = False) -> bool:
    """Compile the kernels (once per process; ``wait=False``: on a thread of its own)
    and check their counts on small tensors; True when they are ready. ``force``: even
    where GPT_EXPLORER_COMPILE=0."""
    with _LOCK:
        if _STATE["started"] or not (enabled() or force):
            return ready()
        _STATE["started"] = True
        if not wait:
            threading.Thread(target=_compile, args=(True,), name="compile-stats",
                             daemon=True).start()
            return False
        _compile()
        return ready()


def _compile(aside: bool = False) -> None:
    """Make the kernels; ``aside``: on a thread of its own, below the window's and the
    model's threads (Linux: the thread's niceness, which the compiler it starts keeps)."""
    if aside and sys.platform.startswith("linux"):
        try:
            os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), NICE)
        except OSError:
            pass
    try:
        if not hasattr(torch.compiler, "set_stance"):  # torch before 2.6: calls would stall
            raise RuntimeError(f"torch {torch.__version__} cannot refuse to compile again")
        # torch's compiler front end before its back end, as torch itself imports them: a
        # model being built on another thread may be importing the front end (some of
        # torch's functions do on first use), which imports the back end; starting from
        # the back end here, each thread would wait on the other's half-made module
        from torch import _dynamo  # noqa: F401, PLC0415
        import torch._inductor.config as inductor

        inductor.compile_threads = 1  # in this process: no pool of workers to start
        _without_gil()
        inductor.cpp.threads = 1  # one core a tensor: ``Capture.complete`` runs one a core
        made = tuple(torch.compile(fn, dynamic=True) for fn in (_finite, _filled))
        _try(made)
        _STATE["kernels"] = made
    except Exception as exc:  # noqa: BLE001 - no compiler, no Triton...: the sweep remains
        _STATE["error"] = f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"
        _LOG.info("statistics without compiled kernels (the same numbers, slower): %s",
                  _STATE["error"])


def _without_gil() -> None:
    """Have the compiled kernels let go of Python's lock while they run (they read only
    the tensors' memory, taken before): ``Capture.complete`` runs a node on each core,
    which the lock held would take one at a time. Left as torch has it where torch no
    longer calls its kernels this way (then one at a time, the same numbers)."""
    from torch._inductor import codecache  # noqa: PLC0415 - with torch.compile only

    cache = getattr(codecache, "CppPythonBindingsCodeCache", None)
    call = getattr(cache, "call_entry_function", None)
    if call == "kernel({}); Py_RETURN_NONE;":  # the arguments read first, with the lock
        cache.call_entry_function = (
            "[&](auto... a) {{ struct U {{ PyThreadState* s = PyEval_SaveThread(); "
            "~U() {{ PyEval_RestoreThread(s); }} }} u; kernel(a...); }}({}); Py_RETURN_NONE;")


def _try(made) -> None:
    """Run the kernels on the shapes made ahead, tensors made in inference mode (a
    capture's) and out of it (another guard of torch.compile's), compiling them; and
    check their counts."""
    finite, filled = made
    for shape, inference in itertools.product(SHAPES, (True, False)):
        with torch.inference_mode(inference):
            x = (torch.arange(shape[0] * shape[1]) - 7).float().view(shape)
            y = x.clone()
            y[0, 0] = float("-inf")
        with torch.inference_mode(), one_torch_thread():
            counts = finite(x, stripes(shape[1]), -1.0, 10, 2.0, 1.0)[1]
            lost = filled(y, stripes(shape[1]), -1.0, 10, 2.0, 1.0)[1]
        if counts.tolist()[:2] != [7, 1] or lost.tolist()[3:] != [0, 0, 1]:
            raise RuntimeError("the compiled statistics count wrongly")


def statistics(rows: torch.Tensor, hist: HistRange) -> Sums | None:
    """Every group's sums of ``rows`` (vectors, features; float32, contiguous, on a
    CPU), as ``sweep.Sweep.run`` gives them, with the mean and the counts of NaN and
    infinities; None where the kernels are not ready, the tensor is small, a block holds
    nothing finite, or it would take compiling again (a shape of another kind than
    those made ahead).

    The kernel goes through a block of rows at a time (``blocks``), so that its loops read
    the block from the cache, not the tensor again from memory; each block's deviations
    are taken about its own mean and brought to the whole tensor's (``deviations``), so
    nothing needs the mean first. A block that is not all finite goes again through
    ``_filled``, its values that are not finite as its mean, then taken back out. Called
    where torch has several threads (in a forward's hooks), the blocks are shared
    among as many threads; ``Capture.complete``'s workers, on one each, go alone."""
    kernels = _STATE["kernels"]
    if kernels is None or rows.numel() < SMALLEST or rows.shape[0] < 2 or hist.bins >= 127:
        return None
    spans = blocks(*rows.shape, torch.get_num_threads())
    threads = min(torch.get_num_threads(), len(spans) // 2) or 1
    shares = [spans[i * len(spans) // threads:(i + 1) * len(spans) // threads]
              for i in range(threads)]
    try:
        others = [_pool(threads).submit(_part, kernels, rows, hist, share)
                  for share in shares[1:]]
        parts = [_part(kernels, rows, hist, shares[0])] + [f.result() for f in others]
    except RuntimeError:  # a shape that needs compiling again: the sweep's way instead
        return None
    if any(part is None for part in parts):
        return None
    with torch.inference_mode():
        return _together(parts, hist)


def _pool(threads: int) -> ThreadPoolExecutor:
    """Threads for the blocks' shares beside the caller's (made once, as many as asked)."""
    pool = _STATE.get("pool")
    if pool is None or pool._max_workers < threads - 1:
        pool = _STATE["pool"] = ThreadPoolExecutor(threads - 1, "stats-blocks")
    return pool


def blocks(n: int, features: int, threads: int = 1) -> list[tuple[int, int]]:
    """(start, stop) of blocks of about BLOCK values, none of one row (a shape the
    kernels were not made for: the last takes it). With several ``threads`` and at
    least ``SHARE`` values for each of some of them, two blocks a thread or more, smaller
    where need be (1024 × 1536 values on two threads: 1.8 ms in four blocks, 3.1 ms in
    three blocks on one)."""
    values = n * features
    sharing = max(1, min(threads, values // SHARE))
    size = BLOCK if sharing == 1 else min(BLOCK, -(-values // (2 * sharing)))
    size = max(2, size // max(features, 1))
    edges = list(range(0, n, size)) + [n]
    if len(edges) > 2 and edges[-1] - edges[-2] == 1:
        del edges[-2]
    return list(zip(edges[:-1], edges[1:]))


class Part:
    """The sums of some blocks, in order."""

    def __init__(self) -> None:
        self.table = torch.zeros(PAIRS + 128, dtype=torch.int64)
        self.sums, self.counts, self.l2, self.sizes = [], [], [], []
        self.per_dim = None
        self.lost: list[tuple[float, list[int]]] = []  # (a block's mean, [NaN, +inf, -inf])

    def add(self, s, k, codes, top, norms, size: int) -> None:
        self.sums.append(s)
        self.counts.append(k)
        self.sizes.append(size)
        self.per_dim = top if self.per_dim is None else torch.maximum(self.per_dim, top,
                                                                      out=self.per_dim)
        self.l2.append(norms)
        pair_counts(codes.view(-1), self.table)


def _part(kernels, rows: torch.Tensor, hist: HistRange, spans) -> Part | None:
    """The kernels' sums over the blocks ``spans`` of ``rows`` (None: a block holds no
    finite value); on one torch thread, as compiled (a guard of torch.compile's)."""
    finite, filled = kernels
    c = rows.shape[1]
    args = (stripes(c), hist.lo, hist.bins, hist.hi - hist.lo, hist.hi)
    part = Part()
    kernel = finite  # until a block is not all finite: then the rest through ``filled``
    # a shape of another kind raises (and takes the sweep's way) rather than stopping the
    # thread that meets it for seconds of compiling; torch.compile's other users untouched
    with torch.inference_mode(), one_torch_thread(), \
            torch.compiler.set_stance("fail_on_recompile"):
        for start, stop in spans:
            block = rows[start:stop]
            s, k, codes, top, norms = kernel(block, *args)
            size = (stop - start) * c
            if kernel is finite and not math.isfinite(float(s[0])):  # NaN or an infinity
                kernel = filled
                s, k, codes, top, norms = filled(block, *args)
            if kernel is filled:
                kinds = k[3:].tolist()
                part.lost.append((float(s[0]), kinds))
                size -= sum(kinds)
                if not math.isfinite(float(s[0])):
                    return None
                k = k[:3]
            part.add(s, k, codes, top, norms, size)
    return part


def _together(parts: list[Part], hist: HistRange) -> Sums:
    """The parts' sums added up, as one sweep's."""
    sums = torch.stack([s for p in parts for s in p.sums]).tolist()
    counts = torch.stack([k for p in parts for k in p.counts]).long().sum(0)
    below, zeros, over = counts.tolist()
    per_dim = parts[0].per_dim
    for p in parts[1:]:
        torch.maximum(per_dim, p.per_dim, out=per_dim)
    table = sum(p.table for p in parts[1:]) + parts[0].table
    l2 = [n for p in parts for n in p.l2]
    mean, s2, s4 = deviations(sums, [n for p in parts for n in p.sizes])
    out = Sums(min=min(s[1] for s in sums), max=max(s[2] for s in sums), mean=mean, s2=s2,
               s4=s4, neg=below, zeros=zeros, codes=fold(table, hist.bins + 2), over=over,
               per_dim=per_dim, l2=l2[0] if len(l2) == 1 else torch.cat(l2))
    lost = [0, 0, 0]  # NaN, +inf, -inf: each block's stood at its mean
    for p in parts:
        for fill, kinds in p.lost:
            out.take_out(fill, sum(kinds), hist)
            lost = [a + b for a, b in zip(lost, kinds)]
    nan, pos, neg = lost
    out.infinities(neg, pos, hist, nan)
    return out


def deviations(sums: list, sizes: list) -> dict:
    """(the mean, sum (x - mean)^2, ^4) of every block together, from each block's
    (centre, ..., sum (x - centre)^k for k = 1..4) and how many values it holds: moved
    from each block's centre to the mean of them all (Python's float64)."""
    mean = sum(s[0] * n + s[3] for s, n in zip(sums, sizes)) / sum(sizes)
    s2 = s4 = 0.0
    for (centre, _, _, a1, a2, a3, a4), n in zip(sums, sizes):
        d = centre - mean
        s2 += a2 + 2 * a1 * d + n * d * d
        s4 += a4 + 4 * a3 * d + 6 * a2 * d * d + 4 * a1 * d ** 3 + n * d ** 4
    return mean, s2, s4
