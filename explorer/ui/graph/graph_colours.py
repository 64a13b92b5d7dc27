"""The block graph's colour scales (viridis, dark = smallest; a diverging one around 0),
shared by the graph, its legend bar and the layer strip. pyqtgraph, which holds them, is
imported at their first use: the window paints its graph before any colour is needed."""

from __future__ import annotations

import functools

from PySide6.QtGui import QColor, QImage, QPixmap

from ..base import preload


@functools.lru_cache(maxsize=None)
def colour_map(name: str):
    preload.wait()  # pyqtgraph may be importing on its thread
    import pyqtgraph as pg
    return pg.colormap.get(name)


def colour(t: float) -> QColor:
    """viridis at t in [0, 1]."""
    return colour_map("viridis").map(max(0.0, min(1.0, t)), mode="qcolor")


def colour_bar_pixmap(width: int, height: int) -> QPixmap:
    """The nodes' colour scale, dark (smallest) to bright (largest), as a small bar."""
    image = QImage(width, height, QImage.Format_RGB32)
    for x in range(width):
        rgb = colour(x / max(width - 1, 1)).rgb()
        for y in range(height):
            image.setPixel(x, y, rgb)
    return QPixmap.fromImage(image)


def text_colour(fill: QColor) -> QColor:
    """Black or white, whichever contrasts more with ``fill`` (WCAG's relative luminance:
    black above 0.179), so that no label is white on viridis's yellows and limes."""
    def linear(c: float) -> float:
        return c / 12.92 if c <= 0.04045 else ((c + 0.055) / 1.055) ** 2.4

    y = 0.2126 * linear(fill.redF()) + 0.7152 * linear(fill.greenF()) + 0.0722 * linear(fill.blueF())
    return QColor("black") if y > 0.179 else QColor("white")
