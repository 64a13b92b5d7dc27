"""Attention patterns of the selected layer: every head as a tokens x tokens heatmap
(query rows, key columns; the causal mask shows as the empty upper triangle), or one
head large with token labels; hovering shows the weight."""

from __future__ import annotations

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import Qt
from PySide6.QtWidgets import QComboBox, QHBoxLayout, QLabel, QVBoxLayout, QWidget

from ..core.nodes import block_hook_name
from .lazy import LazyRefresh
from .session import Session

CMAP = pg.colormap.get("inferno")
GRID_PIXELS = 256  # a head in the all-heads grid is drawn at most this many cells wide


def block_max(weights: np.ndarray, factor: int) -> np.ndarray:
    """(T, T) weights shrunk by ``factor`` in both directions, each cell the largest
    weight of its block, so a sharp attention peak still shows in a small image."""
    w = np.asarray(weights, dtype=np.float32)
    if factor <= 1:
        return w
    T = w.shape[-1]
    size = -(-T // factor) * factor
    if size != T:
        padded = np.zeros((size, size), dtype=np.float32)
        padded[:T, :T] = w
        w = padded
    # strided maxima (numpy's max over a short axis is ten times slower)
    cols = w[:, 0::factor].copy()
    for i in range(1, factor):
        np.maximum(cols, w[:, i::factor], out=cols)
    out = cols[0::factor].copy()
    for i in range(1, factor):
        np.maximum(out, cols[i::factor], out=out)
    return out


class AttentionView(LazyRefresh, QWidget):
    def __init__(self, session: Session) -> None:
        super().__init__()
        self.session = session
        self.head_box = QComboBox()
        self.head_box.currentIndexChanged.connect(self.request_refresh)
        self.sample_box = QComboBox()  # a batch's samples; hidden for one prompt
        self.sample_box.setToolTip("Which prompt of the batch")
        self.sample_box.currentIndexChanged.connect(self.request_refresh)
        self.sample_box.setVisible(False)
        self.hover = QLabel("Hover a cell to read its weight")
        bar = QHBoxLayout()
        bar.addWidget(QLabel("Heads:"))
        bar.addWidget(self.head_box)
        bar.addWidget(self.sample_box)
        bar.addStretch(1)
        bar.addWidget(self.hover)
        self.canvas = pg.GraphicsLayoutWidget()
        self.canvas.setBackground("w")
        self.images: list[tuple[pg.ImageItem, int]] = []
        self.pattern: np.ndarray | None = None
        self.pieces: list[str] = []
        self.plots: list[tuple[pg.PlotItem, pg.ImageItem]] = []
        self._key = None  # the arrangement the plots were built for
        self.canvas.scene().sigMouseMoved.connect(self._moved)
        layout = QVBoxLayout(self)
        layout.addLayout(bar)
        layout.addWidget(self.canvas, 1)
        session.on_pass(self.request_refresh)
        session.layerChanged.connect(self.request_refresh)
        session.modelChanged.connect(self._heads)

    def _heads(self) -> None:
        self.head_box.blockSignals(True)
        self.head_box.clear()
        if self.session.model is not None:
            self.head_box.addItem("all heads")
            self.head_box.addItems([f"head {h}" for h in range(self.session.model.config.n_heads)])
        self.head_box.blockSignals(False)

    def redraw(self) -> None:
        current = self.session.current
        prompt = self.session.prompt
        view = prompt.views.get(block_hook_name(self.session.layer, "att.attn_weights")) if prompt else None
        if view is None or view.array is None:
            self.pattern = None
            self._layout(None)
            self.canvas.addLabel("Run a prompt to see the attention patterns "
                                 "(they are captured for the prompt pass).", color="#333333")
            return
        sample = self._sample(prompt)
        self.pattern = view.array[sample]  # (H, T, T)
        heads, T = self.pattern.shape[0], self.pattern.shape[-1]
        self.pieces = pieces = prompt.sample_pieces(sample)
        choice = self.head_box.currentIndex()
        shown = list(range(heads)) if choice <= 0 else [choice - 1]
        self._layout(shown)
        factor = 1 if len(shown) == 1 else max(1, -(-T // GRID_PIXELS))
        for (plot, image), h in zip(self.plots, shown):
            image.setImage(block_max(self.pattern[h], factor), levels=(0.0, 1.0))
            image.setRect(0, 0, T, T)  # token coordinates, whatever the resolution
            plot.setTitle(f"head {h}")
            if len(shown) == 1:
                ticks = [(t + 0.5, repr(p)) for t, p in enumerate(pieces)]
                step = max(1, len(ticks) // 25)
                plot.getAxis("left").setTicks([ticks[::step]])
                plot.getAxis("bottom").setTicks([ticks[::step]])
            plot.setRange(xRange=(0, T), yRange=(0, T), padding=0.02)
        self.images = [(image, h) for (_, image), h in zip(self.plots, shown)]
        note = "" if current is None or current.step is None else " (prompt pass; steps carry no patterns)"
        shrunk = f"; each cell of the grid is the max of {factor}×{factor} weights" if factor > 1 else ""
        self.hover.setText(f"layer {self.session.layer}{note}{shrunk}")

    def _layout(self, shown: list[int] | None) -> None:
        """Build the plots only when the arrangement changes (a pyqtgraph plot takes
        ~15 ms to make): a new pass or layer reuses them and replaces the images."""
        key = None if shown is None else (len(shown), len(shown) == 1)
        if key == self._key and shown is not None:
            return
        self._key = key
        self.canvas.clear()
        self.plots, self.images = [], []
        if shown is None:
            return
        columns = int(np.ceil(np.sqrt(len(shown))))
        for i in range(len(shown)):
            plot = self.canvas.addPlot(row=i // columns, col=i % columns)
            plot.invertY(True)
            plot.setAspectLocked(True)
            image = pg.ImageItem(axisOrder="row-major")
            image.setColorMap(CMAP)
            plot.addItem(image)
            if len(shown) == 1:
                plot.setLabel("left", "query token")
                plot.setLabel("bottom", "key token")
            else:
                plot.hideAxis("left")
                plot.hideAxis("bottom")
            self.plots.append((plot, image))

    def _sample(self, prompt) -> int:
        """The chosen sample of a batch (0 for one prompt); refills the choice box."""
        batch = prompt.batch
        size = batch.size if batch is not None else 1
        if self.sample_box.count() != size:
            self.sample_box.blockSignals(True)
            self.sample_box.clear()
            self.sample_box.addItems([f"sample {b} ({n} tokens)" for b, n in
                                      enumerate(batch.lengths if batch else [len(prompt.ids)])])
            self.sample_box.blockSignals(False)
        self.sample_box.setVisible(size > 1)
        return max(0, min(self.sample_box.currentIndex(), size - 1))

    def _moved(self, pos) -> None:
        if self.pattern is None:
            return
        for image, h in self.images:
            if image.sceneBoundingRect().contains(pos):
                p = image.getViewBox().mapSceneToView(pos)  # token coordinates
                q, k = int(p.y()), int(p.x())
                t = self.pattern.shape[-1]
                if 0 <= q < t and 0 <= k < t:
                    pieces = self.pieces
                    self.hover.setText(f"head {h}: query {q} {pieces[q]!r} → key {k} {pieces[k]!r}: "
                                       f"weight {self.pattern[h, q, k]:.4f}")
                return
