"""Titles and tick labels that are set only when they change.

Setting a pyqtgraph title or an axis's tick labels relayouts the plot, even to the same
text, and every relayout repaints its scene again: after a new pass a view that re-set
its unchanged titles repainted up to six times in a row (~50 ms on the GUI thread).
"""

from __future__ import annotations

import pyqtgraph as pg


def set_title(plot: pg.PlotItem, text: str, **style) -> None:
    if plot.titleLabel.text != text or not plot.titleLabel.isVisible():
        plot.setTitle(text, **style)


def set_ticks(axis: pg.AxisItem, ticks: list) -> None:
    if getattr(axis, "_tickLevels", None) != ticks:
        axis.setTicks(ticks)


def set_label(plot: pg.PlotItem, side: str, text: str) -> None:
    if plot.getAxis(side).labelText != text:
        plot.setLabel(side, text)
