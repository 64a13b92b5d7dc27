"""Show large: any docked view can take the central area, with the docks put away so it
has the whole window, and go back to its dock. F11 toggles the view in front of the
right-hand tabs."""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtWidgets import (QDockWidget, QHBoxLayout, QLabel, QPushButton, QStackedWidget,
                               QVBoxLayout, QWidget)


class CentralArea(QWidget):
    """The graph, or a view shown large in its place, with a line that says how to go
    back."""

    def __init__(self, graph: QWidget, docks: dict[str, QDockWidget] | None = None) -> None:
        super().__init__()
        self.docks = docks if docks is not None else {}
        self._hidden: list[QDockWidget] = []  # the docks put away while a view is large
        self.stack = QStackedWidget()
        self.stack.addWidget(graph)
        self.graph = graph
        self.note = QLabel()
        back = QPushButton("Put it back (F11)")
        back.clicked.connect(self.restore)
        self.bar = QWidget()
        row = QHBoxLayout(self.bar)
        row.setContentsMargins(6, 2, 6, 2)
        row.addWidget(self.note, 1)
        row.addWidget(back)
        self.bar.hide()
        column = QVBoxLayout(self)
        column.setContentsMargins(0, 0, 0, 0)
        column.setSpacing(0)
        column.addWidget(self.bar)
        column.addWidget(self.stack, 1)
        self.dock: QDockWidget | None = None  # the dock whose view is shown large

    def enlarge(self, dock: QDockWidget) -> None:
        self.restore()
        widget = dock.widget()
        placeholder = QLabel(f"{dock.windowTitle()} is shown large in the centre; F11 puts it "
                             "back here.")
        placeholder.setAlignment(Qt.AlignCenter)
        placeholder.setWordWrap(True)
        dock.setWidget(placeholder)
        self.stack.addWidget(widget)
        self.stack.setCurrentWidget(widget)
        widget.show()
        self.dock = dock
        self.note.setText(f"<b>{dock.windowTitle()}</b>, shown large")
        self.bar.show()
        self._hidden = [d for d in self.docks.values() if d.isVisible()]
        for d in self._hidden:
            d.hide()

    def restore(self) -> None:
        if self.dock is None:
            return
        widget = self.stack.currentWidget()
        self.stack.removeWidget(widget)
        placeholder = self.dock.widget()
        self.dock.setWidget(widget)
        placeholder.deleteLater()
        self.stack.setCurrentWidget(self.graph)
        self.dock = None
        self.bar.hide()
        for d in self._hidden:
            d.show()
        self._hidden = []

    @property
    def large(self) -> QWidget | None:
        return None if self.dock is None else self.stack.currentWidget()
