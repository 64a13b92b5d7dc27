"""The strip under the block graph: every block in a row, coloured by the std of the
residual stream after it (the selected one outlined); click one to show it. It is what
says that the block drawn above is one of N identical blocks."""

from __future__ import annotations

import math

from PySide6.QtCore import QRectF, Qt
from PySide6.QtGui import QColor, QPainter, QPen
from PySide6.QtWidgets import QLabel, QWidget

from ...core.gpt.nodes import order_of, block_hook_name, block_output
from .contribution_colours import strip_colours
from .graph_colours import colour, text_colour
from ..base.session import Session


class LayerStrip(QWidget):
    """All layers in a row, coloured by the residual stream's std after each block;
    click one to show it."""

    def __init__(self, session: Session) -> None:
        super().__init__()
        self.session = session
        self.setMinimumHeight(20)
        self.setMaximumHeight(20)
        self.setMinimumWidth(60)
        self.setToolTip("All blocks in order, coloured by the std of each block's output "
                        "(the drawn one outlined): click one to draw it")
        self.totals = None  # each block's part of a logit (the graph's Why colouring)
        self.caption = QLabel()  # beside the strip: what it is (the graph lays it out)
        self.caption.setStyleSheet("color: #444444")
        session.modelChanged.connect(self.update)
        session.modelChanged.connect(self._caption)
        self._caption()
        session.layerChanged.connect(lambda _: self.update())
        session.coverChanged.connect(lambda _: self.update())

    def _caption(self) -> None:
        info = self.session.model
        n = info.config.n_layers if info else 0
        self.caption.setText(f"All {n} blocks:" if n else "")
        self.caption.setToolTip(self.toolTip())

    def _values(self) -> list[float | None]:
        info = self.session.model
        current = None if self.session.covered else self.session.current  # as the graph's colours
        if info is None:
            return []
        out = []
        for layer in range(info.config.n_layers):
            key = block_output(order_of(info.config))
            view = current.views.get(block_hook_name(layer, key)) if current else None
            out.append(view.stats.std if view else None)
        return out

    def paintEvent(self, event) -> None:  # noqa: N802
        values = self._values()
        if not values:
            return
        painter = QPainter(self)
        w = self.width() / len(values)
        for i, fill in enumerate(self.fills(values)):
            painter.fillRect(QRectF(i * w, 0, w - 1, self.height()), fill)
            if w >= painter.fontMetrics().horizontalAdvance(str(len(values))) + 4:
                painter.setPen(text_colour(fill))
                painter.drawText(QRectF(i * w, 0, w - 1, self.height()), Qt.AlignCenter, str(i))
            if i == self.session.layer:
                painter.setPen(QPen(QColor("#ff8c00"), 3))
                painter.drawRect(QRectF(i * w + 1, 1, w - 3, self.height() - 3))
        painter.end()

    def fills(self, values: list[float | None]) -> list[QColor]:
        """Each block's colour: its part of a logit on a diverging scale when the graph
        colours by it, else the std of its output on a log scale (grey when unknown)."""
        if self.totals is not None and len(self.totals) == len(values):
            return strip_colours(self.totals)
        finite = [math.log10(v + 1e-12) for v in values if v]
        lo, hi = (min(finite), max(finite)) if finite else (0, 1)
        return [colour((math.log10(v + 1e-12) - lo) / (hi - lo) if hi > lo else 0.5)
                if v else QColor("#dddddd") for v in values]

    def mousePressEvent(self, event) -> None:  # noqa: N802
        values = self._values()
        if values:
            self.session.set_layer(int(event.position().x() / (self.width() / len(values))))
