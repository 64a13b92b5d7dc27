"""Activation distributions, in two tabs: one histogram per node of the selected layer in forward
order (each on the range of its own values, or on its kind's fixed bins to compare), a
nodes x layers heatmap of a chosen statistic with its colour bar (click a cell to select
that node and layer everywhere), and the residual stream's std after each add, layer by
layer."""

from __future__ import annotations

import csv
import math

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import QRectF, Qt
from PySide6.QtGui import QFontMetrics
from PySide6.QtWidgets import (QComboBox, QHBoxLayout, QLabel, QPushButton,
                               QSplitter, QTabWidget, QVBoxLayout, QWidget)

from functools import partial

from ....core.run.analysis import ValueHistogram, layer_table, residual_profile
from ....core.gpt.nodes import Kind, order_of, block_hook_name, block_nodes, block_title
from ...plots.histogram import RANGES, HistogramPlot, Range, histogram_of, range_box
from ...base.lazy import LazyRefresh
from ...widgets.save_file import save_as
from ...plots.plot_axes import add_plot, colour_bar, count_axis, plot_widget
from ...plots.plot_text import set_empty, set_label, set_ticks, set_title
from ...widgets.scrolling import scrolling
from ...base.session import Session
from ...base.view_jobs import EngineLike
from ...base.turns import Turns
from ....core.gpt.config import NormPosition

TABLE_STATS = {"std": "std", "abs-max": "absmax", "kurtosis": "kurtosis", "RMS": "rms"}
COLUMNS = 3
MIN_SMALL_ROW = 128  # px per row of small multiples: a title and a readable histogram
TABLE_HEIGHT = 250  # the heatmap's default and least height: a label for each of its rows
EMPTY = "Run a prompt (Ctrl+Enter)"
SMALL_TITLE = "9pt"
BIG = 200_000  # values: a tensor whose range is read in a loop turn of its own


