"""Weight matrices as objects: the matrix of the selected Linear (W_query, W_key,
W_value, out_proj, Linear 1, Linear 2), embedding or output head — as a heatmap (block
means when larger than the plot), drawn to scale beside the block's other matrices, with
its shape, parameter count, Frobenius norm and largest singular values, and what it did
to the selected token (its input vector and its output vector). The numbers come from an
engine job (core.lessons.matrices: it reads the model's parameters)."""

from __future__ import annotations

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import QRectF
from PySide6.QtGui import QBrush, QColor, QPen
from PySide6.QtWidgets import (QComboBox, QGraphicsRectItem, QHBoxLayout, QLabel, QTabWidget,
                               QVBoxLayout, QWidget)

from ....core.gpt.nodes import (order_of, LOGITS, TOKEN_EMBEDDING, block_hook_name,
                               inside_attention, layer_of, node_for_hook, same_node_in_layer)
from ....core.lessons.matrices import block_matrices, describe, has_matrix, model_matrices
from ...base.later import BuiltLater
from ...base.lazy import LazyRefresh
from ...base.session import Session
from ...base.view_jobs import EngineLike, ViewJobs
from ...plots.plot_axes import colour_bar, plot_widget
from ...plots.scale_layout import scale_layout
from ...plots.plot_text import set_empty, set_label, set_title

CMAP = pg.colormap.get("CET-D1")  # weights: diverging around 0
CHOOSE = "Choose a matrix above, or select a Linear, an embedding or the output head"


