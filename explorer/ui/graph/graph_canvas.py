"""The block graph's canvas: it fits the whole drawing to the view on every resize (never
smaller than the font's own size, so node text stays readable; past that it scrolls),
zooms with the wheel around the pointer, pans by dragging the background, and turns
Up/Down into a change of block. F (or Fit) fits again after a zoom."""

from __future__ import annotations

from PySide6.QtCore import QRectF, Qt, Signal
from PySide6.QtGui import QFont, QFontMetricsF, QPainter
from PySide6.QtWidgets import QGraphicsView

from .layout_types import Metrics

MIN_SCALE = 1.0  # node text at the window's font size at least
MAX_SCALE = 1.6  # a large view does not blow the drawing up further
ZOOM_STEP = 1.15


def font_metrics(font: QFont) -> tuple[Metrics, QFont]:
    """The layout's metrics for the graph's font, and the big bold font of '× N'."""
    big = QFont(font)
    big.setPointSizeF(font.pointSizeF() * 1.6)
    big.setBold(True)
    bold = QFont(font)
    bold.setBold(True)
    fm, fb, fbig = QFontMetricsF(font), QFontMetricsF(bold), QFontMetricsF(big)
    return Metrics(fm.height(), fm.horizontalAdvance, fb.horizontalAdvance,
                   fbig.horizontalAdvance, fbig.height()), big


class GraphCanvas(QGraphicsView):
    blockStep = Signal(int)  # -1: the block before, +1: the block after
    toggleAttention = Signal()  # A: open or fold attention's steps

    def __init__(self, scene) -> None:
        super().__init__(scene)
        self.setRenderHint(QPainter.Antialiasing)
        self.setFocusPolicy(Qt.StrongFocus)
        self.setDragMode(QGraphicsView.ScrollHandDrag)
        self.setTransformationAnchor(QGraphicsView.AnchorUnderMouse)
        self.setResizeAnchor(QGraphicsView.AnchorViewCenter)
        self.fitted = True  # refit on every resize until the user zooms
        self.drawing = QRectF()

    def set_drawing(self, rect: QRectF) -> None:
        """The drawing's bounds (the scene rect with a margin); fits when fitting."""
        self.drawing = QRectF(rect)
        self.setSceneRect(self.drawing)
        if self.fitted:
            self.fit()

    def fit_scale(self) -> float:
        view = self.contentsRect().size()  # the room without scroll bars: no feedback loop
        if self.drawing.isEmpty() or view.width() < 2 or view.height() < 2:
            return 1.0
        scale = min(view.width() / self.drawing.width(), view.height() / self.drawing.height())
        return max(MIN_SCALE, min(MAX_SCALE, scale))

    def fit(self) -> None:
        """The whole drawing in view, as large as the view allows within the limits. Scroll
        bars only where it cannot fit at the smallest scale: decided on the room without
        them, so bars that appear (and shrink the view) never make the fit change again —
        a resize loop that otherwise kept the window busy at some sizes."""
        self.fitted = True
        s = self.fit_scale()
        room = self.contentsRect().size()
        fits = (self.drawing.width() * s <= room.width() + 0.5 and
                self.drawing.height() * s <= room.height() + 0.5)
        self._bars(Qt.ScrollBarAlwaysOff if fits else Qt.ScrollBarAsNeeded)
        if abs(self.transform().m11() - s) > 1e-9 or self.transform().m22() != self.transform().m11():
            self.resetTransform()
            self.scale(s, s)
        self.centerOn(self.drawing.center())

    def _bars(self, policy) -> None:
        if self.horizontalScrollBarPolicy() != policy:
            self.setHorizontalScrollBarPolicy(policy)
            self.setVerticalScrollBarPolicy(policy)

    def zoom(self, factor: float) -> None:
        self.fitted = False
        self._bars(Qt.ScrollBarAsNeeded)  # zoomed in: the user pans or scrolls
        s = self.transform().m11() * factor
        s = max(0.3, min(4.0, s))
        self.resetTransform()
        self.scale(s, s)

    def resizeEvent(self, event) -> None:  # noqa: N802 (Qt name)
        super().resizeEvent(event)
        if self.fitted:
            self.fit()

    def wheelEvent(self, event) -> None:  # noqa: N802 (Qt name)
        steps = event.angleDelta().y() / 120
        if steps:
            self.zoom(ZOOM_STEP ** steps)
        event.accept()

    def keyPressEvent(self, event) -> None:  # noqa: N802 (Qt name)
        key = event.key()
        if key in (Qt.Key_Up, Qt.Key_Down) and not event.modifiers():
            self.blockStep.emit(-1 if key == Qt.Key_Up else 1)
        elif key == Qt.Key_A and not event.modifiers():
            self.toggleAttention.emit()
        elif key == Qt.Key_F and not event.modifiers():
            self.fit()
        elif key in (Qt.Key_Plus, Qt.Key_Equal):
            self.zoom(ZOOM_STEP)
        elif key == Qt.Key_Minus:
            self.zoom(1 / ZOOM_STEP)
        else:
            super().keyPressEvent(event)
