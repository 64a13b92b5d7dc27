"""Attention patterns of the selected layer: every head as a tokens x tokens heatmap
(query rows, key columns; the causal mask shows as the empty upper triangle), or one
head large with token labels; hovering shows the weight."""

from __future__ import annotations

import numpy as np
import pyqtgraph as pg
from PySide6.QtWidgets import QComboBox, QHBoxLayout, QLabel, QVBoxLayout, QWidget

from ..core.nodes import PATTERN, block_hook_name
from .lazy import LazyRefresh
from .session import Session

CMAP = pg.colormap.get("inferno")
GRID_CELLS = 400_000  # cells in the all-heads mosaic at most (a dock is ~600 pixels wide)


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
    # rows first (a reduction over a middle axis runs along contiguous memory), then
    # strided maxima over the columns (numpy's max over a short last axis is slow)
    rows = w.reshape(size // factor, factor, size).max(axis=1)
    out = rows[:, 0::factor].copy()
    for i in range(1, factor):
        np.maximum(out, rows[:, i::factor], out=out)
    return out


def mosaic(tiles: list[np.ndarray], columns: int, gap: int) -> np.ndarray:
    """Square tiles side by side, ``columns`` per row, ``gap`` NaN cells (drawn
    transparent) between them: one image instead of one plot per head."""
    n = tiles[0].shape[0]
    rows = -(-len(tiles) // columns)
    out = np.full((rows * (n + gap) - gap, columns * (n + gap) - gap), np.nan, dtype=np.float32)
    for i, tile in enumerate(tiles):
        r, c = divmod(i, columns)
        out[r * (n + gap): r * (n + gap) + n, c * (n + gap): c * (n + gap) + n] = tile
    return out


class AttentionView(LazyRefresh, QWidget):
    """One plot and one image: every head as a tile of a mosaic, or one head large.
    Nothing is rebuilt on a new pass (a pyqtgraph plot takes ~15 ms to make)."""

    def __init__(self, session: Session, engine=None) -> None:
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
        self.canvas = pg.PlotWidget(background="w")
        self.plot = self.canvas.getPlotItem()
        self.plot.invertY(True)
        self.plot.setAspectLocked(True)
        self.image = pg.ImageItem(axisOrder="row-major")
        self.image.setColorMap(CMAP)
        self.plot.addItem(self.image)
        self.message = pg.TextItem(color="#333333")
        self.plot.addItem(self.message)
        self.labels: list[pg.TextItem] = []  # "head h" over each tile
        self.pattern: np.ndarray | None = None
        self.pieces: list[str] = []
        self.shown_heads: list[int] = []
        self._grid = (1, 1, 1, 0)  # columns, tile cells, weights per cell, gap
        self.canvas.scene().sigMouseMoved.connect(self._moved)
        layout = QVBoxLayout(self)
        layout.addLayout(bar)
        layout.addWidget(self.canvas, 1)
        session.on_pass(self.request_refresh)
        session.layerChanged.connect(self.request_refresh)
        session.modelChanged.connect(self._heads)
        self._heads()  # a view made after the model loaded starts from it

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
        view = prompt.views.get(block_hook_name(self.session.layer, PATTERN)) if prompt else None
        if view is None or view.array is None:
            self.pattern, self.shown_heads = None, []
            self.image.clear()
            self._set_labels([])
            self.message.setText("Run a prompt to see the attention patterns "
                                 "(they are captured for the prompt pass).")
            return
        self.message.setText("")
        sample = self._sample(prompt)
        self.pattern = view.array[sample]  # (H, T, T)
        heads, T = self.pattern.shape[0], self.pattern.shape[-1]
        self.pieces = pieces = prompt.sample_pieces(sample)
        choice = self.head_box.currentIndex()
        self.shown_heads = list(range(heads)) if choice <= 0 else [choice - 1]
        left, bottom = self.plot.getAxis("left"), self.plot.getAxis("bottom")
        if len(self.shown_heads) == 1:
            h = self.shown_heads[0]
            self._grid = (1, T, 1, 0)
            self.image.setImage(np.asarray(self.pattern[h], dtype=np.float32), levels=(0.0, 1.0))
            ticks = [(t + 0.5, repr(p)) for t, p in enumerate(pieces)]
            step = max(1, len(ticks) // 25)
            left.setTicks([ticks[::step]])
            bottom.setTicks([ticks[::step]])
            self.plot.setLabel("left", "query token")
            self.plot.setLabel("bottom", "key token")
            self.plot.showAxis("left")
            self.plot.showAxis("bottom")
            self._set_labels([])
            self.plot.setTitle(f"head {h}")
        else:
            side = max(64, int(np.sqrt(GRID_CELLS / len(self.shown_heads))))  # a tile's cells
            factor = 1
            while -(-T // factor) > side:  # powers of two: 1024 tokens divide evenly
                factor *= 2
            tiles = [block_max(self.pattern[h], factor) for h in self.shown_heads]
            n = tiles[0].shape[0]
            columns = int(np.ceil(np.sqrt(len(tiles))))
            gap = max(1, n // 12)
            self._grid = (columns, n, factor, gap)
            self.image.setImage(mosaic(tiles, columns, gap), levels=(0.0, 1.0))
            self.plot.hideAxis("left")
            self.plot.hideAxis("bottom")
            self.plot.setTitle("")
            # each label inside its tile's top-right corner, over the masked future (always
            # zero in a causal pattern), so it neither hides weights nor runs into the row
            # above when the tiles are small
            self._set_labels([(f"head {h}", (i % columns) * (n + gap) + n, (i // columns) * (n + gap))
                              for i, h in enumerate(self.shown_heads)])
        self.plot.autoRange(padding=0.02)
        note = "" if current is None or current.step is None else " (prompt pass; steps carry no patterns)"
        factor = self._grid[2]
        shrunk = f"; each cell is the max of {factor}×{factor} weights" if factor > 1 else ""
        self.hover.setText(f"layer {self.session.layer}{note}{shrunk}")

    def _set_labels(self, labels: list[tuple[str, float, float]]) -> None:
        while len(self.labels) < len(labels):
            item = pg.TextItem(color="#f0f0f0", anchor=(1, 0), fill=(40, 40, 40, 170))
            self.plot.addItem(item)
            self.labels.append(item)
        for i, item in enumerate(self.labels):
            if i < len(labels):
                text, x, y = labels[i]
                item.setText(text)
                item.setPos(x, y)
                item.show()
            else:
                item.hide()

    def tile(self, head: int) -> np.ndarray | None:
        """The cells drawn for ``head`` (what the mosaic or the large view shows)."""
        if head not in self.shown_heads or self.image.image is None:
            return None
        columns, n, _, gap = self._grid
        r, c = divmod(self.shown_heads.index(head), columns)
        return self.image.image[r * (n + gap): r * (n + gap) + n, c * (n + gap): c * (n + gap) + n]

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
        if self.pattern is None or not self.shown_heads:
            return
        p = self.plot.getViewBox().mapSceneToView(pos)
        columns, n, factor, gap = self._grid
        x, y = int(np.floor(p.x())), int(np.floor(p.y()))
        if x < 0 or y < 0:
            return
        c, kx = divmod(x, n + gap)
        r, qy = divmod(y, n + gap)
        i = r * columns + c
        if kx >= n or qy >= n or c >= columns or i >= len(self.shown_heads):
            return
        h, T = self.shown_heads[i], self.pattern.shape[-1]
        q, k = qy * factor, kx * factor  # a cell's first query and key
        if q < T and k < T:
            pieces = self.pieces
            what = "" if factor == 1 else f" (cell max {self.tile(h)[qy, kx]:.4f})"
            self.hover.setText(f"head {h}: query {q} {pieces[q]!r} → key {k} {pieces[k]!r}: "
                               f"weight {self.pattern[h, q, k]:.4f}{what}")
