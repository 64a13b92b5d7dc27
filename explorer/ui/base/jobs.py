"""Jobs: plain core callables run off the GUI thread, each with its own stop token.

A job is ``fn(ctx)``: it calls ``ctx.report(anything)`` for progress and passes
``ctx.should_stop`` to core code, which raises ``Cancelled`` at its next safe point.
``JobRunner.submit`` connects the given handlers first, then queues the job; its
progress, result, failure (one line, the details in the log) or cancellation reach the
GUI thread as data, through queued signals. Cancelling one job never touches another.
Nothing here creates or touches a widget off the GUI thread.
"""

from __future__ import annotations

import logging
import threading
import time
import weakref
from typing import Any, Callable

import shiboken6
from PySide6.QtCore import QObject, QThread, Signal, Slot

from ...core.base.cancel import Cancelled
from ...core.weights.hub import HubError

log = logging.getLogger("explorer.ui.base.jobs")

# Exceptions whose message is already the one line a user reads; others get their type.
EXPECTED = (ValueError, OSError, MemoryError, LookupError, HubError)


class Job(QObject):
    """One piece of work; lives on the GUI thread, runs on its runner's thread."""

    progress = Signal(object)
    finished = Signal(object)  # the callable's result
    failed = Signal(str)  # what went wrong, in one line
    cancelled = Signal()

    def __init__(self, fn: Callable[["JobContext"], Any], name: str = "job") -> None:
        super().__init__()
        self.fn, self.name = fn, name
        self._stop = threading.Event()
        self.running = False
        self.done = False
        self.outcome: str | None = None  # "finished", "failed" or "cancelled" once done

    def cancel(self) -> None:
        """Ask this job to stop at its next safe point (thread-safe); a queued job then
        never starts."""
        self._stop.set()

    def should_stop(self) -> bool:
        return self._stop.is_set()


class JobContext:
    """What a running job sees: its reports and stop token, and for the engine's jobs
    the loaded model."""

    def __init__(self, job: Job, runner: "JobRunner", loaded: Any = None,
                 record: str | None = None) -> None:
        self.job, self.runner, self.loaded, self.record = job, runner, loaded, record

    @property
    def model(self):
        """The loaded model; an error in words when there is none, or when the window
        shows a saved run of another model (``record``), which nothing may compute on."""
        if self.record:
            raise ValueError(f"The window shows {self.record}: its model is not loaded, so "
                             "this cannot be computed. Run a prompt (Ctrl+Enter) to go back to "
                             "the loaded model.")
        return self.loaded_model

    @property
    def loaded_model(self):
        if self.loaded is None:
            raise ValueError("no model is loaded yet")
        return self.loaded.model

    def report(self, value: Any) -> None:
        self.runner.before_report(value)
        self.job.progress.emit(value)

    def should_stop(self) -> bool:
        return self.job.should_stop()


def one_line(exc: BaseException) -> str:
    lines = str(exc).strip().splitlines()
    text = lines[0] if lines else ""
    if isinstance(exc, EXPECTED) and text:
        return text
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def run_job(job: Job, context: JobContext) -> None:
    """Run a job to its end: its result, its failure or its cancellation as a signal."""
    job.running = True
    try:
        if job.should_stop():
            raise Cancelled("stopped before it started")
        result = job.fn(context)
    except Cancelled:
        job.outcome = "cancelled"
        job.cancelled.emit()
    except Exception as exc:  # a job never takes the window down
        job.outcome = "failed"
        if isinstance(exc, EXPECTED):  # a bad input, said in its own words
            log.info("%s failed: %s", job.name, exc)
        else:  # a bug: its traceback goes to the log
            log.error("%s failed", job.name, exc_info=True)
        job.failed.emit(one_line(exc))
    else:
        job.outcome = "finished"
        job.finished.emit(result)
    finally:
        job.running = False
        job.done = True


def connect(job: Job, progress=None, finished=None, failed=None, cancelled=None) -> Job:
    for signal, handler in ((job.progress, progress), (job.finished, finished),
                            (job.failed, failed), (job.cancelled, cancelled)):
        if handler is not None:
            signal.connect(handler)
    return job


class _Worker(QObject):
    def __init__(self, runner: "JobRunner") -> None:
        super().__init__()
        self.runner = runner

    @Slot(object)
    def run(self, job: Job) -> None:
        run_job(job, self.runner.context(job))


_RUNNERS: "weakref.WeakSet[JobRunner]" = weakref.WeakSet()  # every runner alive


def _runners() -> list["JobRunner"]:
    """The runners whose Qt objects still exist (a window deleted takes its own along)."""
    return [r for r in list(_RUNNERS) if shiboken6.isValid(r) and shiboken6.isValid(r.thread)]


def running_threads() -> list[str]:
    """The names of the runners whose thread is still running (a job not ended yet, or
    a runner never shut down)."""
    return sorted(r.thread.objectName() for r in _runners() if r.thread.isRunning())


def join_all(wait_s: float) -> list[str]:
    """Shut every runner down and wait, at most ``wait_s`` seconds in all, for their
    threads to end; the names of those still running then (an empty list when every
    thread has ended). For the end of a process, or of a test, that must not destroy a
    running thread (Qt aborts the process when a running QThread is destroyed)."""
    end = time.monotonic() + wait_s
    for runner in _runners():
        runner.cancel_all()
        runner.thread.quit()
    for runner in _runners():
        left_ms = max(0, int((end - time.monotonic()) * 1000))
        runner.thread.wait(left_ms)
    return running_threads()


class JobRunner(QObject):
    """One thread that runs submitted jobs in order."""

    _submit = Signal(object)

    def __init__(self, name: str = "jobs", parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.thread = QThread(self)
        self.thread.setObjectName(name)
        self._worker = _Worker(self)
        self._worker.moveToThread(self.thread)
        self._submit.connect(self._worker.run)
        self.thread.start()
        self.jobs: list[Job] = []
        _RUNNERS.add(self)

    def submit(self, fn: Callable[[JobContext], Any], name: str = "job", *,
               progress=None, finished=None, failed=None, cancelled=None) -> Job:
        """Queue ``fn(ctx)``; the handlers are connected before it can start."""
        job = connect(Job(fn, name), progress, finished, failed, cancelled)
        self.jobs = [j for j in self.jobs if not j.done] + [job]  # keep live ones referenced
        self.queued(job)
        self._submit.emit(job)  # from here the job may run, and end, at any moment
        return job

    def queued(self, job: Job) -> None:
        """Called on the GUI thread as each job is submitted, before it can start."""

    def context(self, job: Job) -> JobContext:
        """Called on the runner's thread when the job starts."""
        return JobContext(job, self)

    def before_report(self, value: Any) -> None:
        """Called on the runner's thread before each report reaches the GUI."""

    def busy(self) -> bool:
        return any(not j.done for j in self.jobs)

    def cancel_all(self) -> None:
        for job in self.jobs:
            job.cancel()

    def shutdown(self, wait_s: float | None = None) -> bool:
        """Cancel every job and wait for the thread (at the end of the window), at most
        ``wait_s`` seconds when given; False when the thread is still in a job then (a
        read the operating system does not give back)."""
        self.cancel_all()
        self.thread.quit()
        if wait_s is None:
            self.thread.wait()
            return True
        if self.thread.wait(int(wait_s * 1000)):
            return True
        busy = [j.name for j in self.jobs if j.running]
        log.warning("%s still in %s %.0f s after Stop; the window closes without it",
                    self.thread.objectName(), ", ".join(busy) or "a job", wait_s)
        return False
