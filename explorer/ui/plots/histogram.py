"""A histogram of a node's values that shows them: by default on the range that holds this
tensor's values (99.5% of them; the counts outside are written on the plot), or — one
click away — on the node kind's fixed range, which compares across prompts, layers and
steps but squeezes a small tensor into one bar. The plot says which range it is."""

from __future__ import annotations

from enum import StrEnum

import numpy as np
import pyqtgraph as pg
from PySide6.QtWidgets import QComboBox

from ...core.run.analysis import ValueHistogram, data_histogram, fixed_histogram
from ...core.run.capture import NodeView
from .plot_text import set_empty, set_label, set_title


class Range(StrEnum):
    """Which range a histogram's bins cover: the tensor's own values, or its kind's fixed
    range (the same bins for every prompt, layer and step)."""
    DATA = "data"
    FIXED = "fixed"


RANGES = {"this tensor's range": Range.DATA, "fixed range per kind of node": Range.FIXED}
FIXED_RANGE = "fixed range per kind of node"
FILL = (60, 120, 200, 150)


def range_box() -> QComboBox:
    box = QComboBox()
    box.addItems(list(RANGES))
    box.setSizeAdjustPolicy(QComboBox.AdjustToMinimumContentsLengthWithIcon)
    box.setMinimumContentsLength(14)  # a narrow column elides it rather than widening
    box.setToolTip("This tensor's range: its values fill the plot. Fixed range: the same bins "
                   "for every prompt, layer and step of a kind of node, to compare them")
    return box


def histogram_of(view: NodeView, mode: Range, values: np.ndarray | None = None) -> ValueHistogram:
    """The view's histogram on ``mode``'s range; ``values`` narrows it to
    some of the view's values (one token's vector). Without the tensor: the fixed one."""
    if mode is Range.FIXED and values is None:
        return fixed_histogram(view.stats)
    if values is None:
        values = view.real_rows()
    if values is None:
        return fixed_histogram(view.stats)
    finite = view.stats.n_nan == 0 and view.stats.n_inf == 0
    if mode is Range.FIXED:
        h = view.stats.hist_range
        return _on_edges(values, np.asarray(h.edges()), finite)
    return data_histogram(values, finite=finite)


def _on_edges(values: np.ndarray, edges: np.ndarray, finite: bool) -> ValueHistogram:
    flat = np.asarray(values, dtype=np.float32).reshape(-1)
    if not finite:
        flat = flat[np.isfinite(flat)]
    counts, _ = np.histogram(flat, bins=edges)
    return ValueHistogram(edges, counts, int((flat < edges[0]).sum()),
                          int((flat > edges[-1]).sum()), True)


class HistogramPlot:
    """The drawing of a ValueHistogram on a pyqtgraph plot (made once, then updated)."""

    def __init__(self, plot: pg.PlotItem, title_size: str | None = None,
                 compact: bool = False) -> None:
        """compact: a small multiple (its caller sets the title; no axis labels, and the
        counts outside the range on one short line)."""
        self.plot = plot
        self.title_size = title_size
        self.compact = compact
        self.curve = plot.plot([0, 1], [0], stepMode="center", fillLevel=0, brush=FILL,
                               pen=pg.mkPen("#1f4e8c"))
        self.note = pg.TextItem(color="#333333", anchor=(1, 0))
        plot.addItem(self.note, ignoreBounds=True)
        plot.getAxis("left").enableAutoSIPrefix(False)  # counts, not "(x0.001)"
        self.shown: ValueHistogram | None = None

    def show(self, hist: ValueHistogram | None, what: str = "", empty: str = "") -> None:
        self.shown = hist
        if hist is None:
            self.curve.setData([0, 1], [0])
            self.note.setText("")
            set_empty(self.plot, empty or "Run a prompt (Ctrl+Enter) to see the values")
            return
        set_empty(self.plot, None)
        self.curve.setData(hist.edges, hist.counts.astype(float))
        if self.compact:
            self.note.setText(f"below {hist.below:,} · above {hist.above:,}")
            self._fit(hist)
            return
        mode = "fixed range for this kind of node" if hist.fixed else "range of this tensor"
        title = f"{what} — {mode}" if what else mode
        if self.title_size:
            set_title(self.plot, title, size=self.title_size)
        else:
            set_title(self.plot, title)
        set_label(self.plot, "bottom", "value")
        set_label(self.plot, "left", "count")
        self.note.setText(f"below {hist.lo:.3g}: {hist.below:,}\nabove {hist.hi:.3g}: "
                          f"{hist.above:,}")
        self._fit(hist)

    def _fit(self, hist: ValueHistogram) -> None:
        """The plot's range follows the histogram's, but stays while the new one nearly
        fills it: token after token of a generation then does not re-tick the axes (a
        relayout and repaint of each plot, ~3 ms apiece, on the GUI thread)."""
        top = max(1.0, float(hist.counts.max()) if hist.counts.size else 1.0) * 1.25
        (x0, x1), (_, y1) = self.plot.getViewBox().viewRange()
        span = hist.hi - hist.lo
        pad = 0.02 * span
        if not (x0 <= hist.lo - pad * 0.5 and hist.hi + pad * 0.5 <= x1 and x1 - x0 <= 1.3 * span):
            self.plot.setXRange(hist.lo, hist.hi, padding=0.02)
            x1 = hist.hi + pad
        if not (top <= y1 <= 1.3 * top):  # room for the note above the bars
            self.plot.setYRange(0, top, padding=0)
            y1 = top
        self.note.setPos(x1, y1)
