"""Titles and tick labels that are set only when they change.

Setting a pyqtgraph title or an axis's tick labels relayouts the plot, even to the same
text, and every relayout repaints its scene again: after a new pass a view that re-set
its unchanged titles repainted up to six times in a row (~50 ms on the GUI thread).
"""

from __future__ import annotations

import numpy as np
import pyqtgraph as pg
from PySide6.QtGui import QFontMetrics


def set_title(plot: pg.PlotItem, text: str, **style) -> None:
    if plot.titleLabel.text != text or not plot.titleLabel.isVisible():
        plot.setTitle(text, **style)


def set_ticks(axis: pg.AxisItem, ticks: list) -> None:
    if getattr(axis, "_tickLevels", None) != ticks:
        axis.setTicks(ticks)


def set_label(plot: pg.PlotItem, side: str, text: str) -> None:
    if plot.getAxis(side).labelText != text:
        plot.setLabel(side, text)


def set_empty(plot: pg.PlotItem, message: str | None) -> None:
    """An empty plot shows one line saying what fills it, and no axes (empty axes read
    as data: 'count (x0.001)' from -400 to 400); ``None`` brings the axes back."""
    note = getattr(plot, "_empty_note", None)
    if message is None:
        if note is not None and note.isVisible():
            note.hide()
            for side in plot._empty_hid:  # the axes it hid, not those hidden on purpose
                plot.showAxis(side)
            plot.enableAutoRange()  # the data fits itself again (or its owner sets a range)
        return
    if note is None:
        note = pg.TextItem(color="#666666", anchor=(0.5, 0.5))
        plot._empty_note = note
    if note.scene() is None:  # new, or removed by plot.clear()
        plot.addItem(note, ignoreBounds=True)
    note.setText(message)
    note.setPos(0.5, 0.5)
    if not note.isVisible() or not hasattr(plot, "_empty_hid"):
        plot._empty_hid = [s for s in ("left", "bottom") if plot.getAxis(s).isVisible()]
    for side in plot._empty_hid:
        plot.hideAxis(side)
    plot.setRange(xRange=(0, 1), yRange=(0, 1), padding=0)
    note.show()


def empty_message(plot: pg.PlotItem) -> str | None:
    """What an empty plot says (None when it shows data)."""
    note = getattr(plot, "_empty_note", None)
    return note.toPlainText() if note is not None and note.isVisible() else None


def legend_row(layout: pg.GraphicsLayout, entries: list, row: int = 0, col: int = 0,
               colspan: int = 1, columns: int | None = None) -> pg.LegendItem:
    """A legend in a row of its own above the plots, (item, name) entries in ``columns``
    columns (all on one line by default): it never covers the data, as a legend inside
    a plot's corner does."""
    legend = pg.LegendItem(colCount=columns or max(1, len(entries)))
    for item, name in entries:
        legend.addItem(item, name)
    layout.addItem(legend, row=row, col=col, colspan=colspan)
    return legend


def pen_sample(pen, **opts) -> pg.PlotDataItem:
    """A curve that is in no plot, for a legend entry that stands for several plots."""
    return pg.PlotDataItem([], [], pen=pen, **opts)


def fit_names(plot: pg.PlotItem, names: list[str]) -> None:
    """A name under every k-th bar (bar i at x = i), k as small as lets the names stand
    apart, the last always named: B0 attn, B1 attn… on a wide plot, every other one on a
    laptop's."""
    plot._names = names
    if not names:
        return
    metrics = QFontMetrics(plot.getAxis("bottom").font())
    widest = max(metrics.horizontalAdvance(n) for n in names) + 10
    per_bar = max(plot.vb.width(), 1.0) / len(names)
    step = max(1, int(np.ceil(widest / per_bar)))
    last = len(names) - 1
    ticks = [(i, n) for i, n in enumerate(names)
             if (i % step == 0 and last - i >= step) or i == last]
    axis = plot.getAxis("bottom")
    # the first and last bars' names may reach past the axis's ends (the axis would drop
    # them: the tallest bar of a sorted chart unnamed): under the left axis, and into a
    # right margin as wide
    overhang = int(widest / 2)
    if axis.style.get("hideOverlappingLabels") != overhang:
        axis.setStyle(hideOverlappingLabels=overhang)
        left, top, right, bottom = plot.layout.getContentsMargins()
        plot.layout.setContentsMargins(left, top, max(right, overhang), bottom)
    set_ticks(axis, [ticks])


def fitted_names(plot: pg.PlotItem, names: list[str]) -> None:
    """``fit_names`` now and again whenever the plot is resized."""
    fit_names(plot, names)
    if not getattr(plot, "_fits_names", False):
        plot._fits_names = True
        plot.vb.sigResized.connect(lambda _vb: fit_names(plot, getattr(plot, "_names", [])))
