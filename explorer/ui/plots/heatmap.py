"""The inspector's heatmap: a tensor as tokens × features (or head · query × key for an
attention pattern), a diverging scale around 0 (a sequential one from 0 for weights), a
colour bar, row labels thinned so that they never overlap, padding rows left empty."""

from __future__ import annotations

import math

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import QRectF, Qt
from PySide6.QtGui import QBrush, QColor, QFontMetrics, QPen
from PySide6.QtWidgets import QGraphicsRectItem

from ...core.gpt.node_types import Kind, Width
from .plot_axes import colour_bar, plot_widget, position_ticks
from .plot_text import set_empty, set_label, set_ticks

AXES = {Width.EMB: "feature", Width.HIDDEN: "feature (of the feed-forward's hidden_dim)",
        Width.VOCAB: "vocabulary id", Width.CTX: "key token", Width.HEAD: "feature (of head_dim)",
        Width.KV_HEAD: "feature (of head_dim)"}
MASKED = "#b0b0b0"  # a masked score (−inf): drawn as masked, not as a colour of the scale


class Heatmap:
    def __init__(self) -> None:
        self.plot = plot_widget()
        self.image = pg.ImageItem(axisOrder="row-major")
        self.masked = QGraphicsRectItem()  # under the image: shows through masked cells
        self.masked.setBrush(QBrush(QColor(MASKED)))
        self.masked.setPen(QPen(Qt.NoPen))
        self.masked.setZValue(-1)
        self.masked.setVisible(False)
        self.plot.addItem(self.masked)
        self.plot.addItem(self.image)
        self.plot.invertY(True)
        self.bar = colour_bar(colorMap=pg.colormap.get("CET-D1"), interactive=False)
        self.bar.setImageItem(self.image, insert_in=self.plot.getPlotItem())
        self.plot.getViewBox().sigResized.connect(self._fit_labels)
        self.labels: list[str] = []

    def draw(self, view, matrix, labels: list[str], real) -> None:
        """``view`` a NodeView; ``matrix`` its rows × features; ``real`` the rows that
        are not padding (None: all)."""
        plot = self.plot.getPlotItem()
        if matrix is None:
            self.image.clear()
            set_empty(plot, "The tensor was not kept: statistics only")
            return
        set_empty(plot, None)
        if view.node.kind == Kind.PATTERN:  # probabilities: a sequential scale from 0
            levels, cmap = (0.0, max(float(np.nanmax(matrix)), 1e-6)), pg.colormap.get("viridis")
        else:
            level = view.stats.absmax if np.isfinite(view.stats.absmax) and view.stats.absmax else 1.0
            levels, cmap = (-level, level), pg.colormap.get("CET-D1")  # diverging around 0
        set_label(plot, "left", "head · query token" if view.node.per_head else "token")
        masked = ~np.isfinite(matrix)
        self.masked.setRect(QRectF(0, 0, matrix.shape[1], matrix.shape[0]))
        self.masked.setVisible(bool(masked.any()))
        if masked.any():  # transparent over a grey ground: masked, not a colour of the scale
            matrix = np.where(masked, np.nan, matrix)
        set_label(plot, "bottom", AXES.get(view.node.width, "feature"))
        if real is not None:  # padding rows drawn empty (NaN is transparent)
            matrix = np.where(real[:, None], matrix, np.nan)
        self.image.setColorMap(cmap)
        self.bar.setColorMap(cmap)
        self.image.setImage(np.ascontiguousarray(matrix, dtype=np.float32), levels=levels,
                            autoDownsample=True)
        self.bar.setLevels(levels)
        set_ticks(self.plot.getAxis("bottom"), position_ticks(matrix.shape[1])
                  if view.node.width == Width.CTX else None)
        self.labels = labels
        self._fit_labels()
        self.plot.autoRange()

    def clear(self, message: str) -> None:
        self.image.clear()
        set_empty(self.plot.getPlotItem(), message)

    def focus(self, row: int) -> None:
        self.plot.setYRange(row - 0.5, row + 1.5, padding=0)

    def _fit_labels(self) -> None:
        """Every k-th row label, so that the shown ones never overlap."""
        if not self.labels:
            return
        axis = self.plot.getAxis("left")
        line = QFontMetrics(axis.font()).height()
        height = max(1.0, self.plot.getViewBox().height())
        step = max(1, math.ceil(len(self.labels) * line / height))
        set_ticks(axis, [[(i + 0.5, lab) for i, lab in enumerate(self.labels)][::step]])
