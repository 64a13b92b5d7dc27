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
        self.canvas.scene().sigMouseMoved.connect(self._moved)
        layout = QVBoxLayout(self)
        layout.addLayout(bar)
        layout.addWidget(self.canvas, 1)
        session.passChanged.connect(self.request_refresh, Qt.QueuedConnection)
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
        self.canvas.clear()
        self.images.clear()
        current = self.session.current
        prompt = self.session.prompt
        view = prompt.views.get(block_hook_name(self.session.layer, "att.attn_weights")) if prompt else None
        if view is None or view.array is None:
            self.pattern = None
            self.canvas.addLabel("Run a prompt to see the attention patterns "
                                 "(they are captured for the prompt pass).", color="#333333")
            return
        sample = self._sample(prompt)
        self.pattern = view.array[sample]  # (H, T, T)
        heads = self.pattern.shape[0]
        self.pieces = pieces = prompt.sample_pieces(sample)
        choice = self.head_box.currentIndex()
        shown = range(heads) if choice <= 0 else [choice - 1]
        columns = int(np.ceil(np.sqrt(len(shown))))
        for i, h in enumerate(shown):
            plot = self.canvas.addPlot(row=i // columns, col=i % columns, title=f"head {h}")
            plot.invertY(True)
            plot.setAspectLocked(True)
            image = pg.ImageItem(self.pattern[h].astype(np.float32), axisOrder="row-major",
                                 levels=(0.0, 1.0))
            image.setColorMap(CMAP)
            plot.addItem(image)
            if len(shown) == 1:
                ticks = [(t + 0.5, repr(p)) for t, p in enumerate(pieces)]
                step = max(1, len(ticks) // 25)
                plot.getAxis("left").setTicks([ticks[::step]])
                plot.getAxis("bottom").setTicks([ticks[::step]])
                plot.setLabel("left", "query token")
                plot.setLabel("bottom", "key token")
            else:
                plot.hideAxis("left")
                plot.hideAxis("bottom")
            self.images.append((image, h))
        note = "" if current is None or current.step is None else " (prompt pass; steps carry no patterns)"
        self.hover.setText(f"layer {self.session.layer}{note}")

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
                p = image.mapFromScene(pos)
                q, k = int(p.y()), int(p.x())
                t = self.pattern.shape[-1]
                if 0 <= q < t and 0 <= k < t:
                    pieces = self.pieces
                    self.hover.setText(f"head {h}: query {q} {pieces[q]!r} → key {k} {pieces[k]!r}: "
                                       f"weight {self.pattern[h, q, k]:.4f}")
                return
