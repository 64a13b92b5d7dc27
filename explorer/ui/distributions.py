"""Activation distributions: one histogram per node of the selected layer in forward
order (each on its node's fixed bins), a nodes x layers heatmap of a chosen statistic
(click a cell to select that node and layer everywhere), and the residual stream's std
after each add, layer by layer."""

from __future__ import annotations

import csv
import math

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import Qt
from PySide6.QtGui import QFontMetrics
from PySide6.QtWidgets import (QComboBox, QFileDialog, QHBoxLayout, QLabel, QPushButton,
                               QSplitter, QVBoxLayout, QWidget)

from ..core.analysis import layer_table, residual_profile
from ..core.nodes import block_hook_name, block_nodes
from .lazy import LazyRefresh
from .plot_text import set_ticks, set_title
from .scrolling import scrolling
from .session import Session
from .turns import Turns

TABLE_STATS = {"std": "std", "abs-max": "absmax", "kurtosis": "kurtosis", "RMS": "rms"}
COLUMNS = 3
MIN_SMALL_ROW = 150  # px per row of small multiples: a title and a readable histogram


class DistributionsView(LazyRefresh, QWidget):
    def __init__(self, session: Session, engine=None) -> None:
        super().__init__()
        self.session = session
        self.small = pg.GraphicsLayoutWidget()
        self.small.setBackground("w")
        self.small_plots: dict[str, pg.PlotItem] = {}

        self.stat_box = QComboBox()
        self.stat_box.addItems(list(TABLE_STATS))
        self.stat_box.currentTextChanged.connect(lambda _: self.refresh_table())
        rescale = QPushButton("Rescale")
        rescale.setToolTip("Fit every histogram to its data (the bins stay fixed)")
        rescale.clicked.connect(self.rescale)
        export = QPushButton("Table CSV…")
        export.clicked.connect(self.export_csv)
        bar = QHBoxLayout()
        bar.addWidget(QLabel("Across layers:"))
        bar.addWidget(self.stat_box)
        bar.addStretch(1)
        bar.addWidget(rescale)
        bar.addWidget(export)

        self.table_plot = pg.PlotWidget(background="w")
        self.table_plot.setLabel("bottom", "layer")
        self.table_image = pg.ImageItem(axisOrder="row-major")
        self.table_image.setColorMap(pg.colormap.get("viridis"))
        self.table_plot.addItem(self.table_image)
        self.table_plot.invertY(True)
        # Fixed axis sizes: new tick labels after each pass then repaint the plot once,
        # instead of relayouting it and repainting again.
        left = self.table_plot.getAxis("left")
        keys = {n.key for order in ("pre", "post") for n in block_nodes(order)}
        left.setWidth(max(QFontMetrics(left.font()).horizontalAdvance(k) for k in keys) + 20)
        self.table_image.mouseClickEvent = self._table_click
        self.table_keys: list[str] = []
        # one row label per row only where rows are tall enough for text, else every k-th
        self.table_plot.getViewBox().sigResized.connect(self._fit_row_labels)
        self.table: np.ndarray | None = None

        self.resid_plot = pg.PlotWidget(background="w")
        self.resid_plot.setLabel("bottom", "layer: the residual stream after each add (two per layer)")
        self.resid_plot.setLabel("left", "std")
        self.resid_plot.getAxis("left").setWidth(60)
        self.resid_plot.getAxis("left").enableAutoSIPrefix(False)  # plain values, no "(x0.001)"
        self.resid_curve = self.resid_plot.plot([], [], pen=pg.mkPen("#1f4e8c", width=2), symbol="o",
                                                symbolSize=5)

        split = QSplitter(Qt.Vertical)
        split.addWidget(self.small)
        split.addWidget(self.table_plot)
        split.addWidget(self.resid_plot)
        split.setSizes([4 * MIN_SMALL_ROW, 260, 200])
        # below these heights the plots scroll rather than shrink to their titles
        self.small.setMinimumHeight(MIN_SMALL_ROW * 4)
        self.table_plot.setMinimumHeight(130)
        self.resid_plot.setMinimumHeight(110)
        layout = QVBoxLayout(self)
        layout.addLayout(bar)
        layout.addWidget(scrolling(split), 1)
        self._order: str | None = None  # the norm position the small plots were built for
        self.small_curves: dict[str, pg.PlotDataItem] = {}
        self._labels: dict[str, str] = {}  # node key -> its label, for the plot titles
        self._parts = Turns(self)  # the parts of a redraw still to draw
        session.on_pass(self.request_refresh)
        session.layerChanged.connect(self.request_refresh)
        session.modelChanged.connect(self.request_refresh)

    # ------------------------------------------------------------------ drawing
    def redraw(self) -> None:
        """The small multiples now, the table and the residual plot in the next turns of
        the event loop: each plot's repaint (7-15 ms, some twice) then lets input in
        between instead of all three coming in one go."""
        self.refresh_small()
        self._parts.run([self.refresh_table, self.refresh_residual])

    def busy(self) -> bool:
        """Whether parts of the last redraw are still to be drawn."""
        return bool(self._parts.pending())

    def _build_small(self, norm_position: str) -> None:
        """One plot per block node, created once per node order and then only updated."""
        self.small.clear()
        self.small_plots.clear()
        self.small_curves.clear()
        self._labels.clear()
        nodes = [n for n in block_nodes(norm_position) if n.kind != "pattern"]
        for i, node in enumerate(nodes):
            plot = self.small.addPlot(row=i // COLUMNS, col=i % COLUMNS, title=node.label)
            plot.setMouseEnabled(x=False, y=False)
            plot.hideAxis("left")
            h = node.hist
            plot.setXRange(h.lo, h.hi, padding=0)
            self.small_plots[node.key] = plot
            self._labels[node.key] = node.label
            self.small_curves[node.key] = plot.plot(
                np.asarray(h.edges()), np.zeros(h.bins), stepMode="center", fillLevel=0,
                brush=(60, 120, 200, 150), pen=pg.mkPen("#1f4e8c"))
        self._order = norm_position

    def refresh_small(self) -> None:
        info, current = self.session.model, self.session.current
        if info is None:
            return
        if self._order != info.config.norm_position:
            self._build_small(info.config.norm_position)
        for key, curve in self.small_curves.items():
            view = current.views.get(block_hook_name(self.session.layer, key)) if current else None
            h = self.small_plots[key]
            counts = view.stats.hist.astype(float) if view is not None else np.zeros(len(curve.xData) - 1)
            curve.setData(curve.xData, counts)
            h.setYRange(0, max(1.0, float(counts.max())) * 1.05, padding=0)
            set_title(h, f"{self._labels[key]} (layer {self.session.layer})")

    def rescale(self) -> None:
        for plot in self.small_plots.values():
            plot.enableAutoRange()

    def refresh_table(self) -> None:
        info, current = self.session.model, self.session.current
        if info is None or current is None:
            self.table_image.clear()
            return
        stat = TABLE_STATS[self.stat_box.currentText()]
        self.table_keys, self.table = layer_table(current.views, info.config.n_layers,
                                                  info.config.norm_position, stat)
        shown = np.log10(np.abs(self.table) + 1e-12) if stat != "kurtosis" else self.table
        finite = shown[np.isfinite(shown)]
        levels = (float(finite.min()), float(finite.max())) if finite.size else (0, 1)
        self.table_image.setImage(np.nan_to_num(shown, nan=levels[0]).astype(np.float32),
                                  levels=levels if levels[1] > levels[0] else (levels[0], levels[0] + 1))
        self._fit_row_labels()
        scale = "log10 |value|" if stat != "kurtosis" else "value"
        set_title(self.table_plot.getPlotItem(),
                  f"{self.stat_box.currentText()} per node and layer ({scale}); click a cell")
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
            return
        names, values = residual_profile(current.views, info.config.n_layers, info.config.norm_position)
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
        path, _ = QFileDialog.getSaveFileName(self, "Export table", "distributions.csv", "CSV (*.csv)")
        if path:
            write_table_csv(path, self.table_keys, self.table, self.stat_box.currentText())


def write_table_csv(path: str, keys: list[str], table: np.ndarray, stat: str) -> None:
    with open(path, "w", newline="", encoding="utf-8") as fh:
        writer = csv.writer(fh)
        writer.writerow([f"node \\ layer ({stat})"] + list(range(table.shape[1])))
        for key, row in zip(keys, table):
            writer.writerow([key] + [f"{v:.6g}" for v in row])
