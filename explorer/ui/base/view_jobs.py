"""One way for a view to run its work: ``ViewJobs.run(fn, name, finished=…)``.

The latest request wins: a new request cancels the job it supersedes, and what a
superseded job still sends (progress, its answer, its failure, its stop) is dropped. A
failure is shown in the view (its ``failed`` callback, one line) and on the status line.
``forget()`` drops the answer still coming (the model it was asked of is gone). With
controls (``ui.widgets.job_controls.JobControls``) Run, Stop and the progress bar follow
the job. Views are typed against ``EngineLike``, which the engine and the tests' inline
engine both are; a view never holds None for it."""

from __future__ import annotations

from typing import Any, Callable, Protocol

from .jobs import Job, JobContext
from .turns import alive

Handler = Callable[..., Any] | None


class EngineLike(Protocol):
    """What a view asks of the engine: run ``fn(ctx)`` on the thread that owns the model."""

    def submit(self, fn: Callable[[JobContext], Any], name: str = "job", *, progress: Handler = None,
               finished: Handler = None, failed: Handler = None,
               cancelled: Handler = None) -> Job: ...


class Controls(Protocol):
    def started(self, job: Job) -> None: ...

    def ended(self) -> None: ...

    def report(self, done: int, total: int) -> None: ...

    def alive(self) -> bool: ...


class ViewJobs:
    def __init__(self, engine: EngineLike, failed: Callable[[str], None], *,
                 controls: Controls | None = None, status: Callable[[str], None] | None = None,
                 title: str = "") -> None:
        if engine is None or not callable(getattr(engine, "submit", None)):
            raise TypeError("a view needs the engine (ui.base.engine.Engine), not None")
        self.engine, self.failed, self.controls = engine, failed, controls
        self.status, self.title = status, title
        self.job: Job | None = None
        self._asked = 0

    @property
    def running(self) -> bool:
        return self.job is not None

    def run(self, fn: Callable[[JobContext], Any], name: str, *, finished: Callable[[Any], Any],
            progress: Handler = None, failed: Handler = None, cancelled: Handler = None) -> Job:
        """Submit ``fn``; the handlers run only while this is the latest request. Progress
        of ``(done, total)`` moves the controls' bar when no handler is given."""
        self.cancel()
        self._asked += 1
        asked = self._asked

        def latest(handler: Handler, ends: bool) -> Callable[..., None]:
            def call(*args) -> None:
                if asked != self._asked:
                    return  # a superseded request's
                if ends:
                    self.job = None
                    if self.controls is not None and self.controls.alive():
                        self.controls.ended()
                if handler is not None and alive(handler):  # not its closed view's
                    handler(*args)
            return call

        if progress is None and self.controls is not None:
            progress = lambda p: self._bar(p)  # noqa: E731
        self.job = self.engine.submit(
            fn, name, progress=latest(progress, False), finished=latest(finished, True),
            failed=latest(failed or self._failed, True), cancelled=latest(cancelled, True))
        if self.controls is not None:
            self.controls.started(self.job)
        return self.job

    def _bar(self, value) -> None:
        if (isinstance(value, tuple) and len(value) == 2 and self.controls is not None
                and self.controls.alive()):
            self.controls.report(*value)

    def _failed(self, message: str) -> None:
        self.failed(message)
        if self.status is not None:
            self.status(f"{self.title}: {message}" if self.title else message)

    def cancel(self) -> None:
        """Ask the running job to stop (its stop, if it comes, still reaches the view)."""
        if self.job is not None:
            self.job.cancel()

    def forget(self) -> None:
        """Stop the running job and drop whatever it still sends."""
        self.cancel()
        self._asked += 1
        if self.job is not None:
            self.job = None
            if self.controls is not None:
                self.controls.ended()
