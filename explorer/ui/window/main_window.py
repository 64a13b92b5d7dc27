"""The main window assembles: the views from views.VIEWS (the central one, docks and
tabs, a View menu entry and shortcut each), the first-run banner, the menus, the status
bar, and the engine. It loads models and shows what the session says (busy, status,
errors); it owns no model, draws no data and runs no feature itself."""

from __future__ import annotations

import sys

import torch
from PySide6.QtCore import QByteArray, QSettings, Qt, QTimer, Slot
from PySide6.QtGui import QAction, QKeySequence
from PySide6.QtWidgets import (QDockWidget, QFileDialog, QLabel, QMainWindow, QMessageBox,
                               QProgressBar, QVBoxLayout, QWidget)

from ...core.weights import hub
from ...core.gpt.config import PRESETS
from ...core.base.devices import usable_cores
from ...core.sources import ModelInfo, ModelSpec
from ..base.engine import Engine
from ..widgets.enlarge import CentralArea
from .first_run import FirstRunBanner
from .help import about
from .run_files import RunFiles
from ..base.jobs import JobRunner
from ..base.session import Session
from .placement import BOTTOM_MIN, default_dock_sizes, first_size, fit_to_screen, style_dock_tabs
from ...core.lessons.quiz import ORDER
from ..widgets.cover import Cover
from ..widgets.scrolling import scrolling
from ..views.registry import VIEWS

CHECKPOINT_FILTER = "Checkpoints (*.safetensors *.bin *.pth *.pt *.ckpt *.index);;All files (*)"

AREAS = {"right": Qt.RightDockWidgetArea, "bottom": Qt.BottomDockWidgetArea}


def _unordered(text: str) -> str:
    return text.replace(" · Post-LN", "").replace(" · Pre-LN", "")
CLOSE_WAIT_S = 5.0  # the longest closing the window waits for a job to stop


