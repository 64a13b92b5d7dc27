"""Attention's matrices of the selected layer: the weights (the pattern), the scores
Q·Kᵀ or the masked scores, every head as a tokens x tokens heatmap (query rows, key
columns) or one head large; token labels on both axes (every k-th, so that they never
overlap), a colour bar (0 to 1 for weights, around 0 for scores), masked scores drawn
grey as masked, not as a colour; hovering reads a cell, a click picks the query whose
row is drawn below (the weights' sum, the scores' dot products)."""

from __future__ import annotations

import math

import numpy as np
import pyqtgraph as pg
from PySide6.QtGui import QFontMetrics
from PySide6.QtWidgets import (QComboBox, QHBoxLayout, QLabel, QSizePolicy, QTabWidget,
                               QVBoxLayout, QWidget)

from ...plots.plot_axes import bar_plot, colour_bar, plot_widget
from ...plots.tiles import block_max, mosaic
from ....core.gpt.nodes import (MASKED_SCORES, PATTERN, SCORES, block_hook_name, block_title,
                                 parse_hook)
from ...graph.attention_opener import opener_for
from ...base.later import BuiltLater
from ...base.lazy import LazyRefresh
from ...plots.plot_text import fitted_names, set_empty, set_label, set_ticks, set_title
from ...base.session import Session
from ...base.view_jobs import EngineLike

CMAP = pg.colormap.get("inferno")
SCORE_CMAP = pg.colormap.get("CET-D1")  # scores: diverging around 0
MATRICES = {"weights (softmax)": PATTERN, "scores Q·Kᵀ": SCORES, "masked scores": MASKED_SCORES}
MASKED_GREY = 176  # a masked cell's grey
LABEL_CHARS = 10  # a token label's characters at most (its repr, cut with "…")
EMPTY = "Run a prompt (Ctrl+Enter) to see the attention patterns"
GRID_CELLS = 400_000  # cells in the all-heads mosaic at most (a dock is ~600 pixels wide)


def token_label(piece: str) -> str:
    text = repr(piece)
    return text if len(text) <= LABEL_CHARS else text[:LABEL_CHARS - 1] + "…"


def tick_step(cell_px: float, need_px: float) -> int:
    """Label every k-th cell so that each label has ``need_px`` pixels of its own."""
    return max(1, math.ceil(need_px / max(cell_px, 1e-9)))


