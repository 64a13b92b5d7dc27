"""How statistics work through tensors on a CPU: a chunk at a time through a reused
scratch buffer, and on one torch thread where more threads cost more than they save."""

from __future__ import annotations

import contextlib
import threading

import torch

# Only OpenMP builds of torch can change their thread count again and again; the native
# thread pool warns and keeps its size.
_OPENMP = "parallel backend: OpenMP" in torch.__config__.parallel_info()


@contextlib.contextmanager
def one_torch_thread(on: bool = True):
    """Torch on one thread inside (only OpenMP builds change their count back and forth)."""
    threads = torch.get_num_threads()
    if not (on and _OPENMP and threads > 1):
        yield
        return
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(threads)


# On a CPU, statistics of a large tensor go through it a chunk at a time, with a scratch
# buffer that is reused (per thread): a temporary as large as the tensor is fresh memory
# whose first touch costs more than the arithmetic (at 12 million values, one thread:
# 29-31 ms to write (x - mean)^2 into a new tensor, 5 ms chunk by chunk into a reused
# one). Not reentrant: one chunks() loop at a time per thread.
CHUNK = 1 << 18
_LOCAL = threading.local()


def chunks(values: torch.Tensor, one_thread: bool = False):
    """(part, scratch) pairs over a 1-D tensor; on a GPU one part and no scratch.
    one_thread: the loop runs on one torch thread. A chunk is too small for a parallel
    region, which costs far more on any thread but the main one: on the engine's thread
    (2 cores) a logits histogram took 209 ms on two torch threads, 72 ms on one."""
    if values.device.type != "cpu":
        yield values, None
        return
    buf = getattr(_LOCAL, "scratch", None)
    if buf is None:
        with torch.inference_mode(False):  # a normal tensor: usable in and out of it
            buf = _LOCAL.scratch = torch.empty(CHUNK)
    with one_torch_thread(one_thread):
        for part in values.split(CHUNK):
            yield part, buf[:part.numel()]
