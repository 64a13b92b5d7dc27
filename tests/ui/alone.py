"""Views tested alone: a session, an engine stand-in that runs jobs on the GUI thread,
and a real (tiny) model, without the main window."""

from __future__ import annotations

from PySide6.QtCore import QObject, QTimer

from explorer.core.run.generation import GenerationSettings
from explorer.core.run.passes import Completed, prompt_then_generate
from explorer.core.sources import ModelInfo, ModelSpec, random_model
from explorer.core.gpt.tokenizer import encode
from explorer.ui.base.jobs import Job, JobContext, connect, run_job
from explorer.ui.base.services import Services
from explorer.ui.base.session import Session
from explorer.ui.views.registry import BY_KEY, VIEWS


class InlineEngine(QObject):
    """The engine's job API, run on the GUI thread in the next turn of the event loop
    (so that a view's handlers are connected first), with a loaded model."""

    def __init__(self, loaded) -> None:
        super().__init__()
        self.loaded = loaded
        self.names: list[str] = []  # what was submitted, in order
        self.jobs: list[Job] = []

    def submit(self, fn, name: str = "job", *, progress=None, finished=None, failed=None,
               cancelled=None) -> Job:
        job = connect(Job(fn, name), progress, finished, failed, cancelled)
        self.names.append(name)
        self.jobs.append(job)
        QTimer.singleShot(0, lambda: run_job(job, JobContext(job, self, self.loaded)))
        return job

    def before_report(self, value) -> None:
        pass

    def catch_up(self) -> None:
        pass

    def cancel_all(self) -> None:
        for job in self.jobs:
            job.cancel()

    def idle(self) -> bool:
        return all(job.done for job in self.jobs)


class Alone:
    """Views on one session; ``view(cls)`` or ``show(title)`` builds one alone."""

    def __init__(self, qtbot, preset: str = "tiny", loaded=None) -> None:
        """A preset's random model, or ``loaded`` (a LoadedModel made by the test)."""
        self.qtbot = qtbot
        self.loaded = loaded or random_model(preset, seed=0)
        self.engine = InlineEngine(self.loaded)
        self.session = Session()
        self.session.set_model(ModelInfo.of(self.loaded, ModelSpec(preset=preset)))
        self._views: dict[type, object] = {}
        self.shown: list[str] = []  # the views asked to be shown, in order
        self.services = Services().provide(
            show_view=self.shown.append,
            explain_token=lambda token_id: self.why.explain_token(token_id),
            use_sampling=lambda settings: self.prompt.use_sampling(settings))

    def run(self, text: str = "Every effort moves you", max_tokens: int = 2) -> None:
        """A prompt pass and generated steps, as the app's Ctrl+Enter makes them."""
        passes = []
        prompt_then_generate(self.loaded.model, encode(text),
                             GenerationSettings(max_new_tokens=max_tokens), passes.append)
        self.session.set_prompt(passes[0])
        for step in passes[1:]:
            if isinstance(step, Completed):  # the statistics the first view did not need
                self.session.pass_completed(step.result)
            else:
                self.session.add_step(step)
        self.settle()

    def view(self, cls, width: int = 900, height: int = 700):
        if cls not in self._views:
            widget = cls(self.session, self.engine)
            widget.services = self.services
            self.qtbot.addWidget(widget)
            widget.resize(width, height)
            widget.show()
            self.qtbot.waitExposed(widget)  # shown and painted: a lazy view draws now
            self._views[cls] = widget
        self.settle()
        return self._views[cls]

    def show(self, title: str):
        return self.view(next(v.cls for v in VIEWS if v.title == title))

    def settle(self) -> None:
        """Every view has redrawn (one per loop turn) and every job has ended."""
        self.qtbot.waitUntil(lambda: self.session.caught_up() and self.engine.idle(),
                             timeout=60_000)
        for widget in self._views.values():
            busy = getattr(widget, "busy", None)
            if callable(busy):
                self.qtbot.waitUntil(lambda: not busy(), timeout=60_000)

    def __getattr__(self, key: str):
        """``alone.inspector``, ``alone.graph``: a view by its key (views.registry)."""
        if key in BY_KEY:
            return self.view(BY_KEY[key].cls)
        raise AttributeError(key)
