"""The workspaces: which docks the window shows for what the user is doing (views.registry
WORKSPACES), each laid out for the screen it is on. A workspace's views are built the first
time it is shown; its layout (dock places, sizes, the tab in front, views opened there
from other workspaces) is kept when the user leaves it and remembered across launches; Reset
layout puts the shown one back. The graph (centre) and the prompt (under it) are in every
workspace. Owns no view: the window builds them (``window.dock(key)``)."""

from __future__ import annotations

from PySide6.QtCore import QByteArray, QObject, QSettings, Qt, QTimer, Signal
from PySide6.QtWidgets import QDockWidget, QMainWindow, QTabBar

from ..views.registry import BY_KEY, WORKSPACES, in_workspace
from .placement import default_dock_sizes, style_dock_tabs

PROMPT = "prompt"
KEYS = [ws.key for ws in WORKSPACES]


class Workspaces(QObject):
    changed = Signal(str)  # the workspace now shown

    def __init__(self, window: QMainWindow, settings: QSettings) -> None:
        super().__init__(window)
        self.window, self.settings = window, settings
        self.current: str | None = None
        self.states: dict[str, QByteArray] = {}  # a workspace's layout when it was left
        self.extras: dict[str, list[str]] = {k: [] for k in KEYS}  # views opened there
        self.bar = QTabBar()
        self.bar.setObjectName("workspaces")
        self.bar.setDrawBase(False)
        self.bar.setExpanding(False)
        for i, ws in enumerate(WORKSPACES):
            self.bar.addTab(ws.title)
            self.bar.setTabToolTip(i, f"{ws.title} ({ws.shortcut}): {ws.task}")
        self.bar.currentChanged.connect(lambda i: self.show(KEYS[i]))

    # ------------------------------------------------------------------ membership
    def members(self, key: str) -> list[str]:
        """The docks a workspace shows: its own views, then those opened there."""
        return [s.key for s in in_workspace(key)] + self.extras[key]

    def home(self, view: str) -> str:
        return BY_KEY[view].group

    def has(self, view: str) -> bool:
        return self.current is not None and (view == PROMPT or view in self.members(self.current))

    # ------------------------------------------------------------------ showing
    def show(self, key: str) -> None:
        """Show workspace ``key``: its views built, its layout as it was left (or its
        default), every other workspace's docks put away."""
        if key == self.current:
            return
        if self.current is not None:
            self.window.central.restore()  # a view shown large goes home first
            self.states[self.current] = self.window.saveState()
        self.current = key
        members = self.members(key)
        for view in members:
            self.window.dock(view)
        state = self.states.get(key)
        if state is None or not self.window.restoreState(state):
            self.lay_out(key)
        self._only(members)
        self.bar.blockSignals(True)
        self.bar.setCurrentIndex(KEYS.index(key))
        self.bar.blockSignals(False)
        style_dock_tabs(self.window)
        self.changed.emit(key)

    def _only(self, members: list[str]) -> None:
        """Every dock outside the workspace hidden; the prompt always shown."""
        for name, dock in self.window.docks.items():
            if name == PROMPT:
                dock.show()
            elif name not in members:
                dock.hide()

    def lay_out(self, key: str) -> None:
        """The default: the workspace's views as tabs in the right-hand column (the whole
        height), the first in front; the prompt under the graph."""
        window = self.window
        prompt = window.docks[PROMPT]
        if window.dockWidgetArea(prompt) != Qt.BottomDockWidgetArea or prompt.isFloating():
            window.removeDockWidget(prompt)
            window.addDockWidget(Qt.BottomDockWidgetArea, prompt)
        prompt.setFloating(False)
        prompt.show()
        docks = [window.docks[v] for v in self.members(key)]
        for dock in docks:
            window.removeDockWidget(dock)
        for i, dock in enumerate(docks):
            dock.setFloating(False)
            window.addDockWidget(Qt.RightDockWidgetArea, dock)
            if i:
                window.tabifyDockWidget(docks[0], dock)
            dock.show()
        if docks:
            docks[0].raise_()
        self._only(self.members(key))
        QTimer.singleShot(0, lambda: self.sizes(key))

    def sizes(self, key: str | None = None) -> None:
        """The graph keeps the room it needs; the prompt and the column get the rest."""
        key = key or self.current
        members = self.members(key) if key else []
        if key != self.current or not members:
            return
        default_dock_sizes(self.window, self.window.docks[PROMPT], self.window.docks[members[0]])

    def reset(self) -> None:
        """View ▸ Reset layout: the shown workspace as it first was."""
        if self.current is None:
            return
        self.window.central.restore()
        self.extras[self.current] = []
        self.states.pop(self.current, None)
        self.lay_out(self.current)
        style_dock_tabs(self.window)

    def open_here(self, view: str) -> None:
        """A view of another workspace as a dock of this one (a tab in its column)."""
        if self.current is None or self.has(view):
            return self.raise_view(view)
        self.extras[self.current].append(view)
        dock = self.window.dock(view)
        own = [self.window.docks[v] for v in self.members(self.current)[:-1]]
        shown = [d for d in own if d.isVisible() and not d.isFloating()]
        self.window.removeDockWidget(dock)
        self.window.addDockWidget(Qt.RightDockWidgetArea, dock)
        if shown:
            self.window.tabifyDockWidget(shown[0], dock)
        dock.show()
        style_dock_tabs(self.window)
        self.raise_view(view)

    def raise_view(self, view: str) -> QDockWidget:
        """Show a view: in this workspace if it is one of its docks, else in its own."""
        if not self.has(view):
            self.show(self.home(view))
        dock = self.window.dock(view)
        dock.show()
        dock.raise_()
        return dock

    # ------------------------------------------------------------------ remembered
    def save(self) -> None:
        if self.current is not None:
            self.states[self.current] = self.window.saveState()
        s = self.settings
        s.setValue("workspaces/current", self.current or KEYS[0])
        for key in KEYS:
            if key in self.states:
                s.setValue(f"workspaces/{key}/state", self.states[key])
            s.setValue(f"workspaces/{key}/extras", ",".join(self.extras[key]))

    def restore(self) -> str:
        """The layouts kept last time; the workspace to show first."""
        s = self.settings
        for key in KEYS:
            state = s.value(f"workspaces/{key}/state")
            if isinstance(state, QByteArray):
                self.states[key] = state
            extras = s.value(f"workspaces/{key}/extras", "")
            extras = extras.split(",") if isinstance(extras, str) else []
            self.extras[key] = [v for v in dict.fromkeys(extras)
                                if v in BY_KEY and BY_KEY[v].group not in ("shared", key)]
        current = s.value("workspaces/current", KEYS[0])
        return current if current in KEYS else KEYS[0]