class DistributionsView(LazyRefresh, QWidget):
    def __init__(self, session: Session, engine: EngineLike) -> None:
        super().__init__()
        self.session = session
        self.small = pg.GraphicsLayoutWidget()
        self.small.setBackground("w")
        self.small_plots: dict[str, pg.PlotItem] = {}

        self.stat_box = QComboBox()
        self.stat_box.addItems(list(TABLE_STATS))
        self.stat_box.currentTextChanged.connect(lambda _: self.refresh_table())
        self.range_box = range_box()
        self.range_box.currentIndexChanged.connect(lambda _: self.request_refresh())
        export = QPushButton("Table CSV…")
        export.clicked.connect(self.export_csv)
        bar = QHBoxLayout()
        bar.addWidget(QLabel("Histograms:"))
        bar.addWidget(self.range_box)
        bar.addStretch(1)
        second = QHBoxLayout()
        second.addWidget(QLabel("Across blocks:"))
        second.addWidget(self.stat_box)
        second.addStretch(1)
        second.addWidget(export)

        self._table_plot()
        self._residual_plot()

        across = QSplitter(Qt.Vertical)  # the table over the residual stream's std
        across.addWidget(self.table_plot)
        across.addWidget(self.resid_plot)
        across.setSizes([TABLE_HEIGHT, 200])
        # below these heights the plots scroll rather than shrink to their titles
        self.small.setMinimumHeight(MIN_SMALL_ROW * 4 + 24)  # and the header line
        self.table_plot.setMinimumHeight(TABLE_HEIGHT)
        self.resid_plot.setMinimumHeight(110)
        self.tabs = QTabWidget()  # each tab whole in a laptop's dock, none below the fold
        for rows, content, title in ((bar, self.small, "Histograms"),
                                     (second, across, "Across blocks")):
            page = QWidget()
            column = QVBoxLayout(page)
            column.setContentsMargins(0, 4, 0, 0)
            column.addLayout(rows)
            column.addWidget(scrolling(content), 1)
            self.tabs.addTab(page, title)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addWidget(self.tabs)
        self._order: str | None = None  # the norm position the small plots were built for
        self.small_hists: dict[str, HistogramPlot] = {}
        self.header = pg.LabelItem(justify="left")
        self._cache: dict[tuple[int, str, str], ValueHistogram] = {}  # the shown pass's
        self._labels: dict[str, str] = {}  # node key -> its label, for the plot titles
        self._parts = Turns(self)  # the parts of a redraw still to draw
        session.on_pass(self.request_refresh)
        session.still_drawing(self.busy)  # the engine waits for the histograms' turns
        session.layerChanged.connect(self.request_refresh)
        session.modelChanged.connect(self.request_refresh)

    def _table_plot(self) -> None:
        """The nodes × blocks heatmap of a statistic, with its colour bar."""
        self.table_plot = plot_widget()
        count_axis(self.table_plot.getPlotItem(), "bottom", centred=True)
        self.table_plot.setLabel("bottom", "block")
        self.table_image = pg.ImageItem(axisOrder="row-major")
        self.table_image.setColorMap(pg.colormap.get("viridis"))
        self.table_plot.addItem(self.table_image)
        self.table_plot.invertY(True)
        self.color_bar = colour_bar(colorMap=pg.colormap.get("viridis"), interactive=False,
                                    width=14)
        self.color_bar.setImageItem(self.table_image, insert_in=self.table_plot.getPlotItem())
        self.color_bar.axis.enableAutoSIPrefix(False)
        # Fixed axis sizes: new tick labels after each pass then repaint the plot once,
        # instead of relayouting it and repainting again.
        left = self.table_plot.getAxis("left")
        keys = {n.key for order in NormPosition for n in block_nodes(order)}
        left.setWidth(max(QFontMetrics(left.font()).horizontalAdvance(k) for k in keys) + 20)
        self.table_image.mouseClickEvent = self._table_click
        self.table_keys: list[str] = []
        # one row label per row only where rows are tall enough for text, else every k-th
        self.table_plot.getViewBox().sigResized.connect(self._fit_row_labels)
        self.table: np.ndarray | None = None

    def _residual_plot(self) -> None:
        """The residual stream's std after each add, block by block."""
        self.resid_plot = plot_widget()
        count_axis(self.resid_plot.getPlotItem(), "bottom")
        self.resid_plot.setLabel("bottom", "block (after each of its adds)")
        self.resid_plot.setToolTip("The residual stream's std after each of the block's two adds")
        self.resid_plot.setLabel("left", "std")
        self.resid_plot.getAxis("left").setWidth(60)
        self.resid_plot.getAxis("left").enableAutoSIPrefix(False)  # plain values, no "(x0.001)"
        self.resid_curve = self.resid_plot.plot([], [], pen=pg.mkPen("#1f4e8c", width=2), symbol="o",
                                                symbolSize=5)

    # ------------------------------------------------------------------ drawing
    def redraw(self) -> None:
        """One small histogram per loop turn (the range of a 3-million-value tensor takes
        ~10 ms), then the table and the residual plot: input and paints get in between."""
        info = self.session.model
        if info is None:
            return
        building = []
        if self._order != order_of(info.config):  # the plots first, a turn each
            building = self._build_small(order_of(info.config))
        current, mode = self.session.current, self.mode()
        if current is None or (self._cache and next(iter(self._cache))[0] != id(current)):
            self._cache.clear()  # the histograms of another pass
        what = "its kind's fixed range" if mode is Range.FIXED else "the range of its own values"
        layer = self.session.layer
        self.header.setText(f"{block_title(layer, info.config.n_layers)}: each node's values on {what}" if current else
                            "Each node's values, once a prompt has run")
        # the ranges of big tensors in turns of their own (~10 ms each for 3 million
        # values), then every small plot in one turn: they share one scene, and a turn
        # each would repaint all of them eleven times
        big = [partial(self.histogram, key) for key in self.small_hists if self._big(key)]
        self._parts.run(building + big + [self.refresh_small, self.refresh_table,
                                          self.refresh_residual])

    def busy(self) -> bool:
        """Whether parts of the last redraw are still to be drawn."""
        return bool(self._parts.pending())

    def mode(self) -> Range:
        return RANGES[self.range_box.currentText()]

    def _build_small(self, norm_position: str) -> list:
        """One plot per block node, created once per node order and then only updated:
        the steps that make them, to run a loop turn each (~25 ms a plot)."""
        self.small.clear()
        self.small_plots.clear()
        self.small_hists.clear()
        self._labels.clear()
        self.small.addItem(self.header, row=0, col=0, colspan=COLUMNS)
        self.small.ci.layout.setRowFixedHeight(0, 22)
        self._order = norm_position
        nodes = [n for n in block_nodes(norm_position) if n.kind != Kind.PATTERN]
        return [partial(self._add_small, i, node) for i, node in enumerate(nodes)]

    def _add_small(self, i: int, node) -> None:
        plot = add_plot(self.small, row=1 + i // COLUMNS, col=i % COLUMNS)
        plot.setMouseEnabled(x=False, y=False)
        plot.hideAxis("left")
        self.small_plots[node.key] = plot
        self.small_hists[node.key] = HistogramPlot(plot, compact=True)
        self._labels[node.key] = node.label
        # a plot added after the widget was sized makes the layout shrink its scene to
        # its own hint: the scene is the widget's size again, as on a resize
        self.small.ci.setGeometry(QRectF(0, 0, self.small.width(), self.small.height()))

    def histogram(self, key: str) -> ValueHistogram | None:
        """The shown pass's histogram of this layer's node (None: not captured)."""
        current = self.session.current
        name = block_hook_name(self.session.layer, key)
        view = current.views.get(name) if current is not None else None
        if view is None:
            return None
        cache_key = (id(current), name, self.mode())
        if cache_key not in self._cache:
            self._cache[cache_key] = histogram_of(view, self.mode())
        return self._cache[cache_key]

    def _big(self, key: str) -> bool:
        current = self.session.current
        view = current.views.get(block_hook_name(self.session.layer, key)) if current else None
        return view is not None and view.array is not None and view.array.size > BIG

    def refresh_small(self) -> None:
        current = self.session.current
        for key, plot in self.small_plots.items():
            # the node's name and its block, small (as the header, from 0): three titles
            # side by side then fit the narrow column of a laptop
            set_title(plot, f"B{self.session.layer} {self._labels[key]}", size=SMALL_TITLE)
            self.small_hists[key].show(self.histogram(key) if current is not None else None,
                                       empty=EMPTY if current is None else "not captured")

    def refresh_table(self) -> None:
        info, current = self.session.model, self.session.current
        plot = self.table_plot.getPlotItem()
        if info is None or current is None:
            self.table_image.clear()
            self.table, self.table_keys = None, []
            self.color_bar.hide()
            set_empty(plot, f"{EMPTY} to compare every node across the layers")
            return
        set_empty(plot, None)
        stat = TABLE_STATS[self.stat_box.currentText()]
        self.table_keys, self.table = layer_table(current.views, info.config.n_layers,
                                                  order_of(info.config), stat)
        shown = np.log10(np.abs(self.table) + 1e-12) if stat != "kurtosis" else self.table
        finite = shown[np.isfinite(shown)]
        levels = (float(finite.min()), float(finite.max())) if finite.size else (0, 1)
        levels = levels if levels[1] > levels[0] else (levels[0], levels[0] + 1)
        self.table_image.setImage(np.nan_to_num(shown, nan=levels[0]).astype(np.float32),
                                  levels=levels)
        self.color_bar.setLevels(levels)
        self.color_bar.show()
        self._fit_row_labels()
        name = self.stat_box.currentText()
        scale = f"log10 |{name}|" if stat != "kurtosis" else name
        set_label(self.color_bar, "left", scale)
        set_title(plot, f"{name}, node × block", size=SMALL_TITLE)
        self.table_plot.setToolTip(f"{name} of every node in every block: click a cell to "
                                   "select that node")
        self.table_plot.autoRange()

    def row_label_step(self) -> int:
        """Show every k-th row label, so that the labels never overlap."""
        rows = len(self.table_keys)
        height = self.table_plot.getViewBox().height()
        if not rows or height <= 0:
            return 1
        text = QFontMetrics(self.table_plot.getAxis("left").font()).height()
        return max(1, math.ceil(text / (height / rows)))

    def _fit_row_labels(self, *_args) -> None:
        ticks = [(i + 0.5, k) for i, k in enumerate(self.table_keys)]
        set_ticks(self.table_plot.getAxis("left"), [ticks[::self.row_label_step()]])

    def refresh_residual(self) -> None:
        info, current = self.session.model, self.session.current
        if info is None or current is None:
            self.resid_curve.setData([], [])
            set_empty(self.resid_plot.getPlotItem(), f"{EMPTY} to see the residual stream "
                      "after each add")
            return
        set_empty(self.resid_plot.getPlotItem(), None)
        names, values = residual_profile(current.views, info.config.n_layers, order_of(info.config))
        self.resid_curve.setData(np.arange(len(values)) / 2.0, values)
        self.resid_plot.autoRange()

    def _table_click(self, event) -> None:
        if self.table is None:
            return
        pos = event.pos()
        row, col = int(pos.y()), int(pos.x())
        if 0 <= row < len(self.table_keys) and 0 <= col < self.table.shape[1]:
            self.session.set_node(block_hook_name(col, self.table_keys[row]))
            event.accept()

    def export_csv(self) -> None:
        if self.table is None:
            return
        keys, table, stat = self.table_keys, self.table, self.stat_box.currentText()
        save_as(self, "Export table", "distributions.csv", "CSV (*.csv)",
                lambda tmp: write_table_csv(tmp, keys, table, stat),
                lambda m: self.session.report_error("Distributions", m))


def write_table_csv(path: str, keys: list[str], table: np.ndarray, stat: str) -> None:
    with open(path, "w", newline="", encoding="utf-8") as fh:
        writer = csv.writer(fh)
        writer.writerow([f"node \\ layer ({stat})"] + list(range(table.shape[1])))
        for key, row in zip(keys, table):
            writer.writerow([key] + [f"{v:.6g}" for v in row])