class AttentionView(BuiltLater, LazyRefresh, QWidget):
    LATER = ("row_canvas", "row_plot", "row_bars")  # the query row's tab (base/later.py)

    """One plot and one image: every head as a tile of a mosaic, or one head large.
    Nothing is rebuilt on a new pass (a pyqtgraph plot takes ~15 ms to make)."""

    def __init__(self, session: Session, engine: EngineLike) -> None:
        super().__init__()
        self.session = session
        bar = self._bar()
        self.opener = opener_for(session, engine)
        self.query: int | None = None  # the query whose row is drawn (None: the last)
        self.canvas = plot_widget()
        self.plot = self.canvas.getPlotItem()
        self.plot.invertY(True)
        self.plot.setAspectLocked(True)
        self.ground = pg.ImageItem(axisOrder="row-major")  # grey under masked cells
        self.ground.setZValue(-1)
        self.plot.addItem(self.ground)
        self.image = pg.ImageItem(axisOrder="row-major")
        self.image.setColorMap(CMAP)
        self.plot.addItem(self.image)
        self.color_bar = colour_bar(values=(0.0, 1.0), colorMap=CMAP, interactive=False,
                                    width=14, label="attention weight")
        self.color_bar.setImageItem(self.image, insert_in=self.plot)
        self.plot.getViewBox().sigResized.connect(self._fit_ticks)
        self.labels: list[pg.TextItem] = []  # "head h" over each tile
        self.pattern: np.ndarray | None = None  # the shown matrix, (H, T, T)
        self.key, self.levels = PATTERN, (0.0, 1.0)
        self.pieces: list[str] = []
        self.shown_heads: list[int] = []
        self._grid = (1, 1, 1, 0)  # columns, tile cells, weights per cell, gap
        self.canvas.scene().sigMouseMoved.connect(self._moved)
        self.canvas.scene().sigMouseClicked.connect(self._clicked)
        self.tabs = QTabWidget()  # the matrices, and the picked query's row: each its room
        self.tabs.addTab(self.canvas, "Matrices")
        layout = QVBoxLayout(self)
        layout.addLayout(bar)
        layout.addWidget(self.tabs, 1)
        session.on_pass(self.request_refresh)
        session.layerChanged.connect(self.request_refresh)
        session.nodeChanged.connect(self._follow)
        session.modelChanged.connect(self._heads)
        self._heads()  # a view made after the model loaded starts from it
        self.later_soon()

    def build_later(self) -> None:
        """The picked query's row over the keys: the tab behind the matrices."""
        self.row_canvas, self.row_bars = bar_plot("#3c78c8")
        self.row_plot = self.row_canvas.getPlotItem()
        self._row(None)
        self.tabs.addTab(self.row_canvas, "Query row")
        self.tabs.setTabToolTip(1, "One query's row over its keys, for the first head shown: "
                                   "click a cell of the matrices to pick the query")

    def _bar(self) -> QHBoxLayout:
        """Matrix, heads, sample, and the line a hovered cell is read on."""
        self.head_box = QComboBox()
        self.head_box.currentIndexChanged.connect(self.request_refresh)
        self.sample_box = QComboBox()  # a batch's samples; hidden for one prompt
        self.sample_box.setToolTip("Which prompt of the batch")
        self.sample_box.currentIndexChanged.connect(self.request_refresh)
        self.sample_box.setVisible(False)
        self.hover = QLabel("Hover a cell to read its weight")
        # what it says may be longer than the bar: cut, never widening the view
        self.hover.setSizePolicy(QSizePolicy.Ignored, QSizePolicy.Preferred)
        self.matrix_box = QComboBox()
        self.matrix_box.addItems(list(MATRICES))
        self.matrix_box.setToolTip("Which matrix: the weights after softmax, the scores Q·Kᵀ, "
                                   "or the scores after the causal mask (the book's order)")
        self.matrix_box.currentIndexChanged.connect(self.request_refresh)
        bar = QHBoxLayout()
        bar.addWidget(self.matrix_box)
        bar.addWidget(QLabel("Heads:"))
        bar.addWidget(self.head_box)
        bar.addWidget(self.sample_box)
        bar.addWidget(self.hover, 1)
        return bar

    def _follow(self, name: str) -> None:
        """A click on the scores, the masked scores or the pattern shows that matrix."""
        key = parse_hook(name)[1]
        for text, matrix in MATRICES.items():
            if matrix == key and self.matrix_box.currentText() != text:
                self.matrix_box.setCurrentText(text)  # and redraws

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
        key = MATRICES[self.matrix_box.currentText()]
        name = block_hook_name(self.session.layer, key)
        view = prompt.views.get(name) if prompt else None
        why = None
        if (view is None or view.array is None) and prompt is not None:  # the pass did not keep it
            why = self.opener.want(self.session.layer, prompt, steps=key != PATTERN)
        if view is None or view.array is None:
            self.pattern, self.shown_heads = None, []
            for image in (self.image, self.ground):
                image.clear()
            self._set_labels([])
            self.color_bar.hide()
            set_title(self.plot, "")
            set_empty(self.plot, EMPTY if prompt is None else why or "Opening attention…")
            self._row(None)
            return
        set_empty(self.plot, None)
        self.color_bar.show()
        sample = self._sample(prompt)
        self.pattern = view.array[sample]  # (H, T, T)
        self.key = key
        self._scale(key)
        heads, T = self.pattern.shape[0], self.pattern.shape[-1]
        self.pieces = prompt.sample_pieces(sample)
        # Axis sizes fixed by the longest label: new ticks then never resize the plot,
        # whose resize would ask for new ticks again (a relayout on every loop turn).
        metrics = QFontMetrics(self.plot.getAxis("left").font())
        # each query named with its position: a key too narrow for its token is numbered
        self._tokens = [token_label(p) for p in self.pieces]
        self._labels = [f"{i} {t}" for i, t in enumerate(self._tokens)]
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
        note = "" if current is None or not current.one_position else " (the prompt pass's)"
        factor = self._grid[2]
        shrunk = f"; each cell is the max of {factor}×{factor} weights" if factor > 1 else ""
        info = self.session.model
        self.hover.setText(f"{block_title(self.session.layer, info.config.n_layers) if info else ''}"
                           f"{note}{shrunk}")
        self._row(self.query if self.query is not None and self.query < T else T - 1)

    def _scale(self, key: str) -> None:
        """Weights from 0 to 1; scores on a diverging scale around 0, as large as the
        largest finite one (the masked −inf have no colour: they are drawn grey)."""
        if key == PATTERN:
            self.levels, cmap, words = (0.0, 1.0), CMAP, "attention weight"
        else:
            finite = self.pattern[np.isfinite(self.pattern)]
            top = float(np.abs(finite).max()) if finite.size else 1.0
            self.levels, cmap, words = (-top, top), SCORE_CMAP, \
                "score q·k" if key == SCORES else "masked score (grey: −inf)"
        self.image.setColorMap(cmap)
        self.color_bar.setColorMap(cmap)
        self.color_bar.setLevels(self.levels)
        self.color_bar.getAxis("left").setLabel(words)  # where the bar keeps its label

    def _show(self, matrix: np.ndarray) -> None:
        """The matrix on its scale, masked cells transparent over the grey ground."""
        masked = np.isneginf(matrix)
        self.image.setImage(np.where(masked, np.nan, matrix).astype(np.float32), levels=self.levels)
        ground = np.where(np.isnan(matrix) & ~masked, np.nan, float(MASKED_GREY))
        self.ground.setImage(ground.astype(np.float32), levels=(0.0, 255.0))

    def _row(self, q: int | None) -> None:
        """The picked query's row for the first head shown: over every key, its weights
        (and their sum) or its scores (each q·k)."""
        plot = self.row_plot
        if q is None or self.pattern is None or not self.shown_heads:
            self.row_bars.setOpts(x=[], height=[])
            set_title(plot, "")
            set_empty(plot, "Run a prompt (Ctrl+Enter), then click a cell: its query's row "
                            "over the keys comes here")
            return
        set_empty(plot, None)
        h = self.shown_heads[0]
        row = np.asarray(self.pattern[h, q], dtype=np.float64)
        seen = np.isfinite(row)
        self.row_bars.setOpts(x=np.arange(row.size)[seen], height=row[seen], width=0.8)
        piece = token_label(self.pieces[q]) if q < len(self.pieces) else ""
        if self.key == PATTERN:
            what = f"sum {row.sum():.4f}"
        else:
            what = "q·k per key" if self.key == SCORES else \
                f"{int(seen.sum())} kept, {int((~seen).sum())} masked"
        set_title(plot, f"head {h}, query {q} {piece}: {what}")
        set_label(plot, "bottom", {PATTERN: "key token (weights after softmax)",
                                   SCORES: "key token (q · k, before the mask)"}.get(
                                       self.key, "key token (later keys masked to −inf: no bar)"))
        fitted_names(plot, self._tokens[:row.size])  # every key whose label has room
        plot.setXRange(-0.6, row.size - 0.4, padding=0)
        plot.enableAutoRange(axis="y")
    def _one_head(self, h: int, T: int) -> None:
        """One head's pattern at full resolution."""
        self._grid = (1, T, 1, 0)
        self._show(np.asarray(self.pattern[h], dtype=np.float32))
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
        self._show(mosaic(tiles, columns, gap))
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
        keys = labels
        if kx > 1:  # the keys' tokens do not fit each column: their positions do
            keys = [str(i) for i in range(T)]
            kx = tick_step(box.width() / rect.width(), metrics.horizontalAdvance(str(T - 1)) + 8)
        word = "key token" if keys is labels else "key position (= the query row of that number)"
        set_label(self.plot, "bottom", word + (", columns of each head" if columns > 1 or
                                               len(self.shown_heads) > 1 else ""))

        def ticks(names: list[str], tiles: int, k: int) -> list[tuple[float, str]]:
            return [(t * (n + gap) + i + 0.5, names[i * factor])
                    for t in range(tiles) for i in range(0, n, k) if i * factor < T]

        set_ticks(self.plot.getAxis("left"), [ticks(labels, rows, ky)])
        set_ticks(self.plot.getAxis("bottom"), [ticks(keys, min(columns, len(self.shown_heads)), kx)])

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
            word = {PATTERN: "weight", SCORES: "score"}.get(self.key, "masked score")
            self.hover.setText(f"head {h}: query {q} {pieces[q]!r} → key {k} {pieces[k]!r}: "
                               f"{word} {self.pattern[h, q, k]:.4f}{what}")

    def _clicked(self, event) -> None:
        """A click on a cell picks its query: its row is drawn below."""
        if self.pattern is None or not self.shown_heads:
            return
        p = self.plot.getViewBox().mapSceneToView(event.scenePos())
        columns, n, factor, gap = self._grid
        y = int(np.floor(p.y()))
        if y >= 0 and y % (n + gap) < n:
            self.query = min((y % (n + gap)) * factor, self.pattern.shape[-1] - 1)
            self._row(self.query)
            self.tabs.setTabText(1, f"Query row: {self.query}")
