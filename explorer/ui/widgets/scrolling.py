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


class FittingScroll(QScrollArea):
    """A scroll area that gives its view the whole viewport and scrolls only below the
    view's minimum (Qt's own resizable area gives a view with wrapped text its preferred
    height, so plots of their default 480 px made every tall view scroll)."""

    def resizeEvent(self, event) -> None:  # noqa: N802 (Qt name)
        super().resizeEvent(event)
        self.fit()

    def fit(self) -> None:
        content = self.widget()
        if content is None:
            return
        port = self.maximumViewportSize()
        least = content.minimumSizeHint().expandedTo(content.minimumSize())
        width = max(port.width(), least.width())
        layout = content.layout()
        need = layout.minimumHeightForWidth(width) if layout is not None and \
            layout.hasHeightForWidth() else least.height()
        height = max(need, least.height())
        if height > port.height():  # a vertical bar takes its width from the view
            width = max(port.width() - self.verticalScrollBar().sizeHint().width(), least.width())
        content.resize(width, max(port.height() if height <= port.height() else height, height))


def scrolling(content: QWidget) -> QScrollArea:
    area = FittingScroll()
    area.setWidgetResizable(False)
    area.setFrameShape(QFrame.NoFrame)
    area.setWidget(content)
    wheel = WheelScrollsPanel(area)
    views = content.findChildren(QGraphicsView)
    for view in views + ([content] if isinstance(content, QGraphicsView) else []):
        view.viewport().installEventFilter(wheel)
    return area


PANE_LINES = 10  # a text pane shows at least this many lines


def lines_high(pane: QWidget, lines: int = PANE_LINES) -> None:
    """A text pane at least ``lines`` lines of its font high (its frame and margins too)."""
    pane.setMinimumHeight(pane.fontMetrics().lineSpacing() * lines + 22)
