"""A frameless scroll area for a view's dense content: in a small window the content
keeps the minimum height its plots need and scrolls, instead of being squeezed until
the plots show only their titles (at 1280x800 the right-hand dock is ~390 px high).

The mouse wheel over a plot scrolls the panel, as it does everywhere else in it; a plot
zooms with the wheel only once it has the focus (a click into it)."""

from __future__ import annotations

from PySide6.QtCore import QEvent, QObject
from PySide6.QtWidgets import QApplication, QFrame, QGraphicsView, QScrollArea, QWidget


class WheelScrollsPanel(QObject):
    """On the plots' viewports: a wheel event over a plot without the focus goes to the
    scroll area's scroll bar instead."""

    def __init__(self, area: QScrollArea) -> None:
        super().__init__(area)
        self.area = area

    def eventFilter(self, watched: QObject, event: QEvent) -> bool:  # noqa: N802 (Qt name)
        if event.type() == QEvent.Wheel:
            view = watched.parent()
            if isinstance(view, QGraphicsView) and not view.hasFocus():
                QApplication.sendEvent(self.area.verticalScrollBar(), event)
                return True
        return False


def scrolling(content: QWidget) -> QScrollArea:
    area = QScrollArea()
    area.setWidgetResizable(True)
    area.setFrameShape(QFrame.NoFrame)
    area.setWidget(content)
    wheel = WheelScrollsPanel(area)
    for view in content.findChildren(QGraphicsView):
        view.viewport().installEventFilter(wheel)
    return area
