"""The tensor inspector: everything about the selected node of the shown pass — name,
description, shape, dtype, device, the statistics (of all tokens, or of the one chosen
with Token), a histogram (on this tensor's range or the node's fixed one), a heatmap in
the tensor's own terms, per-token L2 norms, the raw values in a lazy table, and export.
Reads numpy views from the session; one token's statistics are its only computation."""

from __future__ import annotations

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import Qt
from PySide6.QtGui import QGuiApplication
from PySide6.QtWidgets import (QHBoxLayout, QHeaderView, QLabel, QPushButton, QSpinBox, QTableView,
                               QTableWidget, QTableWidgetItem, QTabWidget, QVBoxLayout, QWidget)

from ...plots.plot_axes import bar_plot, plot_widget, position_ticks
from ....core.run.batch import shown_piece
from ....core.run.routing import routed_rows
from ....core.run.capture import NodeView
from ....core.gpt.nodes import (ATTENTION, block_hook_name, block_title, layer_of, node_for_hook,
                               order_of, parse_hook, residual_branches)
from ....core.run.analysis import branch_ratio
from ....core.run.stats import DETAILS
from ....core.run.vector_stats import vector_stats
from ...plots.heatmap import Heatmap
from ...plots.histogram import FIXED_RANGE, RANGES, HistogramPlot, histogram_of, range_box
from ...base.later import BuiltLater
from ...base.lazy import LazyRefresh
from ...plots.plot_text import set_empty, set_label, set_ticks
from ...base.session import Session
from ...base.view_jobs import EngineLike
from ...widgets.save_file import save_as
from ...widgets.values_table import ValuesModel, as_matrix
from .inspector_numbers import STAT_ROWS, over_finite, write_stats_csv

ALL_TOKENS = -1  # the Token box's "all tokens"
STAT_LINES = 7  # the table's rows: two statistics each, the top dimensions last


