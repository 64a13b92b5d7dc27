"""The tensor inspector: everything about the selected node of the shown pass — name,
description, shape, dtype, device, the statistics table, a histogram on the node's
fixed bins, a tokens x dimensions heatmap, per-token L2 norms, the raw values in a
lazy table, and export. Reads numpy views from the session; computes nothing heavy."""

from __future__ import annotations

import csv

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import QAbstractTableModel, QModelIndex, Qt
from PySide6.QtGui import QBrush, QColor, QGuiApplication
from PySide6.QtWidgets import (QFileDialog, QHBoxLayout, QLabel,
                               QPushButton, QSpinBox, QTableView, QTableWidget, QTableWidgetItem,
                               QTabWidget, QVBoxLayout, QWidget)

from ..core.batch import shown_piece
from ..core.capture import NodeView
from ..core.nodes import block_hook_name, parse_hook, residual_branches
from ..core.stats import branch_ratio
from .plot_text import set_label, set_ticks
from .session import Session

STAT_ROWS = [("mean", "mean"), ("std", "std"), ("min", "min"), ("max", "max"),
             ("abs-max", "absmax"), ("RMS", "rms"), ("kurtosis (excess)", "kurtosis"),
             ("share negative", "frac_neg"), ("share exact zeros", "frac_zero")]


def as_matrix(view: NodeView) -> np.ndarray | None:
    """The view's values as (rows, features): positions x dims; the attention pattern
    as (heads x query positions) x key positions."""
    if view.array is None:
        return None
    a = view.array
    return a.reshape(-1, a.shape[-1])


class ValuesModel(QAbstractTableModel):
    """Serves cells on demand, so a (1024, 3072) tensor shows without freezing."""

    PAD_BRUSH = QBrush(QColor("#d8d8d8"))

    def __init__(self) -> None:
        super().__init__()
        self.matrix = np.zeros((0, 0), dtype=np.float32)
        self.row_labels: list[str] = []
        self.real: np.ndarray | None = None  # per row: False for a batch's padding

    def set_matrix(self, matrix: np.ndarray | None, row_labels: list[str],
                   real: np.ndarray | None = None) -> None:
        self.beginResetModel()
        self.matrix = matrix if matrix is not None else np.zeros((0, 0), dtype=np.float32)
        self.row_labels = row_labels
        self.real = real
        self.endResetModel()

    def rowCount(self, parent=QModelIndex()) -> int:  # noqa: N802
        return self.matrix.shape[0]

    def columnCount(self, parent=QModelIndex()) -> int:  # noqa: N802
        return self.matrix.shape[1] if self.matrix.ndim == 2 else 0

    def data(self, index, role=Qt.DisplayRole):
        if role == Qt.DisplayRole and index.isValid():
            return f"{self.matrix[index.row(), index.column()]:.4g}"
        if role == Qt.BackgroundRole and self.real is not None and not self.real[index.row()]:
            return self.PAD_BRUSH  # padding: computed by the model, left out of statistics
        return None

    def headerData(self, section, orientation, role=Qt.DisplayRole):  # noqa: N802
        if role != Qt.DisplayRole:
            return None
        if orientation == Qt.Vertical and section < len(self.row_labels):
            return self.row_labels[section]
        return str(section)


