"""Help: the keyboard shortcuts, read from the window's own menus (so the list is never
out of date), and a short tour that outlines the graph, the inspector, the prompt and
the tabs in turn."""

from __future__ import annotations

from PySide6.QtCore import QEvent, QRect, Qt
from PySide6.QtGui import QKeySequence
from PySide6.QtWidgets import (QDialog, QDialogButtonBox, QHBoxLayout, QLabel, QMenuBar,
                               QPushButton, QRubberBand, QTableWidget, QTableWidgetItem,
                               QVBoxLayout, QWidget)

from ..base import preload

EXTRA_KEYS = (("Up / Down (in the block graph)", "the previous or the next block"),
              ("Click a node", "inspect it in every view"))


def shortcuts(menu_bar: QMenuBar) -> list[tuple[str, str, str]]:
    """(menu, action, keys) for every menu action that has a shortcut."""
    rows = []

    def walk(menu, path):
        for action in menu.actions():
            if action.menu() is not None:
                walk(action.menu(), path + [action.text().replace("&", "")])
            elif action.shortcuts():
                keys = ", ".join(k.toString(QKeySequence.NativeText) for k in action.shortcuts())
                rows.append((" ▸ ".join(path), action.text().replace("&", ""), keys))

    for action in menu_bar.actions():
        if action.menu() is not None:
            walk(action.menu(), [action.text().replace("&", "")])
    return rows


class ShortcutsDialog(QDialog):
    def __init__(self, parent: QWidget, menu_bar: QMenuBar) -> None:
        super().__init__(parent)
        self.setWindowTitle("Keyboard shortcuts")
        rows = shortcuts(menu_bar)
        self.table = QTableWidget(len(rows) + len(EXTRA_KEYS), 2)
        self.table.setHorizontalHeaderLabels(["keys", "does"])
        self.table.verticalHeader().hide()
        for r, (menu, action, keys) in enumerate(rows):
            self.table.setItem(r, 0, QTableWidgetItem(keys))
            self.table.setItem(r, 1, QTableWidgetItem(f"{action}  ({menu})"))
        for r, (keys, does) in enumerate(EXTRA_KEYS, start=len(rows)):
            self.table.setItem(r, 0, QTableWidgetItem(keys))
            self.table.setItem(r, 1, QTableWidgetItem(does))
        self.table.resizeColumnsToContents()
        self.table.horizontalHeader().setStretchLastSection(True)
        buttons = QDialogButtonBox(QDialogButtonBox.Close)
        buttons.rejected.connect(self.reject)
        layout = QVBoxLayout(self)
        layout.addWidget(self.table)
        layout.addWidget(buttons)
        self.resize(560, 520)


class Tour(QDialog):
    """Steps of (the widget to outline — or a callable that shows and gives it —, a
    title, what it is); Next and Back, the outline follows, and it follows the widget
    when the layout moves or resizes it (a dock shown settles after the step is shown)."""

    def __init__(self, parent: QWidget, steps: list[tuple]) -> None:
        super().__init__(parent)
        self.setWindowTitle("Tour")
        self.setWindowFlag(Qt.WindowStaysOnTopHint)
        self.steps, self.index = steps, 0
        self._watched: QWidget | None = None
        self.outline = QRubberBand(QRubberBand.Rectangle, parent)
        self.title = QLabel()
        self.text = QLabel()
        self.text.setWordWrap(True)
        self.back = QPushButton("Back")
        self.next = QPushButton("Next")
        self.next.setDefault(True)
        self.back.clicked.connect(lambda: self.show_step(self.index - 1))
        self.next.clicked.connect(self._next)
        row = QHBoxLayout()
        row.addWidget(self.back)
        row.addStretch(1)
        row.addWidget(self.next)
        layout = QVBoxLayout(self)
        layout.addWidget(self.title)
        layout.addWidget(self.text, 1)
        layout.addLayout(row)
        self.setMinimumWidth(420)
        self.show_step(0)

    def _next(self) -> None:
        if self.index + 1 < len(self.steps):
            self.show_step(self.index + 1)
        else:
            self.close()

    def widget(self, index: int) -> QWidget:
        target = self.steps[index][0]
        return target() if callable(target) and not isinstance(target, QWidget) else target

    def show_step(self, index: int) -> None:
        self.index = max(0, min(index, len(self.steps) - 1))
        _target, title, text = self.steps[self.index]
        widget = self.widget(self.index)
        self.title.setText(f"<b>{self.index + 1} of {len(self.steps)} · {title}</b>")
        self.text.setText(text)
        self.back.setEnabled(self.index > 0)
        self.next.setText("Done" if self.index + 1 == len(self.steps) else "Next")
        if self._watched is not None:
            self._watched.removeEventFilter(self)
        self._watched = widget
        widget.installEventFilter(self)
        self._place(widget)
        self.outline.show()
        self.adjustSize()  # the card as tall as this step's text: none of it cut

    def _place(self, widget: QWidget) -> None:
        top_left = widget.mapTo(self.parentWidget(), widget.rect().topLeft())
        self.outline.setGeometry(QRect(top_left, widget.size()).adjusted(-3, -3, 3, 3))

    def eventFilter(self, watched, event) -> bool:  # noqa: N802
        if watched is self._watched and event.type() in (QEvent.Resize, QEvent.Move):
            self._place(watched)
        return False

    def outlined(self) -> QRect:
        return self.outline.geometry()

    def closeEvent(self, event) -> None:  # noqa: N802
        self.outline.hide()
        if self._watched is not None:
            self._watched.removeEventFilter(self)
            self._watched = None
        super().closeEvent(event)


def tour_steps(window) -> list[tuple]:
    """The tour, from the one list of views: the graph, the prompt, the switcher, then
    each workspace — shown, its column outlined, its views named with what each is for."""
    from ..views.registry import BY_KEY, WORKSPACES, in_workspace
    graph, prompt = BY_KEY["graph"], BY_KEY["prompt"]
    steps = [(window.graph, "The block graph", graph.tour),
             (window.docks["prompt"], f"{prompt.title} ({prompt.shortcut})", prompt.tour),
             (window.workspaces.bar, "Workspaces (Ctrl+1 … Ctrl+5)",
              "The views are grouped by what you are doing; the graph and the prompt stay in "
              "every one. View ▸ Open in this workspace adds any view here.")]

    def shown(key: str):
        def show() -> QWidget:
            window.workspaces.show(key)
            return window.front_dock()
        return show

    for ws in WORKSPACES:
        views = "".join(f"<br>• <b>{s.tab_text}</b>: {s.tour}" for s in in_workspace(ws.key))
        steps.append((shown(ws.key), f"{ws.title} ({ws.shortcut})", f"{ws.task}{views}"))
    return steps


def about(parent) -> None:
    """Help ▸ About: the version and the libraries it runs on."""
    import PySide6
    preload.wait()  # pyqtgraph may be importing on its thread
    import pyqtgraph
    import tiktoken
    import torch
    from PySide6.QtWidgets import QMessageBox

    from ... import __version__
    QMessageBox.about(parent, "About GPT Block Explorer",
                      f"<b>GPT Block Explorer {__version__}</b><br>See inside a GPT-2 model."
                      f"<br><br>PyTorch {torch.__version__}<br>PySide6 {PySide6.__version__}"
                      f"<br>pyqtgraph {pyqtgraph.__version__}<br>tiktoken {tiktoken.__version__}")
