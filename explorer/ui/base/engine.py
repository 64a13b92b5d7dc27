"""The engine: the job runner whose thread owns the model. It runs jobs — plain core
callables, ``fn(ctx)`` with ``ctx.model``, ``ctx.report`` and ``ctx.should_stop`` (see
jobs.py) — one at a time, so all torch work happens there; the GUI gets numpy-only
results as data. It has no per-feature slots: a view submits its own jobs.

Two things it does for the window's latency: after a job reports a prompt pass, it waits
(briefly, ``catch_up``) for the views to draw it before its next long stretch of Python
work, which would compete with the drawing for the GIL; and it frees the passes the
window replaced (``retire``), a tensor at a time, instead of the GUI thread.

And one for the machine: the C heap keeps what a pass freed for the next pass
(``heap.reuse_freed_memory``); once no job has run for ``IDLE_GIVE_BACK_S`` it gives
that memory back to the system (``heap.give_back_freed_memory``), on its own thread.
"""

from __future__ import annotations

import gc
import logging
import threading
from typing import Any

from PySide6.QtCore import QObject, QTimer

from ...core.run.passes import Pass
from ...core.sources import ModelInfo, ModelSpec, open_model
from ...core.base.cancel import Cancelled
from ...core.base.heap import give_back_freed_memory
from .jobs import EXPECTED, Job, JobContext, JobRunner

log = logging.getLogger("explorer.ui.base.engine")

GUI_CATCH_UP_S = 0.5  # the longest the engine waits for the GUI to draw a pass
IDLE_GIVE_BACK_S = 20.0  # no job for this long: the heap's freed memory goes back
GIVE_BACK = "give back freed memory"  # that job's name


class Engine(JobRunner):
    def __init__(self, parent: QObject | None = None,
                 idle_give_back_s: float = IDLE_GIVE_BACK_S) -> None:
        super().__init__("engine", parent)
        self._idle = QTimer(self)  # started as each job ends, stopped as one is queued
        self._idle.setSingleShot(True)
        self._idle.setInterval(round(idle_give_back_s * 1000))
        self._idle.timeout.connect(self._give_back_when_idle)
        self.loaded = None  # LoadedModel, set and used on the engine's thread only
        self.record: str | None = None  # the saved run the window shows read-only, if any
        # Cleared when a job reports a prompt pass; set by the window once every view has
        # drawn it (gui_caught_up).
        self.gui_idle = threading.Event()
        self.gui_idle.set()
        self._retired: list[Pass] = []  # passes the GUI no longer shows, freed here

    # ---------------------------------------------------------------------- jobs
    def context(self, job: Job) -> JobContext:
        return JobContext(job, self, self.loaded, self.record)

    def queued(self, job: Job) -> None:
        """Each job stops the idle clock, which starts again when the job ends; the
        give-back is not counted as a job: no clock after it."""
        if job.name == GIVE_BACK:
            return
        self._idle.stop()
        for end in (job.finished, job.failed, job.cancelled):
            end.connect(self._job_ended)  # a method of the engine: run on the GUI thread

    def _job_ended(self, *_) -> None:
        self._idle.start()

    def _give_back_when_idle(self) -> None:
        if not self.thread.isRunning():  # shut down: nothing runs there any more
            return
        if self.busy():  # a job still ending (its end signalled, not yet marked done)
            self._idle.start()  # or queued meanwhile: ask again later, never during it
            return
        self.submit(lambda ctx: give_back_freed_memory(), GIVE_BACK)

    def before_report(self, value: Any) -> None:
        if isinstance(value, Pass) and not value.one_position and value.views:
            self.gui_idle.clear()  # the window is about to draw a whole pass

    def load(self, spec: ModelSpec, **handlers) -> Job:
        """A job that loads a model; ``finished`` gets its ModelInfo. On failure or Stop
        the previous model stays loaded."""
        def load(ctx: JobContext) -> ModelInfo:
            try:
                loaded = open_model(spec, ctx.should_stop)
            except (Cancelled, *EXPECTED):  # already one line for people
                raise
            except Exception as exc:  # a reader's own error: words for people, details logged
                log.error("loading %s failed", spec.describe(), exc_info=True)
                raise ValueError(f"{spec.describe()} could not be read: the file is damaged or "
                                 f"not what it seems ({type(exc).__name__}; the details are in "
                                 "the log)") from None
            self.loaded = loaded
            loaded.tokenizer.load()  # its vocabulary read here, not on the GUI thread at a key
            # The model's thousands of long-lived objects would make every full garbage
            # collection (which holds the GIL, so the GUI thread too) take ~100 ms.
            gc.freeze()
            return ModelInfo.of(loaded, spec)

        return self.submit(load, f"load {spec.describe()}", **handlers)

    # ---------------------------------------------------------------------- the window's pace
    def catch_up(self) -> None:
        """On the engine's thread, after a prompt pass was reported: wait until the views
        have drawn it (or half a second), then free the passes it replaced."""
        self.gui_idle.wait(GUI_CATCH_UP_S)
        self.drop_retired()

    def gui_caught_up(self) -> None:
        """From the GUI thread once every view has redrawn the new pass."""
        self.gui_idle.set()
        if self._retired:
            self.submit(lambda ctx: self.drop_retired(), "free replaced passes")

    def retire(self, *passes: Pass | None) -> None:
        """From the GUI thread, with passes it replaced: they are freed here later, never
        on the GUI thread, where freeing a 1024-token pass's gigabyte takes ~60 ms."""
        self._retired.extend(p for p in passes if p is not None)

    def drop_retired(self) -> None:
        """Free retired passes one tensor at a time; between two, the GIL can go to the
        GUI thread, so it never waits long."""
        while self._retired:
            views = self._retired.pop().views
            while views:
                views.popitem()