class InspectorView(QWidget):
    def __init__(self, session: Session, engine=None) -> None:
        super().__init__()
        self.session = session
        self.title = QLabel()
        self.title.setTextInteractionFlags(Qt.TextSelectableByMouse)
        self.title.setWordWrap(True)
        self.stats_table = QTableWidget(len(STAT_ROWS) + 3, 2)
        self.stats_table.setHorizontalHeaderLabels(["statistic", "value"])
        self.stats_table.verticalHeader().setVisible(False)
        self.stats_table.horizontalHeader().setStretchLastSection(True)
        self.stats_table.setMaximumHeight(330)

        self.tabs = QTabWidget()
        self.hist_plot = pg.PlotWidget(background="w")
        self.hist_plot.setLabel("bottom", "value")
        self.hist_plot.setLabel("left", "count")
        self.hist_curve = self.hist_plot.plot([0, 1], [0], stepMode="center", fillLevel=0,
                                              brush=(60, 120, 200, 150), pen=pg.mkPen("#1f4e8c"))
        self.hist_note = pg.TextItem(color="#333333", anchor=(1, 0))
        self.hist_plot.addItem(self.hist_note)

        self.heat_plot = pg.PlotWidget(background="w")
        self.heat_plot.setLabel("bottom", "dimension")
        self.heat_image = pg.ImageItem(axisOrder="row-major")
        self.heat_image.setColorMap(pg.colormap.get("CET-D1"))  # diverging blue-white-red
        self.heat_plot.addItem(self.heat_image)
        self.heat_plot.invertY(True)
        self.heat_bar = pg.ColorBarItem(colorMap=pg.colormap.get("CET-D1"), interactive=False)
        self.heat_bar.setImageItem(self.heat_image, insert_in=self.heat_plot.getPlotItem())

        self.norm_plot = pg.PlotWidget(background="w")
        self.norm_plot.setLabel("left", "L2 norm")
        self.norm_bars = pg.BarGraphItem(x=[0], height=[0], width=0.8, brush="#3c78c8")
        self.norm_plot.addItem(self.norm_bars)

        self.values = ValuesModel()
        self.values_view = QTableView()
        self.values_view.setModel(self.values)

        self.ratio_plot = pg.PlotWidget(background="w")
        self.ratio_plot.setLabel("left", "‖branch‖ / ‖shortcut‖")
        self.ratio_plot.setLabel("bottom", "position")
        self.ratio_bars = pg.BarGraphItem(x=[0], height=[0], width=0.8, brush="#c8783c")
        self.ratio_plot.addItem(self.ratio_bars)

        self.tabs.addTab(self.hist_plot, "Histogram")
        self.tabs.addTab(self.heat_plot, "Heatmap")
        self.tabs.addTab(self.norm_plot, "Token norms")
        self.tabs.addTab(self.ratio_plot, "Branch / shortcut")
        self.tabs.addTab(self.values_view, "Values")
        self.ratio_tab = self.tabs.indexOf(self.ratio_plot)
        self.heat_tab = self.tabs.indexOf(self.heat_plot)
        self.values_tab = self.tabs.indexOf(self.values_view)
        self._shown: tuple | None = None
        self._dirty: set[int] = set()
        self.tabs.currentChanged.connect(self._render_tab)

        self.token_box = QSpinBox()  # constant cost, however many rows there are
        self.token_box.setToolTip("Focus one row (a position): the heatmap and values jump to it")
        self.token_box.valueChanged.connect(self._focus_token)
        self.token_label = QLabel()
        export_npy = QPushButton("Export .npy…")
        export_npy.clicked.connect(self.export_npy)
        export_csv = QPushButton("Statistics CSV…")
        export_csv.clicked.connect(self.export_csv)
        copy_plot = QPushButton("Copy plot")
        copy_plot.setToolTip("Copy the visible plot to the clipboard as an image")
        copy_plot.clicked.connect(self.copy_plot)
        tools = QHBoxLayout()
        tools.addWidget(QLabel("Token:"))
        tools.addWidget(self.token_box)
        tools.addWidget(self.token_label, 1)
        tools.addWidget(export_npy)
        tools.addWidget(export_csv)
        tools.addWidget(copy_plot)

        layout = QVBoxLayout(self)
        layout.addWidget(self.title)
        layout.addWidget(self.stats_table)
        layout.addLayout(tools)
        layout.addWidget(self.tabs, 1)

        session.nodeChanged.connect(lambda _: self.refresh())
        session.on_pass(self.refresh)  # in a loop turn of its own
        session.modelChanged.connect(self.refresh)
        session.hiddenChanged.connect(lambda _: self.refresh())
        self.refresh()

    # ------------------------------------------------------------------ showing
    def _row_labels(self, view: NodeView, rows: int) -> list[str]:
        current = self.session.current
        if current is None:
            return [str(i) for i in range(rows)]
        if current.step is not None:
            return [f"step {current.step}"]
        if view.node.kind == "pattern":  # (B, H, T queries): sample, head, query
            B, H, T = view.shape[:3]
            prefix = (lambda b: f"s{b} ") if current.batch is not None else (lambda b: "")
            return [f"{prefix(b)}h{h} {t}: {shown_piece(p)}" for b in range(B)
                    for h in range(H) for t, p in enumerate(current.sample_pieces(b)[:T])]
        if not view.node.batched:
            return [f"position {t}" for t in range(rows)]
        return current.row_labels()[:rows]

    def refresh(self) -> None:
        view = self.session.view()
        name = self.session.node
        if self.session.hidden:
            self.title.setText(f"<b>{name}</b><br>Predict first: answer the question in the "
                               "Learn tab to reveal this tensor.")
            self._clear()
            return
        if view is None:
            self.title.setText(f"<b>{name}</b><br>Run a prompt (Ctrl+Enter) to see its values.")
            self._clear()
            return
        current = self.session.current
        where = "prompt pass" if current.step is None else f"generation step {current.step}"
        if current.batch is not None:
            where = "batch pass"
        padding = ""
        if view.valid is not None:
            real, total = int(view.valid.sum()), view.valid.size
            padding = (f"<br>batch: statistics over the {real} real vectors of {total}; the "
                       f"{total - real} padding rows are grey and left out")
        self.title.setText(
            f"<b>{name}</b> — {view.node.label} ({where})<br>{view.node.description}<br>"
            f"shape <b>{view.shape}</b> · dtype {view.dtype} · device {view.device}{padding}")
        s = view.stats
        rows = [(label, getattr(s, key)) for label, key in STAT_ROWS]
        rows += [("NaN / Inf", f"{s.n_nan} / {s.n_inf}"),
                 ("top dims by |value|", ", ".join(f"{int(d)} ({v:.3g})"
                                                   for d, v in zip(s.top_dims, s.top_values))),
                 ("values", f"{s.count:,}")]
        for r, (label, value) in enumerate(rows):
            self.stats_table.setItem(r, 0, QTableWidgetItem(label))
            text = f"{value:.6g}" if isinstance(value, float) else str(value)
            self.stats_table.setItem(r, 1, QTableWidgetItem(text))
        h = s.hist_range
        edges = np.asarray(h.edges())
        self.hist_curve.setData(edges, s.hist.astype(float))
        self.hist_plot.setXRange(h.lo, h.hi, padding=0.02)
        self.hist_plot.enableAutoRange(axis="y")
        self.hist_note.setText(f"below {h.lo:g}: {s.under:,}\nabove {h.hi:g}: {s.over:,}")
        self.hist_note.setPos(h.hi, max(1.0, float(s.hist.max())))
        matrix = as_matrix(view)
        labels = self._row_labels(view, 0 if matrix is None else matrix.shape[0])
        real = None if view.valid is None else view.valid.reshape(-1)
        self._shown = (view, matrix, labels, real)
        l2 = np.atleast_1d(s.token_l2).reshape(-1)
        brushes = None if real is None else ["#3c78c8" if r else "#d0d0d0" for r in real]
        self.norm_bars.setOpts(x=np.arange(l2.size), height=np.nan_to_num(l2, nan=0.0), width=0.8,
                               brushes=brushes, brush="#3c78c8")
        set_label(self.norm_plot.getPlotItem(), "bottom", "vector (sample-major; padding has no bar)"
                  if real is not None else "position")
        self.norm_plot.autoRange()
        ratio = self.branch_ratio(view)
        self.tabs.setTabVisible(self.ratio_tab, ratio is not None)
        if ratio is not None:
            self.ratio_bars.setOpts(x=np.arange(ratio.size), height=np.nan_to_num(ratio, nan=0.0), width=0.8)
            self.ratio_plot.autoRange()
            self.title.setText(self.title.text() + f"<br>this add's branch is {np.nanmedian(ratio):.3g}× "
                               "the shortcut's size (median over positions)")
        self.token_box.blockSignals(True)
        self.token_box.setRange(0, max(0, len(labels) - 1) if matrix is not None else 0)
        self.token_box.setValue(0)
        self.token_box.blockSignals(False)
        self.token_label.setText(labels[0] if matrix is not None and labels else "")
        self._dirty = {self.heat_tab, self.values_tab}  # drawn when shown
        self._render_tab(self.tabs.currentIndex())

    def _render_tab(self, index: int) -> None:
        """The heatmap and the values table are drawn only when their tab is shown."""
        if index not in self._dirty or self._shown is None:
            return
        self._dirty.discard(index)
        view, matrix, labels, real = self._shown
        if index == self.values_tab:
            self.values.set_matrix(matrix, labels, real)
        elif index == self.heat_tab:
            if matrix is None:
                self.heat_image.clear()
                return
            level = view.stats.absmax if np.isfinite(view.stats.absmax) and view.stats.absmax else 1.0
            if real is not None:  # padding rows drawn empty (NaN is transparent)
                matrix = np.where(real[:, None], matrix, np.nan)
            self.heat_image.setImage(np.ascontiguousarray(matrix, dtype=np.float32),
                                     levels=(-level, level), autoDownsample=True)
            self.heat_bar.setLevels((-level, level))
            ticks = [(i + 0.5, lab) for i, lab in enumerate(labels)]
            step = max(1, len(ticks) // 30)
            set_ticks(self.heat_plot.getAxis("left"), [ticks[::step]])
            self.heat_plot.autoRange()

    def branch_ratio(self, view: NodeView) -> np.ndarray | None:
        """For a residual add: ||branch|| / ||shortcut|| per position, else None."""
        layer, key = parse_hook(view.name)
        branch_key = residual_branches().get(key) if layer is not None else None
        if branch_key is None or view.array is None:
            return None
        branch = self.session.view(block_hook_name(layer, branch_key))
        if branch is None or branch.array is None:
            return None
        ratio = branch_ratio(view.array, branch.array)
        if view.valid is not None:
            ratio = np.where(view.valid, ratio, np.nan)  # padding is not a real token
        return ratio.reshape(-1)

    def _clear(self) -> None:
        self._shown = None
        self.stats_table.clearContents()
        self.hist_curve.setData([0, 1], [0])
        self.heat_image.clear()
        self.values.set_matrix(None, [])
        self.token_box.setRange(0, 0)
        self.token_label.clear()

    def _focus_token(self, row: int) -> None:
        if row < 0 or self._shown is None:
            return
        labels = self._shown[2]
        self.token_label.setText(labels[row] if row < len(labels) else "")
        self._render_tab(self.values_tab)
        self._render_tab(self.heat_tab)
        self.values_view.scrollTo(self.values.index(row, 0))
        self.values_view.selectRow(row)
        self.heat_plot.setYRange(row - 0.5, row + 1.5, padding=0)

    # ------------------------------------------------------------------ export
    def export_npy(self) -> None:
        view = self.session.view()
        if view is None or view.array is None:
            return
        path, _ = QFileDialog.getSaveFileName(self, "Export tensor", f"{view.name}.npy", "NumPy (*.npy)")
        if path:
            np.save(path, view.array)

    def export_csv(self) -> None:
        view = self.session.view()
        if view is None:
            return
        path, _ = QFileDialog.getSaveFileName(self, "Export statistics", f"{view.name}.csv", "CSV (*.csv)")
        if path:
            write_stats_csv(path, view)

    def copy_plot(self) -> None:
        QGuiApplication.clipboard().setPixmap(self.tabs.currentWidget().grab())


def write_stats_csv(path: str, view: NodeView) -> None:
    s = view.stats
    with open(path, "w", newline="", encoding="utf-8") as fh:
        writer = csv.writer(fh)
        writer.writerow(["node", "statistic", "value"])
        for label, key in STAT_ROWS:
            writer.writerow([view.name, label, getattr(s, key)])
        writer.writerow([view.name, "NaN", s.n_nan])
        writer.writerow([view.name, "Inf", s.n_inf])
        writer.writerow([view.name, "top dims", " ".join(str(int(d)) for d in s.top_dims)])
