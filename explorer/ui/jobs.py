"""Jobs: plain core callables run off the GUI thread, each with its own stop token.

A job is ``fn(report, should_stop)``: it calls ``report(anything)`` for progress and
asks ``should_stop()`` at safe points (raising ``Cancelled``). ``JobRunner.submit``
returns a ``Job`` whose signals bring progress, the result, a failure (one line, the
details in the log) or the cancellation to the GUI thread as data. Cancelling one job
never touches another. Nothing here creates or touches a widget off the GUI thread.
"""

from __future__ import annotations

import logging
import threading
from typing import Any, Callable

from PySide6.QtCore import QObject, QThread, Signal, Slot

from ..core.cancel import Cancelled

log = logging.getLogger("explorer.ui.jobs")


class Job(QObject):
    """One piece of work; lives on the GUI thread, runs on its runner's thread."""

    progress = Signal(object)
    finished = Signal(object)  # the callable's result
    failed = Signal(str)  # what went wrong, in one line
    cancelled = Signal()

    def __init__(self, fn: Callable[[Callable[[Any], None], Callable[[], bool]], Any],
                 name: str = "job") -> None:
        super().__init__()
        self.fn, self.name = fn, name
        self._stop = threading.Event()
        self.running = False
        self.done = False

    def cancel(self) -> None:
        """Ask this job to stop at its next safe point (thread-safe)."""
        self._stop.set()

    def should_stop(self) -> bool:
        return self._stop.is_set()

    def report(self, value: Any) -> None:
        self.progress.emit(value)

    def _run(self) -> None:
        self.running = True
        try:
            if self.should_stop():
                raise Cancelled("stopped before it started")
            result = self.fn(self.report, self.should_stop)
        except Cancelled:
            self.cancelled.emit()
        except Exception as exc:  # a job never takes the window down
            log.error("%s failed", self.name, exc_info=True)
            self.failed.emit(one_line(exc))
        else:
            self.finished.emit(result)
        finally:
            self.running = False
            self.done = True


def one_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return text[0] if text else type(exc).__name__


class _Worker(QObject):
    @Slot(object)
    def run(self, job: Job) -> None:
        job._run()


class JobRunner(QObject):
    """One thread that runs submitted jobs in order."""

    _submit = Signal(object)

    def __init__(self, name: str = "jobs", parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.thread = QThread(self)
        self.thread.setObjectName(name)
        self._worker = _Worker()
        self._worker.moveToThread(self.thread)
        self._submit.connect(self._worker.run)
        self.thread.start()
        self.jobs: list[Job] = []

    def submit(self, fn, name: str = "job") -> Job:
        job = Job(fn, name)
        self.jobs = [j for j in self.jobs if not j.done] + [job]  # keep running ones alive
        self._submit.emit(job)
        return job

    def busy(self) -> bool:
        return any(not j.done for j in self.jobs)

    def shutdown(self) -> None:
        """Cancel every job and wait for the thread (at the end of the window)."""
        for job in self.jobs:
            job.cancel()
        self.thread.quit()
        self.thread.wait()
