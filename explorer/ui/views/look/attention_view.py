"""Attention patterns of the selected layer: every head as a tokens x tokens heatmap
(query rows, key columns; the causal mask shows as the empty upper triangle), or one
head large; token labels on both axes (every k-th, so that they never overlap), a colour
bar from 0 to 1, and hovering shows the weight."""

from __future__ import annotations

import math

import numpy as np
import pyqtgraph as pg
from PySide6.QtGui import QFontMetrics
from PySide6.QtWidgets import QComboBox, QHBoxLayout, QLabel, QVBoxLayout, QWidget

from ...plots.plot_axes import plot_widget
from ....core.gpt.nodes import PATTERN, block_hook_name, block_title
from ...base.lazy import LazyRefresh
from ...plots.plot_text import set_empty, set_label, set_ticks, set_title
from ...base.session import Session
from ...base.view_jobs import EngineLike

CMAP = pg.colormap.get("inferno")
LABEL_CHARS = 10  # a token label's characters at most (its repr, cut with "…")
EMPTY = "Run a prompt (Ctrl+Enter) to see the attention patterns"
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


def token_label(piece: str) -> str:
    text = repr(piece)
    return text if len(text) <= LABEL_CHARS else text[:LABEL_CHARS - 1] + "…"


def tick_step(cell_px: float, need_px: float) -> int:
    """Label every k-th cell so that each label has ``need_px`` pixels of its own."""
    return max(1, math.ceil(need_px / max(cell_px, 1e-9)))


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

    def __init__(self, session: Session, engine: EngineLike) -> None:
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
        self.canvas = plot_widget()
        self.plot = self.canvas.getPlotItem()
        self.plot.invertY(True)
        self.plot.setAspectLocked(True)
        self.image = pg.ImageItem(axisOrder="row-major")
        self.image.setColorMap(CMAP)
        self.plot.addItem(self.image)
        self.color_bar = pg.ColorBarItem(values=(0.0, 1.0), colorMap=CMAP, interactive=False,
                                         width=14, label="attention weight")
        self.color_bar.setImageItem(self.image, insert_in=self.plot)
        self.plot.getViewBox().sigResized.connect(self._fit_ticks)
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
            self.color_bar.hide()
            set_title(self.plot, "")
            set_empty(self.plot, EMPTY)
            return
        set_empty(self.plot, None)
        self.color_bar.show()
        sample = self._sample(prompt)
        self.pattern = view.array[sample]  # (H, T, T)
        heads, T = self.pattern.shape[0], self.pattern.shape[-1]
        self.pieces = prompt.sample_pieces(sample)
        # Axis sizes fixed by the longest label: new ticks then never resize the plot,
        # whose resize would ask for new ticks again (a relayout on every loop turn).
        metrics = QFontMetrics(self.plot.getAxis("left").font())
        self._labels = [token_label(p) for p in self.pieces]
        self._label_px = max((metrics.horizontalAdvance(t) for t in self._labels), default=10) + 8
        self.plot.getAxis("left").setWidth(self._label_px + 28)  # and the axis title
        self.plot.getAxis("bottom").setHeight(metrics.height() + 34)
        choice = self.head_box.currentIndex()
        self.shown_heads = list(range(heads)) if choice <= 0 else [choice - 1]
        if len(self.shown_heads) == 1:
            self._one_head(self.shown_heads[0], T)
        else:
            self._all_heads(T)
        self.plot.autoRange(padding=0.02)
        self._fit_ticks()
        note = "" if current is None or not current.one_position else \
            " (prompt pass: a step from the KV cache carries no pattern)"
        factor = self._grid[2]
        shrunk = f"; each cell is the max of {factor}×{factor} weights" if factor > 1 else ""
        info = self.session.model
        self.hover.setText(f"{block_title(self.session.layer, info.config.n_layers) if info else ''}"
                           f"{note}{shrunk}")

    def _one_head(self, h: int, T: int) -> None:
        """One head's pattern at full resolution."""
        self._grid = (1, T, 1, 0)
        self.image.setImage(np.asarray(self.pattern[h], dtype=np.float32), levels=(0.0, 1.0))
        self._set_labels([])
        set_title(self.plot, f"head {h}")
        set_label(self.plot, "left", "query token")
        set_label(self.plot, "bottom", "key token")

    def _all_heads(self, T: int) -> None:
        """Every head as a tile of one mosaic; past ~180 tokens a cell is the largest
        weight of its block, so sharp peaks stay visible."""
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
        set_title(self.plot, f"all {len(tiles)} heads")
        set_label(self.plot, "left", "query token (rows of each head)")
        set_label(self.plot, "bottom", "key token (columns of each head)")
        # each label inside its tile's top-right corner, over the masked future (always
        # zero in a causal pattern), so it neither hides weights nor runs into the row
        # above when the tiles are small
        self._set_labels([(f"head {h}", (i % columns) * (n + gap) + n, (i // columns) * (n + gap))
                          for i, h in enumerate(self.shown_heads)])

    def _fit_ticks(self, *_args) -> None:
        """Token labels on both axes, for every tile row and column, every k-th cell so
        that no two labels overlap at the plot's present size."""
        if self.pattern is None:
            return
        columns, n, factor, gap = self._grid
        rows = -(-len(self.shown_heads) // columns)
        box = self.plot.getViewBox()
        rect = box.viewRect()
        if rect.width() <= 0 or rect.height() <= 0:
            return
        metrics = QFontMetrics(self.plot.getAxis("bottom").font())
        labels = self._labels
        ky = tick_step(box.height() / rect.height(), metrics.height())
        kx = tick_step(box.width() / rect.width(), self._label_px)
        T = len(labels)

        def ticks(tiles: int, k: int) -> list[tuple[float, str]]:
            return [(t * (n + gap) + i + 0.5, labels[i * factor])
                    for t in range(tiles) for i in range(0, n, k) if i * factor < T]

        set_ticks(self.plot.getAxis("left"), [ticks(rows, ky)])
        set_ticks(self.plot.getAxis("bottom"), [ticks(min(columns, len(self.shown_heads)), kx)])

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
