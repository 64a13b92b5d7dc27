"""How statistics work through tensors on a CPU: a chunk at a time through a reused
scratch buffer, on one torch thread where more threads cost more than they save, and
ahead of their first read on a core torch leaves free (``AHEAD``)."""

from __future__ import annotations

import atexit
import contextlib
import os
import sys
import threading
from collections import deque

import torch

from .devices import usable_cores

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


def scratch(n: int = CHUNK, dtype: torch.dtype = torch.float32, slot: str = "") -> torch.Tensor:
    """This thread's scratch buffer ``slot``: ``n`` values of ``dtype`` (at least CHUNK
    kept, grown when asked for more)."""
    bufs = _LOCAL.__dict__.setdefault("scratch", {})
    buf = bufs.get(slot)
    if buf is None or buf.numel() < n or buf.dtype != dtype:
        with torch.inference_mode(False):  # a normal tensor: usable in and out of it
            buf = bufs[slot] = torch.empty(max(n, CHUNK), dtype=dtype)
    return buf[:n]


def chunks(values: torch.Tensor, one_thread: bool = False):
    """(part, scratch) pairs over a 1-D tensor; on a GPU one part and no scratch.
    one_thread: the loop runs on one torch thread. A chunk is too small for a parallel
    region, which costs far more on any thread but the main one: on the engine's thread
    (2 cores) a logits histogram took 209 ms on two torch threads, 72 ms on one."""
    if values.device.type != "cpu":
        yield values, None
        return
    buf = scratch()
    with one_torch_thread(one_thread):
        for part in values.split(CHUNK):
            yield part, buf[:part.numel()]


def on_threads(jobs: list, workers: int, should_stop=None) -> None:
    """Run ``jobs`` (callables, the longest first) on ``workers`` threads at once, each on
    one torch thread: work too small for torch's own threads (a node's statistics, a
    chunk at a time) still uses every core. ``should_stop()`` is asked before each job;
    the first error (``Cancelled`` among them) stops the rest and is raised here."""
    from .cancel import check

    pending = deque(jobs)
    lock, errors = threading.Lock(), []

    def work() -> None:
        with one_torch_thread():
            while True:
                with lock:
                    if errors or not pending:
                        return
                    job = pending.popleft()
                try:
                    check(should_stop)
                    job()
                except BaseException as exc:  # noqa: BLE001 - handed to the caller
                    with lock:
                        errors.append(exc)
                    return

    threads = [threading.Thread(target=work, daemon=True) for _ in range(max(1, workers) - 1)]
    for t in threads:
        t.start()
    work()  # the calling thread is one of the workers
    for t in threads:
        t.join()
    if errors:
        raise errors[0]


def spare_core() -> bool:
    """Whether torch leaves a core free: the app gives it every core but one."""
    return torch.get_num_threads() < usable_cores()


NICE = 10  # the side thread's niceness (Linux: a thread's own)


class Ahead:
    """One thread, on one torch thread, that does work ahead of the thread that will
    otherwise do it when it needs the result: a job must be safe to run twice or to
    find its work already done (``NodeStats`` takes a lock and looks), and should hold
    what it works on by weak reference, so that work nobody keeps is skipped. Urgent
    jobs go first. A job that fails is left to its owner, who meets the error itself."""

    def __init__(self) -> None:
        self._ready = threading.Condition()
        self._urgent: deque = deque()
        self._later: deque = deque()
        self._running = 0
        self._thread: threading.Thread | None = None
        self._stopped = False

    def submit(self, job, urgent: bool = False) -> None:
        with self._ready:
            if self._stopped:
                return
            (self._urgent if urgent else self._later).append(job)
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="ahead", daemon=True)
                self._thread.start()
            self._ready.notify_all()

    def wait(self, timeout: float | None = None) -> bool:
        """Wait until every job submitted so far is done; False if ``timeout`` came first."""
        with self._ready:
            return self._ready.wait_for(lambda: not (self._urgent or self._later or self._running),
                                        timeout)

    def stop(self) -> None:
        """Drop the jobs not started and wait for the one running (at exit)."""
        with self._ready:
            self._stopped = True
            self._urgent.clear()
            self._later.clear()
            self._ready.notify_all()
            thread = self._thread
        if thread is not None:
            thread.join(timeout=10)

    def _run(self) -> None:
        if sys.platform.startswith("linux"):  # a thread's own niceness: Linux only
            try:  # below the window's thread, which shares the spare core with it
                os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), NICE)
            except OSError:
                pass
        while True:
            with self._ready:
                self._ready.wait_for(lambda: self._urgent or self._later or self._stopped)
                if self._stopped:
                    return
                job = (self._urgent or self._later).popleft()
                self._running = 1
            try:
                with one_torch_thread():
                    job()
            except Exception:  # noqa: BLE001 - its owner does the work again and meets it
                pass
            finally:
                with self._ready:
                    self._running = 0
                    self._ready.notify_all()


AHEAD = Ahead()
atexit.register(AHEAD.stop)
