"""Live sampling: the shown step's next-token distribution, reshaped at once as the
temperature, top-k and top-p move — from the logits the step kept, in numpy, the same
filtering as generation's, without running the model (core.run.sampling). Outlines: the model's
probabilities; bars: what would be drawn from under these settings; grey: cut by top-k or
top-p. The chosen token's rank and probability, the entropy before and after, a line at
1 / vocabulary (a uniform guess), the axis fixed at 0–1 on request, and a seeded
histogram of 200 draws beside the exact probabilities. *Use for generation* hands the
settings to the prompt panel."""

from __future__ import annotations

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import Qt, QTimer
from PySide6.QtWidgets import (QCheckBox, QGridLayout, QHBoxLayout, QLabel, QPushButton, QSlider, QSpinBox,
                               QVBoxLayout, QWidget)

from ....core.run.generation import BOUNDS, GenerationSettings
from ....core.run.sampling import Reshaped, reshape, sample_counts, top_ids
from ...base.lazy import LazyRefresh
from ...base.session import Session
from ...base.view_jobs import EngineLike, ViewJobs
from ...plots.plot_axes import plot_widget
from ...plots.plot_text import empty_message, fitted_names, set_empty

EMPTY = "Run a prompt (Ctrl+Enter): its next-token distribution, reshaped as you move the settings."
SHOWN = 20  # candidates drawn
DRAWS = 200
NAMED = 3  # the tallest, named in the note above the plot (every bar carries its name)
ORDER = "temperature → top-k → top-p"  # the order generation applies them (generation.py)
KEPT, CUT, MODEL, DRAWN = "#3c78c8", "#cfcfcf", "#222222", "#e07b00"


