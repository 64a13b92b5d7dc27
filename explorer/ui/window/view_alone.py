"""One view in a window of its own (``gpt-explorer view KEY``), as pyqtgraph's examples
run alone: a session, the engine with the model loaded, the prompt run once, and the view
built on them. For developing and looking at a single view; the main window assembles
every view the same way."""

from __future__ import annotations

from PySide6.QtCore import Slot
from PySide6.QtWidgets import QLabel, QMainWindow, QMessageBox

from ...core.run.generation import GenerationSettings
from ...core.sources import ModelInfo, ModelSpec
from ..base.engine import Engine
from ..base.runs import Runs
from ..base.services import Services
from ..base.session import Session
from ..views.registry import BY_KEY

DEFAULT_PROMPT = "Every effort moves you"
CLOSE_WAIT_S = 5.0  # as the main window: then the process leaves without the thread


class ViewWindow(QMainWindow):
    """View ``key`` alone on a session of its own: the model of ``spec`` loaded in the
    engine, then ``prompt`` run (its pass and ``max_new_tokens`` steps) as Ctrl+Enter
    does. A view's own requests are served here too: run the prompt again, load a model."""

    def __init__(self, key: str, spec: ModelSpec | None = None, prompt: str = DEFAULT_PROMPT,
                 max_new_tokens: int = 2) -> None:
        super().__init__()
        if key not in BY_KEY:
            raise ValueError(f"unknown view {key!r}; choose one of {', '.join(BY_KEY)}")
        self.spec, self.prompt = spec or ModelSpec(), prompt
        self.settings = GenerationSettings(max_new_tokens=max_new_tokens)
        self.close_wait_s = CLOSE_WAIT_S
        self.stuck = False
        self.warn = QMessageBox.warning  # replaced where no one can click a dialog away
        self.engine = Engine(self)
        self.session = Session(retire=self.engine.retire)
        self.runs = Runs(self.session, self.engine)
        view_spec = BY_KEY[key]
        self.setWindowTitle(f"{view_spec.title} — GPT Block Explorer")
        self.view = view_spec.cls(self.session, self.engine)
        self.view.setObjectName(f"view-{key}")
        self.views = {key: self.view}  # as the main window's, by key
        self.setCentralWidget(self.view)
        self.status = QLabel()
        self.statusBar().addWidget(self.status, 1)
        self.session.statusChanged.connect(self.status.setText)
        self.session.errorRaised.connect(lambda title, text: self.warn(self, title, text))
        self.session.caughtUp.connect(self.engine.gui_caught_up)
        self.view.services = Services().provide(load_model=self.load, run_prompt=self.run_prompt,
                                                branch=self.runs.branch)
        self.resize(900, 700)
        self.load(self.spec)

    @property
    def running(self) -> bool:
        return self.runs.running

    def load(self, spec: ModelSpec, then=None) -> None:
        """The model in the engine, then shown; ``then(info)`` after (this window's own
        first load runs the prompt)."""
        self.status.setText(f"Loading {spec.describe()}…")

        def loaded(info: ModelInfo) -> None:
            self.session.set_model(info)
            (then or (lambda _info: self.run_prompt()))(info)
        self.engine.load(spec, finished=loaded,
                         failed=lambda text: self.warn(self, "GPT Block Explorer", text))

    @Slot(str)
    def run_prompt(self, prompt: str = "") -> None:
        """The prompt (this window's unless one is given), its pass and its steps."""
        self.prompt = prompt or self.prompt
        self.runs.start(self.session.input_tokenizer.encode(self.prompt), self.settings)

    def closeEvent(self, event) -> None:  # noqa: N802
        wait = self.close_wait_s
        self.stuck = not all([self.engine.shutdown(wait), self.view.shutdown(wait)])
        super().closeEvent(event)
