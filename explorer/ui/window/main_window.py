"""The main window assembles: the block graph in the centre and the prompt under it, the
workspaces' docks (built when first shown), the workspace switcher, the first-run banner,
the menus, the status bar, the engine, the cover service and the model controller. It
owns no model, draws no data and runs no feature itself."""

from __future__ import annotations

import gc
import sys

import torch
from PySide6.QtCore import QByteArray, QSettings, Qt, QTimer, Slot
from PySide6.QtGui import QAction, QKeySequence
from PySide6.QtWidgets import (QDockWidget, QLabel, QMainWindow, QMessageBox, QProgressBar,
                               QVBoxLayout, QWidget)

from ...core.base.devices import usable_cores
from ...core.sources import ModelSpec
from ..base import preload
from ..base.engine import Engine
from ..base.jobs import JobRunner
from ..base.services import Services
from ..base.session import Session
from ..views.registry import BY_KEY
from ..widgets.cover import Covers, ViewFrame
from ..widgets.elided_label import ElidedLabel
from ..widgets.enlarge import CentralArea
from ..widgets.scrolling import scrolling
from .first_run import FirstRunBanner
from .actions import all_actions
from .models import Models
from .placement import first_size, fit_to_screen
from .run_files import RunFiles
from .settings_file import open_settings
from .workspaces import PROMPT, Workspaces

CLOSE_WAIT_S = 5.0  # the longest closing the window waits for a job to stop


