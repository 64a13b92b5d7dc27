"""The block graph's colour scale (viridis, dark = smallest), shared by the graph, its
legend bar and the layer strip."""

from __future__ import annotations

import pyqtgraph as pg
from PySide6.QtGui import QColor, QImage, QPixmap

_CMAP = pg.colormap.get("viridis")


def colour(t: float) -> QColor:
    """viridis at t in [0, 1]."""
    return _CMAP.map(max(0.0, min(1.0, t)), mode="qcolor")


def colour_bar_pixmap(width: int, height: int) -> QPixmap:
    """The nodes' colour scale, dark (smallest) to bright (largest), as a small bar."""
    image = QImage(width, height, QImage.Format_RGB32)
    for x in range(width):
        rgb = colour(x / max(width - 1, 1)).rgb()
        for y in range(height):
            image.setPixel(x, y, rgb)
    return QPixmap.fromImage(image)


def text_colour(fill: QColor) -> QColor:
    return QColor("black") if fill.lightnessF() > 0.55 else QColor("white")