class InspectorView(BuiltLater, LazyRefresh, QWidget):
    # the tabs behind the histogram, made a loop turn after the view (base/later.py)
    LATER = ("heatmap", "heat_plot", "heat_image", "norm_plot", "norm_bars", "values",
             "values_view", "ratio_plot", "ratio_bars", "ratio_tab", "heat_tab", "values_tab")

    def __init__(self, session: Session, engine: EngineLike) -> None:
        super().__init__()
        self.session = session
        self.title = QLabel()
        self.title.setTextInteractionFlags(Qt.TextSelectableByMouse)
        self.title.setWordWrap(True)
        # two statistics a row: the whole table in six rows, the plots below keep the room
        self.stats_table = QTableWidget(STAT_LINES, 4)
        self.stats_table.setHorizontalHeaderLabels(["statistic", "value", "statistic", "value"])
        self.stats_table.verticalHeader().setVisible(False)
        header = self.stats_table.horizontalHeader()
        for column, mode in enumerate((QHeaderView.ResizeToContents, QHeaderView.Stretch) * 2):
            header.setSectionResizeMode(column, mode)
        rows = self.stats_table.verticalHeader()
        rows.setDefaultSectionSize(self.fontMetrics().height() + 6)
        self.stats_table.setFixedHeight(header.sizeHint().height() + STAT_LINES * rows.defaultSectionSize() + 4)
        self.stats_table.setSpan(STAT_LINES - 1, 1, 1, 3)  # the top dimensions: a long line
        self._shown: tuple | None = None
        self._waiting = False  # the shown node's details are still to come
        self._dirty: set[int] = set()
        self._message = ""  # what the empty plots say
        tabs = self._tabs()
        layout = QVBoxLayout(self)
        layout.addWidget(self.title)
        layout.addWidget(self.stats_table)
        layout.addLayout(self._token_row())
        layout.addWidget(tabs, 1)
        layout.addLayout(self._exports())
        session.nodeChanged.connect(lambda _: self.refresh())
        session.on_pass(self.refresh)  # in a loop turn of its own
        session.completed.connect(lambda: self._waiting and self.refresh())
        session.modelChanged.connect(self.refresh)
        self.refresh()
        self.later_soon()

    def _tabs(self) -> QTabWidget:
        """The histogram's tab; the others come a turn later (``build_later``)."""
        self.tabs = QTabWidget()
        self.hist_plot = plot_widget()
        self.histogram = HistogramPlot(self.hist_plot.getPlotItem())
        self.tabs.addTab(self.hist_plot, "Histogram")
        self.tabs.currentChanged.connect(self._render_tab)
        return self.tabs

    def build_later(self):
        """Heatmap, token norms, branch / shortcut, values: behind the histogram, a loop
        turn each, kept apart until the last, which sets them all, empty as the histogram
        is until a pass is drawn (a part read is never half made)."""
        heatmap = Heatmap()
        yield
        norm_plot, norm_bars = bar_plot("#3c78c8", "L2 norm")
        yield
        ratio_plot, ratio_bars = bar_plot("#c8783c", "‖branch‖ / ‖shortcut‖", "position")
        yield
        self.values = ValuesModel()
        self.values_view = QTableView()
        self.values_view.setObjectName("matrix")  # a tensor's values: as wide as the tensor
        self.values_view.setModel(self.values)
        self.heatmap, self.heat_plot, self.heat_image = heatmap, heatmap.plot, heatmap.image
        self.norm_plot, self.norm_bars = norm_plot, norm_bars
        self.ratio_plot, self.ratio_bars = ratio_plot, ratio_bars
        self.tabs.addTab(self.heat_plot, "Heatmap")
        self.tabs.addTab(self.norm_plot, "Token norms")
        self.tabs.addTab(self.ratio_plot, "Branch / shortcut")
        self.tabs.addTab(self.values_view, "Values")
        self.ratio_tab = self.tabs.indexOf(self.ratio_plot)
        self.heat_tab = self.tabs.indexOf(self.heat_plot)
        self.values_tab = self.tabs.indexOf(self.values_view)
        if self._shown is None:  # a pass drawn meanwhile made these first (``redraw``)
            self._clear_pages(self._message)

    def _token_row(self) -> QHBoxLayout:
        """All tokens or one, and the histogram's range."""
        self.token_box = QSpinBox()  # constant cost, however many rows there are
        self.token_box.setSpecialValueText("all tokens")
        self.token_box.setToolTip("All tokens, or one row (a position): the statistics and the "
                                  "histogram are then that token's; the heatmap and values jump to it")
        self.token_box.valueChanged.connect(self._focus_token)
        self.token_label = QLabel()
        self.range_box = range_box()
        self.range_box.currentTextChanged.connect(lambda _: self._show_numbers())
        tools = QHBoxLayout()
        tools.addWidget(QLabel("Token:"))
        tools.addWidget(self.token_box)
        tools.addWidget(self.token_label, 1)
        tools.addWidget(QLabel("Range:"))
        tools.addWidget(self.range_box)
        return tools

    def _exports(self) -> QHBoxLayout:
        """What if…, then the exports and the plot copy."""
        export_npy = QPushButton("Export .npy…")
        export_npy.clicked.connect(self.export_npy)
        export_csv = QPushButton("Statistics CSV…")
        export_csv.clicked.connect(self.export_csv)
        copy_plot = QPushButton("Copy plot")
        copy_plot.setToolTip("Copy the visible plot to the clipboard as an image")
        copy_plot.clicked.connect(self.copy_plot)
        self.whatif_button = QPushButton("What if…")
        self.whatif_button.setToolTip("Change this node (zero, ablate, scale, steer, patch…) "
                                      "in the What if tab")
        self.whatif_button.clicked.connect(lambda: self.services.show_view("whatif"))
        exports = QHBoxLayout()
        exports.addWidget(self.whatif_button)
        exports.addStretch(1)
        for button in (export_npy, export_csv, copy_plot):
            exports.addWidget(button)
        return exports

    # ------------------------------------------------------------------ showing
    def _row_labels(self, view: NodeView, rows: int) -> list[str]:
        current = self.session.current
        if current is None:
            return [str(i) for i in range(rows)]
        if current.one_position:  # per head: one query row each
            heads = view.shape[1] if view.node.per_head else 1
            return [f"h{h} step {current.step}" if view.node.per_head else f"step {current.step}"
                    for h in range(heads)]
        if view.node.per_head:  # (B, H, T queries): sample, head, query
            B, H, T = view.shape[:3]
            prefix = (lambda b: f"s{b} ") if current.batch is not None else (lambda b: "")
            return [f"{prefix(b)}h{h} {t}: {shown_piece(p)}" for b in range(B)
                    for h in range(H) for t, p in enumerate(current.sample_pieces(b)[:T])]
        if not view.node.batched:
            return [f"position {t}" for t in range(rows)]
        routed = routed_rows(current.views, self.session.model.config, view.name) \
            if self.session.model is not None else None
        if routed is not None:  # an expert's step: the tokens routed to it
            labels = current.row_labels()
            return [labels[i] if i < len(labels) else str(i) for i in routed][:rows]
        return current.row_labels()[:rows]

    def refresh(self) -> None:
        view = self.session.view()
        name = self.session.node
        if view is None:
            why = "Run a prompt (Ctrl+Enter) to see its values"
            if self.session.current is not None and layer_of(name) is not None \
                    and node_for_hook(name, order_of(self.session.model.config)).parent == ATTENTION:
                why = ("Attention's steps are computed when attention is opened: tick "
                       "“Attention steps” over the graph (or press A there)")
            self.title.setText(f"<b>{name}</b><br>{why}.")
            self._clear(why)
            self._stale = False
            return
        # the rest is ~17 ms at T=1024: only while the tab is in front (ui/base/lazy.py)
        self.request_refresh()

    def redraw(self) -> None:
        view, name = self.session.view(), self.session.node
        if view is None:
            return
        current = self.session.current
        where = "prompt pass" if current.step is None else f"generation step {current.step}" + (
            " (the whole context recomputed)" if current.whole else "")
        if current.batch is not None:
            where = "batch pass"
        padding = ""
        if view.valid is not None:
            real, total = int(view.valid.sum()), view.valid.size
            padding = (f"<br>batch: statistics over the {real} real vectors of {total}; the "
                       f"{total - real} padding rows are grey and left out")
        layer, n = layer_of(name), self.session.model.config.n_layers
        block = f" · {block_title(layer, n)}" if layer is not None else ""
        title = (f"<b>{name}</b> — {view.node.label}{block} ({where})<br>{view.node.description}<br>"
                 f"shape <b>{view.shape}</b> · dtype {view.dtype} · device {view.device}{padding}")
        matrix = as_matrix(view)
        labels = self._row_labels(view, 0 if matrix is None else matrix.shape[0])
        real = None if view.valid is None else view.valid.reshape(-1)
        self._shown = (view, matrix, labels, real)
        # The details of a node other than the one selected at Ctrl+Enter come a moment
        # after the pass (core.passes.Keep.later): not computed here, shown when they come.
        self._waiting = not view.stats.ready
        for plot in (self.norm_plot, self.ratio_plot):
            set_empty(plot.getPlotItem(), None)
        if self._waiting:
            self.norm_bars.setOpts(x=[0], height=[0], width=0.8, brushes=None)
            set_empty(self.norm_plot.getPlotItem(), "Computing the vectors' norms…")
        else:
            l2 = np.atleast_1d(view.stats.token_l2).reshape(-1)
            brushes = None if real is None else ["#3c78c8" if r else "#d0d0d0" for r in real]
            self.norm_bars.setOpts(x=np.arange(l2.size), height=np.nan_to_num(l2, nan=0.0),
                                   width=0.8, brushes=brushes, brush="#3c78c8")
            set_label(self.norm_plot.getPlotItem(), "bottom", "vector (sample-major; padding "
                      "has no bar)" if real is not None else "position")
            set_ticks(self.norm_plot.getAxis("bottom"), position_ticks(l2.size))
            self.norm_plot.autoRange()
        ratio = self.branch_ratio(view)
        self.tabs.setTabVisible(self.ratio_tab, ratio is not None)
        if ratio is not None:
            self.ratio_bars.setOpts(x=np.arange(ratio.size), height=np.nan_to_num(ratio, nan=0.0), width=0.8)
            set_ticks(self.ratio_plot.getAxis("bottom"), position_ticks(ratio.size))
            self.ratio_plot.autoRange()
            title += (f"<br>this add's branch is {np.nanmedian(ratio):.3g}× the shortcut's size "
                      "(median over positions)")
        self.title.setText(title)
        self.token_box.blockSignals(True)
        self.token_box.setRange(ALL_TOKENS, max(0, len(labels) - 1) if matrix is not None else ALL_TOKENS)
        self.token_box.setValue(ALL_TOKENS)
        self.token_box.blockSignals(False)
        self.token_label.setText(f"{len(labels)} rows" if matrix is not None else
                                 "(the tensor was not kept: statistics only)")
        self._show_numbers()
        self._dirty = {self.heat_tab, self.values_tab}  # drawn when shown
        self._render_tab(self.tabs.currentIndex())

    def _token_values(self) -> tuple[np.ndarray | None, int | None]:
        """The chosen token's vector (and its row), or None for all tokens."""
        row = self.token_box.value()
        if self._shown is None or row == ALL_TOKENS:
            return None, None
        matrix = self._shown[1]
        return (matrix[row], row) if matrix is not None and row < matrix.shape[0] else (None, None)

    def _show_numbers(self) -> None:
        """The statistics table and the histogram, of all tokens or of the chosen one."""
        if self._shown is None:
            return
        view = self._shown[0]
        values, row = self._token_values()
        stats = view.stats
        if values is not None:  # one vector: its own statistics, a moment to compute
            stats = vector_stats(values, view.node.hist)  # numpy: no torch on this thread
        rows = [(label, getattr(stats, key) if stats.ready or key not in DETAILS else "computing…")
                for label, key in STAT_ROWS]
        rows += [("NaN / Inf", f"{stats.n_nan} / {stats.n_inf}"),
                 ("values", f"{stats.count:,}" + ("" if row is None else f" (token row {row})")
                  + over_finite(stats)),
                 ("top dims by |value|", "computing…" if not stats.ready else ", ".join(
                     f"{int(d)} ({v:.3g})" for d, v in zip(stats.top_dims, stats.top_values)))]
        for i, (label, value) in enumerate(rows):
            r, c = (i // 2, 2 * (i % 2)) if i < len(rows) - 1 else (STAT_LINES - 1, 0)
            self.stats_table.setItem(r, c, QTableWidgetItem(label))
            text = f"{value:.6g}" if isinstance(value, float) else str(value)
            self.stats_table.setItem(r, c + 1, QTableWidgetItem(text))
        self._agree_range(values is not None or view.array is not None)
        mode = RANGES[self.range_box.currentText()]
        what = "all tokens" if row is None else f"token row {row}"
        self.histogram.show(histogram_of(view, mode, values), what)

    def statistics(self) -> dict[str, str]:
        """What the statistics table shows: each statistic's name and its value."""
        table, shown = self.stats_table, {}
        for r in range(table.rowCount()):
            for c in (0, 2):
                label, value = table.item(r, c), table.item(r, c + 1)
                if label is not None and value is not None:
                    shown[label.text()] = value.text()
        return shown

    def _agree_range(self, kept: bool) -> None:
        """Without the tensor (a node of a step that kept only its statistics) the
        histogram can only be the kind's fixed one: the Range box shows that, disabled,
        and the user's own choice comes back with the next tensor."""
        box = self.range_box
        if kept == box.isEnabled():
            return
        box.blockSignals(True)
        if kept:
            box.setCurrentText(self._range_choice)
            box.setToolTip(self._range_tip)
        else:
            self._range_choice, self._range_tip = box.currentText(), box.toolTip()
            box.setCurrentText(FIXED_RANGE)
            box.setToolTip("This pass kept only this node's statistics: its histogram is "
                           "on the fixed range of its kind of node")
        box.setEnabled(kept)
        box.blockSignals(False)

    def _render_tab(self, index: int) -> None:
        """The heatmap and the values table are drawn only when their tab is shown."""
        if index not in self._dirty or self._shown is None or not self.built():
            return
        self._dirty.discard(index)
        view, matrix, labels, real = self._shown
        if index == self.values_tab:
            self.values.set_matrix(matrix, labels, real)
        elif index == self.heat_tab:
            self.heatmap.draw(view, matrix, labels, real)

    def branch_ratio(self, view: NodeView) -> np.ndarray | None:
        """For a residual add: ||branch|| / ||shortcut|| per position, else None."""
        layer, key = parse_hook(view.name)
        order = order_of(self.session.model.config) if self.session.model is not None else "pre"
        branch_key = residual_branches(order).get(key) if layer is not None else None
        if branch_key is None or view.array is None:
            return None
        branch = self.session.view(block_hook_name(layer, branch_key))
        if branch is None or branch.array is None:
            return None
        ratio = branch_ratio(view.array, branch.array)
        if view.valid is not None:
            ratio = np.where(view.valid, ratio, np.nan)  # padding is not a real token
        return ratio.reshape(-1)

    def _clear(self, message: str) -> None:
        self._shown, self._message = None, message
        self.stats_table.clearContents()
        self.histogram.show(None, empty=message)
        if self.built():
            self._clear_pages(message)
        self.token_box.setRange(ALL_TOKENS, ALL_TOKENS)
        self.token_label.clear()

    def _clear_pages(self, message: str) -> None:
        """The tabs behind the histogram, empty, saying ``message``."""
        self.heatmap.clear(message)
        for plot in (self.norm_plot, self.ratio_plot):
            set_empty(plot.getPlotItem(), message)
        self.norm_bars.setOpts(x=[0], height=[0], width=0.8)
        self.values.set_matrix(None, [])

    def _focus_token(self, row: int) -> None:
        if self._shown is None:
            return
        self._show_numbers()
        if row == ALL_TOKENS:
            self.token_label.setText(f"{len(self._shown[2])} rows")
            return
        labels = self._shown[2]
        self.token_label.setText(labels[row] if row < len(labels) else "")
        self._render_tab(self.values_tab)
        self._render_tab(self.heat_tab)
        self.values_view.scrollTo(self.values.index(row, 0))
        self.values_view.selectRow(row)
        self.heatmap.focus(row)

    # ------------------------------------------------------------------ export
    def export_npy(self) -> None:
        view = self.session.view()
        if view is not None and view.array is not None:
            save_as(self, "Export tensor", f"{view.name}.npy", "NumPy (*.npy)",
                    lambda tmp: np.save(tmp, view.array), self.session.error_reporter("Tensor inspector"))

    def export_csv(self) -> None:
        view = self.session.view()
        if view is not None:
            save_as(self, "Export statistics", f"{view.name}.csv", "CSV (*.csv)",
                    lambda tmp: write_stats_csv(tmp, view), self.session.error_reporter("Tensor inspector"))

    def copy_plot(self) -> None:
        QGuiApplication.clipboard().setPixmap(self.tabs.currentWidget().grab())