class MainWindow(QMainWindow):
    def __init__(self, spec: ModelSpec | None = None, settings: QSettings | None = None) -> None:
        super().__init__()
        self.setWindowTitle("GPT Block Explorer")
        self.settings = settings or QSettings("GPT Block Explorer", "gpt-block-explorer")
        self.warn = QMessageBox.warning  # replaced where no one can click a dialog away
        self.loading = False
        self.stuck = False  # a job that did not stop when the window closed
        self.load_job = None
        self.load_job_spec: ModelSpec | None = None
        # a core left to the window, the GIL handed over after 1 ms: keys stay prompt
        torch.set_num_threads(max(1, usable_cores() - 1))
        sys.setswitchinterval(0.001)
        self.engine = Engine(self)
        self.jobs = JobRunner("downloads", self)  # work that needs no model: downloads
        try:
            self._assemble(spec)
        except BaseException:  # a view that cannot be built: no thread may outlive us
            self.engine.shutdown()
            self.jobs.shutdown()
            raise

    def _assemble(self, spec: ModelSpec | None) -> None:
        self.session = Session(retire=self.engine.retire)

        self.views, self.docks = {}, {}
        self.banner = FirstRunBanner(self.settings)
        self.addToolBar(Qt.TopToolBarArea, self.banner.bar())  # above the graph and docks
        central = QWidget()
        column = QVBoxLayout(central)
        column.setContentsMargins(0, 0, 0, 0)
        column.setSpacing(0)
        for spec_ in VIEWS:
            widget = spec_.cls(self.session, self.engine)
            self.views[spec_.key] = widget
            setattr(self, spec_.attr, widget)
            if spec_.covered_by:  # Learn mode's questions cover what would answer them
                Cover(widget, self.session, spec_.covered_by)
            if spec_.area == "central":
                self.central = CentralArea(widget, self.docks)  # a view shown large goes here
                column.addWidget(self.central, 1)
            else:  # each area's docks as tabs at once (side by side they widen the window)
                self.docks[spec_.key] = self._dock(spec_, widget)
                first = next(s.key for s in VIEWS if s.area == spec_.area)
                if first != spec_.key:
                    self.tabifyDockWidget(self.docks[first], self.docks[spec_.key])
        self.setCentralWidget(central)
        # the right-hand tabs take the whole height; the prompt panel sits under the graph
        self.setCorner(Qt.BottomRightCorner, Qt.RightDockWidgetArea)
        for area in AREAS:  # its first tab in front
            self.docks[next(s.key for s in VIEWS if s.area == area)].raise_()
        self._full_tab_titles()
        self._default_state = self.saveState()
        self._get_gpt2 = None

        self._status_bar()
        self._connect()
        self.run_files = RunFiles(self)  # File ▸ Save run… / Open run…
        self._menus()
        self._restore()
        import gc
        gc.freeze()  # the widgets live as long as the window: keep them out of GC passes
        self._remembered = spec is None  # the model of the last launch, which may be gone
        self.load_model(spec or self._last_spec())

    def _status_bar(self) -> None:
        """The model's line, the session's status, the busy bar."""
        self.model_label = QLabel("no model")
        self.busy = QProgressBar()
        self.busy.setRange(0, 0)
        self.busy.setMaximumWidth(120)
        self.busy.hide()
        self.status_text = QLabel()
        self.statusBar().addWidget(self.model_label, 1)
        self.statusBar().addPermanentWidget(self.status_text)
        self.statusBar().addPermanentWidget(self.busy)

    def _connect(self) -> None:
        """The session's and the banner's signals to what the window does with them."""
        s = self.session
        s.statusChanged.connect(self.status_text.setText)
        s.coverChanged.connect(self._order_words)
        s.statusChanged.connect(self.status_text.setToolTip)  # a long line is cut: hover reads it
        s.busyChanged.connect(lambda on: self.busy.setVisible(on or self.loading))
        s.errorRaised.connect(lambda title, text: self.warn(self, title, text))
        s.modelRequested.connect(self.load_model)
        s.caughtUp.connect(self.engine.gui_caught_up)
        self.banner.downloadRequested.connect(lambda: self.get_gpt2(start="gpt2"))
        self.banner.openFolderRequested.connect(self.open_folder)
        self.banner.openFileRequested.connect(self.open_checkpoint)
        self.banner.trainRequested.connect(self.train_here)
        self.train_panel.estimateChanged.connect(self.banner.training)
        s.viewRequested.connect(self.show_view)

    @property
    def running(self) -> bool:
        return self.session.busy

    # ------------------------------------------------------------------ docks
    def _dock(self, spec_, view) -> QDockWidget:
        widget = view
        dock = QDockWidget(spec_.tab_text, self)
        dock.setObjectName(spec_.key)
        if spec_.area == "bottom":  # the tabs name them: the graph keeps the title's height
            dock.setTitleBarWidget(QWidget())
            if widget.minimumSizeHint().height() > BOTTOM_MIN:  # taller content scrolls
                widget = scrolling(widget)
        dock.setWidget(widget)
        self.addDockWidget(AREAS[spec_.area], dock)
        dock.dockLocationChanged.connect(lambda _area: self._full_tab_titles())
        dock.visibilityChanged.connect(view.visibility_changed)  # lazy views redraw when shown
        return dock

    def _full_tab_titles(self) -> None:
        style_dock_tabs(self)

    def show_view(self, key: str) -> None:
        dock = self.docks[key]
        dock.show()
        dock.raise_()
        dock.widget().setFocus()

    # ------------------------------------------------------------------ menus
    def _action(self, menu, text: str, slot, shortcut=None, tip: str = "") -> QAction:
        action = QAction(text, self)
        if shortcut is not None:
            action.setShortcuts(shortcut if isinstance(shortcut, list) else [shortcut])
        action.setStatusTip(tip)
        action.triggered.connect(slot)
        menu.addAction(action)
        return action

    def _menus(self) -> None:
        file_menu = self.menuBar().addMenu("&File")
        self.get_gpt2_action = self._action(
            file_menu, "&Get GPT-2…", self.get_gpt2, QKeySequence("Ctrl+Shift+G"),
            "Download GPT-2 (124M to 1.5B) from the Hugging Face Hub, with progress and resume")
        self._action(file_menu, "&Choose model…", self.choose_model, QKeySequence("Ctrl+M"),
                     "GPT-2 from the Hugging Face cache, a checkpoint, or a random preset")
        self._action(file_menu, "&Open checkpoint…", self.open_checkpoint, QKeySequence.Open,
                     "Load a checkpoint file (.pth, .safetensors, .bin, model.ckpt.index)")
        self._action(file_menu, "Open &folder…", self.open_folder, QKeySequence("Ctrl+Shift+O"),
                     "Load a model folder: the book's gpt2/124M or a Hugging Face folder")
        self.run_files.add_actions(file_menu)
        presets = file_menu.addMenu("Random &preset (untrained)")
        for name in PRESETS:
            self._action(presets, name, lambda _=False, n=name: self.load_model(ModelSpec(preset=n)))
        self._action(file_menu, "&Default model", lambda: self.load_model(ModelSpec()))
        file_menu.addSeparator()
        self._action(file_menu, "&Quit", self.close, QKeySequence.Quit)
        run_menu = self.menuBar().addMenu("&Run")
        self.generate_action = self._action(
            run_menu, "&Generate", self.generation.request_run,
            [QKeySequence("Ctrl+Return"), QKeySequence("Ctrl+Enter")],
            "Run the prompt through the model and generate")
        self.generate_action.setShortcutContext(Qt.ApplicationShortcut)
        self.stop_action = self._action(run_menu, "&Stop", self.stop, QKeySequence("Esc"),
                                        "Stop before the next token")
        self.stop_action.setShortcutContext(Qt.ApplicationShortcut)
        view_menu = self.menuBar().addMenu("&View")
        for spec_ in VIEWS:
            if spec_.key in self.docks:
                view_menu.addAction(self.docks[spec_.key].toggleViewAction())
        view_menu.addSeparator()
        for spec_ in VIEWS:
            if spec_.key in self.docks and spec_.shortcut:
                self._action(view_menu, f"Go to {spec_.title}",
                             lambda _=False, k=spec_.key: self.show_view(k),
                             QKeySequence(spec_.shortcut))
        self.large_action = self._action(
            view_menu, "Show the front tab &large", self.toggle_large, QKeySequence("F11"),
            "The right-hand tab in front takes the centre; F11 again puts it back")
        self.large_action.setShortcutContext(Qt.ApplicationShortcut)
        self._action(view_menu, "&Reset layout", self.reset_layout)
        help_menu = self.menuBar().addMenu("&Help")
        self._action(help_menu, "&Tour", self.tour, tip="What is where in the window")
        self._action(help_menu, "&Keyboard shortcuts", self.show_shortcuts,
                     QKeySequence("Ctrl+/"))
        self._action(help_menu, "&About", lambda: about(self))

    # ------------------------------------------------------------------ models
    def load_model(self, spec: ModelSpec) -> None:
        """Load in the engine; on failure or Stop the previous model stays."""
        self.loading = True
        self.load_job_spec = spec
        self.busy.show()
        self.model_label.setText(f"Loading {spec.describe()}…")
        self.load_job = self.engine.load(
            spec, finished=self.on_model_loaded, failed=self.on_load_failed,
            cancelled=lambda: self.on_load_failed(
                f"Loading {spec.describe()} was stopped; the previous model stays."))

    def choose_model(self) -> None:
        from .model_dialog import ModelDialog
        dialog = ModelDialog(self, self.session.model.spec if self.session.model else None)
        if dialog.exec():
            self.load_model(dialog.spec())

    def open_checkpoint(self) -> None:
        path, _ = QFileDialog.getOpenFileName(self, "Open checkpoint", "", CHECKPOINT_FILTER)
        if path:
            self.load_model(ModelSpec(checkpoint=path))

    def open_folder(self) -> None:
        path = QFileDialog.getExistingDirectory(
            self, "Open a model folder (the book's gpt2/124M, or a Hugging Face folder)")
        if path:
            self.load_model(ModelSpec(checkpoint=path))

    def get_gpt2(self, start: str | None = None):
        """File ▸ Get GPT-2…; ``start`` names a size to download right away."""
        from .get_gpt2 import GetGpt2Dialog
        if self._get_gpt2 is None:
            self._get_gpt2 = GetGpt2Dialog(self.jobs, self)
            self._get_gpt2.modelReady.connect(self._downloaded)
            self._get_gpt2.openFolderRequested.connect(self.open_folder)
            self._get_gpt2.trainRequested.connect(self.train_here)
        dialog = self._get_gpt2
        dialog.refresh()
        dialog.show()
        dialog.raise_()
        if start and dialog.job is None:
            dialog.table.selectRow([m.name for m in hub.GPT2_MODELS].index(start))
            dialog.start()
        return dialog

    def train_here(self) -> None:  # the offline way: the default small model, trained now
        self.show_view("train")
        if self.train_panel.job is None:
            self.train_panel.start()

    @Slot(str)
    def _downloaded(self, repo_id: str) -> None:
        self.load_model(ModelSpec(checkpoint=f"hf:{repo_id}"))
        if self._get_gpt2 is not None:
            self._get_gpt2.close()

    @Slot(object)
    def on_model_loaded(self, info: ModelInfo) -> None:
        self.loading = False
        self.busy.setVisible(self.session.busy)
        self.session.set_model(info)
        self.model_text = (f"{'' if info.trained else '⚠ '}{info.label} · {info.size} · "
                           f"{info.device} · {info.dtype}")
        self.model_label.setText(self.model_text)
        self.title_text = f"GPT Block Explorer — {info.label} · {info.size}"
        self.setWindowTitle(self.title_text)
        self.session.set_status("; ".join(["Model loaded", *info.notices]))
        self.banner.model_loaded(info.trained)
        self.settings.setValue("model/spec", info.spec.to_dict())

    def _order_words(self, covered) -> None:
        """A Learn question about the order: the title and the model line do not say it."""
        if self.session.model is not None:
            hide = ORDER in covered
            self.setWindowTitle(_unordered(self.title_text) if hide else self.title_text)
            self.model_label.setText(_unordered(self.model_text) if hide else self.model_text)

    @Slot(str)
    def on_load_failed(self, message: str) -> None:
        self.loading = False
        self.busy.setVisible(self.session.busy)
        if self.session.model is None and self._remembered and self.load_job_spec != ModelSpec():
            # the first load failed (a remembered model that is gone or damaged): the
            # window starts on the default model instead of on nothing
            self.warn(self, "Could not load the model", f"{message}\n\nLoading the default "
                      "model instead.")
            self.load_model(ModelSpec())
            return
        keep = self.session.model.label if self.session.model else "no model"
        self.model_label.setText(f"{keep} (kept)")
        self.warn(self, "Could not load the model", message)

    # ------------------------------------------------------------------ actions
    @Slot()
    def stop(self) -> None:
        """Esc: the engine's work stops at its next safe point (downloads: Cancel)."""
        if self.session.busy or self.loading or self.engine.busy():
            self.engine.cancel_all()
            self.session.set_status("Stopping…")

    def front_dock(self) -> QDockWidget | None:
        """The right-hand tab in front (or the first one)."""
        right = [self.docks[s.key] for s in VIEWS if s.area == "right"]
        shown = [d for d in right if d.isVisible() and not d.visibleRegion().isEmpty()]
        return (shown or right or [None])[0]

    def toggle_large(self) -> None:
        if self.central.dock is not None:
            self.central.restore()
        elif (dock := self.front_dock()) is not None:
            self.central.enlarge(dock)

    def show_shortcuts(self):
        from .help import ShortcutsDialog
        dialog = ShortcutsDialog(self, self.menuBar())
        dialog.show()
        return dialog

    def tour(self):
        from .help import Tour, tour_steps
        tour = Tour(self, tour_steps(self))
        tour.show()
        return tour

    def reset_layout(self) -> None:
        self.central.restore()
        self.restoreState(self._default_state)
        for dock in self.docks.values():
            dock.show()
        self.docks["inspector"].raise_()
        self._full_tab_titles()
        self.docks["generation"].raise_()
        self._default_dock_sizes()

    # ------------------------------------------------------------------ settings
    def _last_spec(self) -> ModelSpec:
        try:
            return ModelSpec.from_dict(self.settings.value("model/spec"))
        except (ValueError, TypeError):
            return ModelSpec()

    def _restore(self) -> None:
        s = self.settings
        geometry, state = s.value("window/geometry"), s.value("window/state")
        if isinstance(geometry, QByteArray) and self.restoreGeometry(geometry):
            if isinstance(state, QByteArray):
                self.restoreState(state)  # False (and no change) for bytes it cannot read
            self._full_tab_titles()
            self.fit_to_screen()  # saved on a larger monitor: brought onto this one
        else:  # none saved, or not a geometry (a damaged settings file): the default
            self.fit_to_screen(first_size(self))
            QTimer.singleShot(0, self._default_dock_sizes)
        for view in self.views.values():
            view.restore_settings(s)

    def fit_to_screen(self, size: tuple[int, int] | None = None) -> None:
        fit_to_screen(self, size)

    def _default_dock_sizes(self) -> None:
        default_dock_sizes(self, self.docks["generation"], self.docks["inspector"])

    def showEvent(self, event) -> None:  # noqa: N802
        super().showEvent(event)
        if not getattr(self, "_placed", False):  # now the frame's size is known
            self._placed = True
            QTimer.singleShot(0, self.fit_to_screen)

    def closeEvent(self, event) -> None:  # noqa: N802
        self.central.restore()  # a view shown large goes home before the layout is saved
        self.settings.setValue("window/geometry", self.saveGeometry())
        self.settings.setValue("window/state", self.saveState())
        for view in self.views.values():
            view.save_settings(self.settings)
        self.settings.sync()
        # a job still running after Stop is in a read that cannot be abandoned: exit anyway
        self.stuck = not all([self.engine.shutdown(CLOSE_WAIT_S), self.jobs.shutdown(CLOSE_WAIT_S)])
        super().closeEvent(event)