class MainWindow(QMainWindow):
    def __init__(self, spec: ModelSpec | None = None, settings: QSettings | None = None) -> None:
        super().__init__()
        self.setWindowTitle("GPT Block Explorer")
        notice = None
        if settings is None:  # the user's own: a FIFO there would block Qt's reader
            settings, notice = open_settings()
        self.settings = settings
        self.warn = QMessageBox.warning  # replaced where no one can click a dialog away
        self.stuck = False  # a job that did not stop when the window closed
        self.close_wait_s = CLOSE_WAIT_S  # how long closing waits for each job to stop
        self._placed = False  # fitted to its screen once its frame is known
        self._painted = False  # the first paint: the docks' views are built after it
        self._unbuilt: list[str] = []  # docks shown before it
        self._tour = None  # Help ▸ Tour, while open: Esc closes it
        # a core left to the window, the GIL handed over after 1 ms: keys stay prompt
        torch.set_num_threads(max(1, usable_cores() - 1))
        sys.setswitchinterval(0.001)
        self.engine = Engine(self)
        self.jobs = JobRunner("downloads", self)  # work that needs no model: downloads
        if notice:  # said once the window shows
            QTimer.singleShot(0, lambda: self.warn(self, "Settings", notice))
        try:
            self._assemble(spec)
        except BaseException:  # a view that cannot be built: no thread may outlive us
            self.engine.shutdown()
            self.jobs.shutdown()
            for view in getattr(self, "views", {}).values():
                view.shutdown(self.close_wait_s)
            raise

    def _assemble(self, spec: ModelSpec | None) -> None:
        self.session = Session(retire=self.engine.retire)
        self.services = Services()  # what the views ask of the window: provided below
        self.covers = Covers(self.session, self)
        self.views: dict[str, QWidget] = {}
        self.docks: dict[str, QDockWidget] = {}
        self.banner = FirstRunBanner(self.settings)
        self.addToolBar(Qt.TopToolBarArea, self.banner.bar())  # above the graph and docks
        self.graph = self._build(BY_KEY["graph"])
        self.graph.restore_settings(self.settings)
        frame = ViewFrame(self.graph, "graph", BY_KEY["graph"].shows)
        self.covers.add(frame)
        self.central = CentralArea(frame, self.docks)  # a view shown large goes here
        holder = QWidget()
        column = QVBoxLayout(holder)
        column.setContentsMargins(0, 0, 0, 0)
        column.addWidget(self.central, 1)
        self.setCentralWidget(holder)
        # the right-hand column takes the whole height; the prompt sits under the graph
        self.setCorner(Qt.BottomRightCorner, Qt.RightDockWidgetArea)
        self.workspaces = Workspaces(self, self.settings)
        self.prompt = self.view(PROMPT)
        self._status_bar()
        self.models = Models(self)
        self.run_files = RunFiles(self)  # File ▸ Save run… / Open run…
        self._provide()
        self._menus()
        self._connect()
        first = self._restore()
        self.workspaces.show(first)
        gc.freeze()  # the widgets live as long as the window: keep them out of GC passes
        self.models.start(spec, self._last_spec())

    # ------------------------------------------------------------------ views
    def _build(self, spec) -> QWidget:
        view = spec.cls(self.session, self.engine)
        view.services = self.services
        view.setObjectName(f"view-{spec.key}")
        self.views[spec.key] = view
        return view

    def dock(self, key: str) -> QDockWidget:
        """The dock of view ``key`` (put away unless the shown workspace has it). Its
        view is built the first time the dock is shown, or when asked for (``view``)."""
        if key in self.docks:
            return self.docks[key]
        spec = BY_KEY[key]
        frame = ViewFrame(None, key, spec.shows)
        dock = QDockWidget(spec.tab_text, self)
        dock.setObjectName(key)
        dock.setWidget(frame)
        self.docks[key] = dock
        self.covers.add(frame)
        if key == PROMPT:  # the graph keeps the height: no title bar over the prompt
            dock.setTitleBarWidget(QWidget())
            self.addDockWidget(Qt.BottomDockWidgetArea, dock)
        else:
            self.addDockWidget(Qt.RightDockWidgetArea, dock)
            if not self.workspaces.has(key):
                dock.hide()
        dock.visibilityChanged.connect(lambda shown, k=key: shown and self._build_soon(k))
        return dock

    def _build_soon(self, key: str) -> None:
        """A dock just shown: its view built a loop turn later, after the window's first
        paint (the window, or the tab, is on screen before the view is made)."""
        if self._painted and not preload.busy():
            QTimer.singleShot(0, self, lambda: self.view(key))
        else:
            self._unbuilt.append(key)
            if self._painted and len(self._unbuilt) == 1:  # none waiting: none polls
                QTimer.singleShot(20, self, self._build_waiting)  # built once the imports end

    def paintEvent(self, event) -> None:  # noqa: N802 (Qt name)
        super().paintEvent(event)
        if not self._painted:  # on screen: the plotting library imported on a thread,
            self._painted = True  # and the modules of the views waiting to be built
            preload.start(preload.MODULES + tuple(BY_KEY[k].module for k in self._unbuilt))
            self._build_waiting()

    def _build_waiting(self) -> None:
        """The views shown before the first paint, one a loop turn, once the plotting
        library is imported (the window answers meanwhile)."""
        if preload.busy():
            QTimer.singleShot(20, self, self._build_waiting)  # dropped with the window
        elif self._unbuilt:
            self.view(self._unbuilt.pop(0))
            QTimer.singleShot(0, self, self._build_waiting)

    def view(self, key: str) -> QWidget:
        """View ``key``, built now if it was not yet (in its dock)."""
        if key in self.views:
            return self.views[key]
        dock = self.dock(key)
        view = self._build(BY_KEY[key])
        content = view
        if key != PROMPT:  # in a scroll area: a short dock scrolls the view, never squeezes it
            content = scrolling(view)
            content.setObjectName("view")
        dock.visibilityChanged.connect(view.visibility_changed)  # lazy views redraw when shown
        view.restore_settings(self.settings)
        dock.widget().set_content(content)
        self.covers.refresh(dock.widget())
        return view

    def show_view(self, key: str) -> None:
        """Show a view and give it the keys: in this workspace if it has it, else in
        its own workspace."""
        if key == "graph":
            return self.graph.setFocus()
        dock = self.workspaces.raise_view(key)
        dock.widget().setFocus()

    # ------------------------------------------------------------------ status and menus
    def _status_bar(self) -> None:
        """The model's line, the session's status, the busy bar."""
        self.model_label = ElidedLabel("no model")  # cut with "…" beside a long status
        self.busy = QProgressBar()
        self.busy.setRange(0, 0)
        self.busy.setMaximumWidth(120)
        self.busy.hide()
        self.status_text = QLabel()
        self.statusBar().addWidget(self.model_label, 1)
        self.statusBar().addPermanentWidget(self.status_text)
        self.statusBar().addPermanentWidget(self.busy)

    def _connect(self) -> None:
        s = self.session
        s.statusChanged.connect(lambda _text: self._status())
        s.coverChanged.connect(lambda _facts: self._status())
        s.busyChanged.connect(lambda on: self.busy.setVisible(on or self.models.loading))
        s.errorRaised.connect(lambda title, text: self.warn(self, title, text))
        s.caughtUp.connect(self.engine.gui_caught_up)
        s.trainingChanged.connect(self.banner.training)

    def _provide(self) -> None:
        """Who answers each of the views' calls (ui/base/services.py)."""
        self.services.provide(
            load_model=self.models.load,
            run_prompt=self.prompt.run_prompt,
            branch=self.prompt.runs.branch,
            show_view=self.show_view,
            explain_token=lambda token_id: self.view("why").explain_token(token_id),
            use_sampling=self.prompt.use_sampling,
            train_here=self.models.train_here)

    def _status(self) -> None:
        """The session's line, masked while a question is open; hover reads it whole."""
        text = self.session.covered.mask(self.session.status)
        self.status_text.setText(text)
        self.status_text.setToolTip(text)

    @property
    def running(self) -> bool:
        return self.session.busy

    def _menus(self) -> None:
        """The menu bar from the one list of actions (actions.py), each QAction kept by
        its id; the workspace switcher beside it."""
        menus: dict[str, object] = {}

        def menu(path: str):
            if path not in menus:
                parent, _, title = path.rpartition(" ▸ ")
                menus[path] = (menu(parent).addMenu(title) if parent
                               else self.menuBar().addMenu(f"&{title}"))
            return menus[path]

        self.actions_by_id: dict[str, QAction] = {}
        for spec in all_actions():
            action = QAction(spec.title, self)
            keys = [QKeySequence(getattr(QKeySequence.StandardKey, k[4:])) if k.startswith("std:")
                    else QKeySequence(k) for k in spec.shortcuts]
            keys = [k for k in keys if not k.isEmpty()]  # a standard key the platform lacks
            if keys:
                action.setShortcuts(keys)
            if spec.everywhere:
                action.setShortcutContext(Qt.ApplicationShortcut)
            action.setStatusTip(spec.tip)
            action.triggered.connect(lambda _=False, a=spec: a.call(self))
            if spec.separated:
                menu(spec.menu).addSeparator()
            menu(spec.menu).addAction(action)
            self.actions_by_id[spec.id] = action
        self.get_gpt2_action = self.actions_by_id["get_gpt2"]
        self.generate_action = self.actions_by_id["generate"]
        self.stop_action = self.actions_by_id["stop"]
        self.large_action = self.actions_by_id["large"]
        if self.menuBar().isNativeMenuBar():  # a menu bar outside the window: a toolbar row
            self.addToolBar(Qt.TopToolBarArea, self.workspaces.bar)
        else:
            self.menuBar().setCornerWidget(self.workspaces.bar, Qt.TopRightCorner)

    # ------------------------------------------------------------------ actions
    @Slot()
    def stop(self) -> None:
        """Esc: the engine's work stops at its next safe point (downloads: Cancel); with
        nothing to stop, an open tour closes (a click in the window took Esc from it)."""
        if self.session.busy or self.models.loading or self.engine.busy():
            self.engine.cancel_all()
            self.session.set_status("Stopping…")
        elif self._tour is not None and self._tour.isVisible():
            self._tour.close()

    def front_dock(self) -> QDockWidget | None:
        """The shown workspace's tab in front (or its first one)."""
        key = self.workspaces.current
        own = [self.docks[v] for v in self.workspaces.members(key) if v in self.docks]
        shown = [d for d in own if d.isVisible() and not d.visibleRegion().isEmpty()]
        return (shown or own or [None])[0]

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
        tour = self._tour = Tour(self, tour_steps(self))
        tour.show()
        return tour

    def reset_layout(self) -> None:
        self.workspaces.reset()

    # ------------------------------------------------------------------ settings
    def _last_spec(self) -> ModelSpec:
        try:
            return ModelSpec.from_dict(self.settings.value("model/spec"))
        except (ValueError, TypeError):
            return ModelSpec()

    def _restore(self) -> str:
        """The window's place and each workspace's layout; the workspace to show."""
        geometry = self.settings.value("window/geometry")
        if isinstance(geometry, QByteArray) and self.restoreGeometry(geometry):
            self.fit_to_screen()  # saved on a larger monitor: brought onto this one
        else:  # none saved, or not a geometry (a damaged settings file): the default
            self.fit_to_screen(first_size(self))
        return self.workspaces.restore()

    def fit_to_screen(self, size: tuple[int, int] | None = None) -> None:
        fit_to_screen(self, size)

    def _default_dock_sizes(self) -> None:
        self.workspaces.sizes()

    def showEvent(self, event) -> None:  # noqa: N802
        super().showEvent(event)
        if not self._placed:  # now the frame's size is known
            self._placed = True
            QTimer.singleShot(0, self.fit_to_screen)

    def closeEvent(self, event) -> None:  # noqa: N802
        self.central.restore()  # a view shown large goes home before the layout is saved
        self.settings.setValue("window/geometry", self.saveGeometry())
        self.workspaces.save()
        for view in self.views.values():
            view.save_settings(self.settings)
        self.settings.sync()
        self.models.closing = True
        # a job still running after Stop is in a read that cannot be abandoned: exit anyway
        wait = self.close_wait_s
        self.stuck = not all([self.engine.shutdown(wait), self.jobs.shutdown(wait),
                              *[view.shutdown(wait) for view in self.views.values()]])
        super().closeEvent(event)