class SamplingView(LazyRefresh, QWidget):
    def __init__(self, session: Session, engine: EngineLike) -> None:
        super().__init__()
        self.session = session
        self.shaped: Reshaped | None = None
        self.counts: np.ndarray | None = None  # the draws, for the settings they were made with
        self._ids: tuple = ()  # the candidates whose names the axis shows
        # a dragged slider moves many times a frame: reshape at most once per 30 ms
        self._soon = QTimer(self, singleShot=True, interval=30)
        self._soon.timeout.connect(self.reshape)
        self._controls()
        self.note = QLabel(EMPTY)
        self.note.setWordWrap(True)
        # draws asked for: an answer for older settings is dropped
        self.jobs = ViewJobs(engine, lambda m: self.note.setText(f"The draws failed: {m}"))
        self.plot_widget = plot_widget()
        self.plot = self.plot_widget.getPlotItem()
        self.plot.setMouseEnabled(x=False, y=False)
        self.plot.getAxis("left").enableAutoSIPrefix(False)
        self.plot.setLabel("left", "probability")
        self.plot_widget.setMinimumHeight(240)
        second = QHBoxLayout()  # the switches and buttons, then the words
        for widget in (self.greedy, self.fixed, self.sample_button, self.use_button):
            second.addWidget(widget)
        second.addStretch(1)
        layout = QVBoxLayout(self)
        layout.addLayout(self.bar)
        layout.addLayout(second)
        layout.addWidget(self.note)
        layout.addWidget(self.plot_widget, 1)
        session.on_pass(self.request_refresh)
        session.modelChanged.connect(self.request_refresh)
        self.plot_widget.scene().sigMouseMoved.connect(self._hovered)

    def _hovered(self, where) -> None:
        """The bar under the mouse, said in full as its tooltip: token, id, the model's
        probability and the one these settings give."""
        r, ids = self.shaped, self._ids
        if r is None or not ids or not self.plot.sceneBoundingRect().contains(where):
            self.plot_widget.setToolTip("")
            return
        i = int(round(self.plot.vb.mapSceneToView(where).x()))
        if 0 <= i < len(ids):
            t = ids[i]
            self.plot_widget.setToolTip(f"{self.session.tokenizer.token_piece(int(t))!r} (id {t}): "
                                        f"model p {r.before[t]:.4g}, with these settings "
                                        f"{r.after[t]:.4g}")

    def _controls(self) -> None:
        self.temperature = QSlider(Qt.Horizontal)
        self.temperature.setRange(5, 300)  # hundredths
        self.temperature.setValue(100)
        self.temperature.setToolTip("Temperature: below 1 sharper, above 1 flatter; applied first, then top-k, "
                                    "then top-p")
        self.top_k = QSpinBox()
        self.top_k.setRange(0, BOUNDS["top_k"][1])  # the model's vocabulary once one is loaded
        self.top_k.setSpecialValueText("off")
        self.top_k.setToolTip("Keep only the k most likely tokens (0: off), after the temperature")
        self.top_p = QSlider(Qt.Horizontal)
        self.top_p.setRange(1, 100)  # hundredths
        self.top_p.setValue(100)
        self.top_p.setToolTip("Keep the fewest most likely tokens whose probabilities reach p, "
                                 "counted after the temperature and top-k")
        self.greedy = QCheckBox("Greedy")
        self.fixed = QCheckBox("Axis 0–1")
        self.fixed.setToolTip("Fix the probability axis at 0–1 (a flat distribution looks flat)")
        self.value_label = QLabel()
        self.sample_button = QPushButton(f"Sample {DRAWS}×")
        self.sample_button.setToolTip(f"Draw {DRAWS} tokens with these settings (seeded) and "
                                      "mark how often each came out")
        self.use_button = QPushButton("Use for generation")
        self.use_button.setToolTip("Generate with these settings (the prompt panel's)")
        self.sample_button.clicked.connect(self.sample)
        self.use_button.clicked.connect(
            lambda: self.services.use_sampling(self.settings()))
        for signal in (self.temperature.valueChanged, self.top_k.valueChanged,
                       self.top_p.valueChanged, self.greedy.toggled):
            signal.connect(self._changed)
        self.fixed.toggled.connect(lambda _on: self.draw())
        self.bar = QGridLayout()  # the sliders get the column's width
        for row, (label, widget) in enumerate((("Temperature", self.temperature),
                                               ("Top-p", self.top_p))):
            self.bar.addWidget(QLabel(label), row, 0)
            self.bar.addWidget(widget, row, 1)
        self.bar.addWidget(self.value_label, 0, 2)
        top_k = QHBoxLayout()
        top_k.addWidget(QLabel("Top-k"))
        top_k.addWidget(self.top_k)
        self.bar.addLayout(top_k, 1, 2)
        self.bar.setColumnStretch(1, 1)

    def settings(self) -> GenerationSettings:
        p = self.top_p.value() / 100
        return GenerationSettings(greedy=self.greedy.isChecked(),
                                  temperature=self.temperature.value() / 100,
                                  top_k=self.top_k.value() or None, top_p=p if p < 1 else None)

    # ------------------------------------------------------------------ reshaping
    def redraw(self) -> None:
        info = self.session.model
        if info is not None and self.top_k.maximum() != info.config.vocab_size:
            self.top_k.setMaximum(info.config.vocab_size)  # every id of its vocabulary
        self.counts = None
        self.jobs.forget()
        self.reshape()

    def _changed(self, *_args) -> None:
        self.counts = None  # drawn with other settings
        self.jobs.forget()
        if not self._soon.isActive():
            self._soon.start()

    def reshape(self) -> None:
        s = self.settings()
        self.value_label.setText(f"T {s.temperature:.2f} · p {self.top_p.value() / 100:.2f}")
        current = self.session.current
        logits = None if current is None or current.batch is not None else current.next_logits
        self.shaped = None if logits is None else reshape(
            logits, s, current.token_id if current.step is not None else None)
        self.draw()

    def sample(self) -> None:
        """200 draws with generation's own sampling code, as an engine job."""
        current = self.session.current
        if self.shaped is None or current is None or current.next_logits is None:
            return
        logits, settings = current.next_logits, self.settings()
        self.jobs.run(lambda ctx: sample_counts(logits, settings, DRAWS, seed=0),
                      "sample the next token", finished=self._drawn)

    def _drawn(self, counts: np.ndarray) -> None:
        self.counts = counts
        self.draw()

    # ------------------------------------------------------------------ drawing
    def _items(self) -> None:
        """The plot's items, made once and updated in place as the settings move."""
        self.bars = pg.BarGraphItem(x=[0], height=[0], width=0.7, pen=pg.mkPen(None))
        self.outline = pg.BarGraphItem(x=[0], height=[0], width=0.7, brush=None,
                                       pen=pg.mkPen(MODEL, width=1.5))
        self.draws = pg.ScatterPlotItem(symbol="t", size=11, brush=pg.mkBrush(DRAWN), pen=None)
        self.uniform = pg.InfiniteLine(angle=0, pen=pg.mkPen("#888888", style=Qt.DashLine))
        for item in (self.bars, self.outline, self.draws, self.uniform):
            self.plot.addItem(item)  # the line is named in the note: a label would cover bars
        self.names: list[pg.TextItem] = []  # each bar's token, upright from its foot


    def draw(self) -> None:
        r = self.shaped
        if r is None:
            self.plot.clear()
            self._ids = ()
            set_empty(self.plot, EMPTY)
            self.note.setText(EMPTY)
            return
        if empty_message(self.plot) is not None or not hasattr(self, "bars") \
                or self.bars.scene() is None:
            set_empty(self.plot, None)
            self._items()
        ids = r.shown(SHOWN)
        x = np.arange(len(ids))
        after, before = r.after[ids], r.before[ids]
        cut = after <= 0
        self.bars.setOpts(x=x, height=np.where(cut, before, after),
                          brushes=[pg.mkBrush(CUT if c else KEPT) for c in cut])
        self.outline.setOpts(x=x, height=before)
        drawn = (self.counts[ids] > 0) if self.counts is not None else np.zeros(len(ids), bool)
        counts = self.counts[ids] if self.counts is not None else np.zeros(len(ids))
        self.draws.setData(x[drawn], counts[drawn] / DRAWS)  # where a candidate came out
        self.uniform.setValue(1 / r.vocab)
        if tuple(ids) != self._ids:
            self._ids = tuple(ids)
            names = [repr(self.session.tokenizer.token_piece(int(i))) for i in ids]
            fitted_names(self.plot, names)  # the axis: every k-th on a narrow plot
            self._name_bars(names)
        top = 1.0 if self.fixed.isChecked() else max(float(before.max()), float(after.max())) * 1.1
        self.plot.setRange(xRange=(-0.6, len(ids) - 0.4), yRange=(0, top), padding=0)

        self.note.setText(self._words(r))

    def _name_bars(self, names: list[str]) -> None:
        """Every bar's token written upright from its foot, inside the bar: named however
        narrow the plot (the axis can name only every k-th there)."""
        for item in self.names:
            self.plot.removeItem(item)
        self.names = []
        for i, name in enumerate(names):
            # white on a dark ground of its own: readable in a bar and above a short one
            item = pg.TextItem(name, color="#ffffff", angle=90, anchor=(0, 0.5),
                               fill=pg.mkBrush(20, 40, 80, 150))
            item.setPos(i, 0)
            item.setZValue(5)
            self.plot.addItem(item)
            self.names.append(item)

    def tallest(self, r: Reshaped) -> str:
        """The NAMED most likely tokens with these settings (the model's where every one is
        cut), named in words: on a narrow plot the axis names only every k-th bar."""
        p = r.after if r.after.max() > 0 else r.before
        top = top_ids(p, NAMED)
        return "most likely " + ", ".join(
            f"{self.session.tokenizer.token_piece(int(t))!r} {p[t]:.2g}" for t in top)

    def _words(self, r: Reshaped) -> str:
        words = (f"{self.tallest(r)}; {r.kept:,} of {r.vocab:,} tokens can be drawn; entropy "
                 f"{r.entropy_before:.2f} → {r.entropy_after:.2f} bits; dashed: 1 / vocabulary")
        if r.chosen is not None:
            rank = r.rank(r.chosen)
            now = f"rank {rank}, p {r.after[r.chosen]:.3g}" if rank else "cut by these settings"
            words = (f"chosen {self.session.tokenizer.token_piece(r.chosen)!r}: {now} here (the model: p "
                     f"{r.before[r.chosen]:.3g}). " + words)
        if not self.greedy.isChecked():  # the order matters: top-p after a temperature
            words += f"; applied as {ORDER}"
        if self.counts is not None:
            words += f"; ▲ {DRAWS} seeded draws"
        return words