class WeightsView(BuiltLater, LazyRefresh, QWidget):
    # the tabs behind the matrix, made a loop turn after the view (base/later.py)
    LATER = ("scale_plot", "token_plot", "x_curve", "y_curve")

    def __init__(self, session: Session, engine: EngineLike) -> None:
        super().__init__()
        self.session = session
        self.matrix = None  # the last core.lessons.matrices.Matrix shown
        self.choice = QComboBox()
        self.choice.setToolTip("Which matrix of the shown block (or of the model)")
        self.choice.currentIndexChanged.connect(lambda _: self.request_refresh())
        self.note = QLabel(CHOOSE)
        self.note.setWordWrap(True)
        bar = QHBoxLayout()
        bar.addWidget(QLabel("Matrix:"))
        bar.addWidget(self.choice, 1)
        self.heat = plot_widget()
        self.image = pg.ImageItem(axisOrder="row-major")
        self.image.setColorMap(CMAP)
        self.heat.addItem(self.image)
        self.heat.getPlotItem().invertY(True)
        self.bar = colour_bar(values=(-1.0, 1.0), colorMap=CMAP, interactive=False,
                              width=14, label="weight")
        self.bar.setImageItem(self.image, insert_in=self.heat.getPlotItem())
        self._scale_items: list = []  # (box, label) of each matrix drawn to scale
        self.tabs = QTabWidget()
        self.tabs.addTab(self.heat, "Matrix")
        layout = QVBoxLayout(self)
        layout.addLayout(bar)
        layout.addWidget(self.note)
        layout.addWidget(self.tabs, 1)
        self.jobs = ViewJobs(engine, lambda m: self.note.setText(f"The matrix could not be read: {m}"),
                             status=session.set_status, title="Weight matrices")
        self._empty()
        session.on_pass(self.request_refresh)
        session.layerChanged.connect(lambda _: self._choices())
        session.nodeChanged.connect(self._follow)
        session.modelChanged.connect(self._forget)
        self._choices()
        self.later_soon()

    def build_later(self) -> None:
        """The matrices to scale and what the matrix did to the token: the tabs behind
        the matrix, each saying what fills it until a matrix is shown."""
        scale_plot = plot_widget()
        scale_plot.getPlotItem().invertY(True)
        scale_plot.getPlotItem().setAspectLocked(True)
        scale_plot.getPlotItem().getViewBox().sigResized.connect(self._place_to_scale)
        token_plot = plot_widget()
        token_plot.getPlotItem().addLegend(offset=(-10, 10))  # before the curves it names
        self.x_curve = token_plot.plot(pen=pg.mkPen("#3c78c8"), name="input x")
        self.y_curve = token_plot.plot(pen=pg.mkPen("#c0392b"), name="output y")
        self.scale_plot, self.token_plot = scale_plot, token_plot
        self.tabs.addTab(scale_plot, "To scale")
        self.tabs.addTab(token_plot, "This token")
        if self.matrix is None:  # else a matrix shown meanwhile drew them first (``_show``)
            self._empty_later()

    def _forget(self) -> None:
        """Another model: nothing known of its matrices yet."""
        self.matrix = None
        self._choices()

    def _order(self):
        info = self.session.model
        return order_of(info.config) if info is not None else "pre"

    def _choices(self) -> None:
        """The shown block's matrices, then the model's (the embeddings and the head)."""
        self.choice.blockSignals(True)
        kept = self.choice.currentData()
        self.choice.clear()
        if self.session.model is not None:
            layer, order = self.session.layer, self._order()
            names = [block_hook_name(layer, k) for k in block_matrices(order)] + list(model_matrices(order))
            for name in names:
                self.choice.addItem(f"{node_for_hook(name, order).label} ({name})", name)
            index = self.choice.findData(same_node_in_layer(kept, layer) if kept else None)
            self.choice.setCurrentIndex(max(0, index))
        self.choice.blockSignals(False)
        self.request_refresh()

    def _follow(self, name: str) -> None:
        """The selected node, when it has a matrix, is the one shown."""
        if has_matrix(name, self._order()):
            if layer_of(name) is not None and layer_of(name) != self.session.layer:
                return  # the layer change rebuilds the choices first
            index = self.choice.findData(name)
            if index >= 0 and index != self.choice.currentIndex():
                self.choice.setCurrentIndex(index)

    def redraw(self) -> None:
        name = self.choice.currentData()
        if name is None or self.session.model is None:
            self._empty()
            return
        current = self.session.current
        views = current.views if current is not None else None
        pos = -1 if current is None else 0 if current.one_position else len(current.pieces) - 1
        known = self.matrix if self.matrix is not None and self.matrix.node == name else None
        if known is None:
            self.note.setText(f"Reading {name}'s matrix…")
        self.jobs.run(lambda ctx: describe(ctx.model, name, views, pos, ctx.should_stop, known),
                      "weight matrix", finished=self._show)

    def _empty(self) -> None:
        set_empty(self.heat.getPlotItem(), CHOOSE)
        if self.built():  # else they are made empty
            self._empty_later()

    def _empty_later(self) -> None:
        set_empty(self.scale_plot.getPlotItem(), CHOOSE)
        set_empty(self.token_plot.getPlotItem(), "Run a prompt (Ctrl+Enter): what the matrix "
                                                 "did to the last token comes here")

    def _show(self, m) -> None:
        self.matrix = m
        out, inn = m.shape
        singular = ", ".join(f"{v:.3g}" for v in m.singular)
        bias = f" + bias {m.parameters - out * inn:,}" if m.bias else ""
        tied = " · the token embedding and the output head are this one matrix (tied)" \
            if m.tied and m.node in (TOKEN_EMBEDDING, LOGITS) else ""
        self.note.setText(f"<b>{m.parameter}</b>: stored as ({out:,}, {inn:,}) · "
                          f"{m.parameters:,} parameters ({out * inn:,}{bias}) · ‖W‖<sub>F</sub> "
                          f"{m.frobenius:.4g} · largest singular values {singular}{tied}")
        plot = self.heat.getPlotItem()
        set_empty(plot, None)
        level = float(np.nanmax(np.abs(m.image))) or 1.0
        self.image.setImage(m.image, levels=(-level, level))
        self.image.setRect(QRectF(0, 0, inn, out))
        self.bar.setLevels((-level, level))
        self.bar.show()
        cells = "" if m.cell == (1, 1) else f", cells: means of {m.cell[0]} × {m.cell[1]}"
        set_title(plot, f"{out:,} × {inn:,}{cells}")  # short: a long title squeezes the bar
        set_label(plot, "left", "output (row of W)")
        set_label(plot, "bottom", "input (column of W)")
        plot.autoRange()
        self._to_scale(m)
        self._token(m)

    def _to_scale(self, m) -> None:
        """Every matrix of the block (or the model) as a rectangle of its stored shape, side
        by side on one scale; the shown one filled."""
        plot = self.scale_plot.getPlotItem()
        plot.clear()
        set_empty(plot, None)
        for side in ("left", "bottom"):  # the rectangles are the scale
            plot.hideAxis(side)
        self._scale_items = []
        for key, (rows, cols) in m.others.items():
            rect = QGraphicsRectItem(0, 0, cols, rows)
            rect.setPen(QPen(QColor("#333333"), 0))
            rect.setBrush(QBrush(QColor("#ff8c00" if m.node.endswith(key) else "#cfd8e6")))
            plot.addItem(rect)
            order = self._order()
            node = node_for_hook(key if key in model_matrices(order) else block_hook_name(0, key), order)
            label = pg.TextItem(f"{node.label}\n{rows:,} × {cols:,}", color="#222222", anchor=(0, 0))
            plot.addItem(label)
            self._scale_items.append((rect, label))
        self._place_to_scale()
        set_title(plot, "to scale: rows × columns as stored")

    def _place_to_scale(self) -> None:
        """The boxes side by side at the largest scale at which they and their labels fit
        the plot as it is now (again after each resize: the labels keep their pixels)."""
        if not self._scale_items:
            return
        box = self.scale_plot.getPlotItem().getViewBox()
        shapes = [(r.rect().height(), r.rect().width()) for r, _ in self._scale_items]
        sizes = [(t.textItem.boundingRect().width(), t.textItem.boundingRect().height())
                 for _, t in self._scale_items]
        drawn = scale_layout(shapes, sizes, max(box.width(), 50.0), max(box.height(), 50.0))
        for (rect, label), x, y in zip(self._scale_items, drawn.xs, drawn.label_ys):
            rect.setPos(x, 0)
            label.setPos(x, y)
        box.setRange(xRange=(0, drawn.width), yRange=(0, drawn.height), padding=0)

    def _token(self, m) -> None:
        plot = self.token_plot.getPlotItem()
        if m.y is None:
            self.x_curve.setData([], [])
            self.y_curve.setData([], [])
            set_empty(plot, "Run a prompt (Ctrl+Enter): what the matrix did to the last token "
                            "comes here" if self.session.prompt is None else
                      f"{m.node} is one of attention's steps, not kept in this pass: tick "
                      "Attention steps above the graph to see what it did to the last token"
                      if inside_attention(m.node) else
                      f"{m.node} was not kept in this pass: run the prompt again to see it")
            return
        set_empty(plot, None)
        self.y_curve.setData(np.arange(m.y.size), m.y)
        if m.x is not None:
            self.x_curve.setData(np.arange(m.x.size), m.x)
        else:
            self.x_curve.setData([], [])
        x_size = "" if m.x is None else f"x ({m.x.size:,} values, ‖x‖ {np.linalg.norm(m.x):.3g}) → "
        set_title(plot, f"{x_size}y ({m.y.size:,} values, ‖y‖ {np.linalg.norm(m.y):.3g})")
        set_label(plot, "bottom", m.note or "value index")
        plot.autoRange()
