"""Every norm placement side by side (a page of the Where-the-norm-sits view): fresh
models of one shape, one per placement chosen, measured at initialisation (each block's
gradient and the stream's size after it) and, when steps are asked for, trained on the
sample text with and without warm-up — run in the engine thread with progress and Stop."""

from __future__ import annotations

import html

import pyqtgraph as pg
from PySide6.QtCore import Qt
from PySide6.QtWidgets import (QCheckBox, QComboBox, QDoubleSpinBox, QGridLayout, QHBoxLayout,
                               QLabel, QSpinBox, QStackedWidget, QVBoxLayout, QWidget)

from ....core.base.resources import resource_path
from ....core.experiments.ln_compare import EXPERIMENT_CONFIG, INITS
from ....core.experiments.stability import (INTRO, TRAIN_LR, Measure, Placed, stability,
                                            summary)
from ....core.gpt.norm_position import NormPosition
from ....core.gpt.tokenizer import encode
from ...base.later import BuiltLater
from ...base.view_jobs import EngineLike, ViewJobs
from ...plots.placement_plots import draw_placements, legend, placement_plot
from ...plots.plot_text import set_empty
from ...widgets.job_controls import JobControls
from ...widgets.scrolling import scrolling

RUN = "Compare placements"
SHOWN = {Measure.GRAD: "Gradient per block", Measure.RESIDUAL: "Stream after each block",
         Measure.LOSS: "Training loss"}  # one plot at a time: each has the page's full height
MAX_DEPTH, MAX_STEPS = 96, 5000


def placements_html() -> str:
    """Each placement's formula and where its norm is, one line each."""
    return "<br>".join(f"<b>{p.title}</b> <tt>{html.escape(p.formula)}</tt>: "
                       f"{html.escape(p.explained)}" for p in NormPosition)


class PlacementsPanel(BuiltLater, QWidget):
    # the plots, made when asked for (``later_soon``), first read or first shown
    LATER = ("plots",)

    def __init__(self, engine: EngineLike, status) -> None:
        super().__init__()
        self.results: dict[NormPosition, Placed] = {}
        bar = self._bar()
        self.canvases = QStackedWidget()  # one plot at a time, across the page's height
        for key in SHOWN:
            canvas = pg.GraphicsLayoutWidget()
            canvas.setBackground("w")
            self.canvases.addWidget(canvas)
        self.words = QLabel(INTRO)
        self.words.setWordWrap(True)
        self.words.setTextInteractionFlags(Qt.TextSelectableByMouse)
        self.formulas = QLabel(placements_html())
        self.formulas.setWordWrap(True)
        said = QWidget()
        column = QVBoxLayout(said)
        column.setContentsMargins(0, 0, 0, 0)
        column.addWidget(self.words)
        column.addWidget(self.formulas)
        column.addStretch(1)
        words = scrolling(said)
        words.setMinimumHeight(4 * self.fontMetrics().lineSpacing())
        outer = QVBoxLayout(self)
        outer.addLayout(bar)
        outer.addWidget(self.canvases, 3)
        outer.addWidget(words, 1)
        self.jobs = ViewJobs(engine, self._failed, controls=self.controls, status=status,
                             title="Placements experiment")

    def _bar(self) -> QVBoxLayout:
        """Run, Stop and progress; the placements ticked; depth, init, seed, steps, rate."""
        self.controls = JobControls(RUN, self.run, "Measure a fresh model in each placement "
                                    "ticked at initialisation and, with steps, train it "
                                    "with and without warm-up")
        self.run_button, self.stop_button = self.controls.run_button, self.controls.stop_button
        self.chosen = {p: QCheckBox(p.title) for p in NormPosition}
        ticks = QGridLayout()
        for i, (position, box) in enumerate(self.chosen.items()):
            box.setChecked(True)
            box.setToolTip(f"{position.formula}: {position.explained}")
            ticks.addWidget(box, i // 3, i % 3)
        self.depth = QSpinBox()
        self.depth.setRange(1, MAX_DEPTH)
        self.depth.setValue(12)
        self.depth.setToolTip("Blocks in each model")
        self.init_box = QComboBox()
        self.init_box.addItems(list(INITS))
        self.seed = QSpinBox()
        self.seed.setRange(0, 2**31 - 1)
        self.steps = QSpinBox()
        self.steps.setRange(0, MAX_STEPS)
        self.steps.setSingleStep(50)
        self.steps.setToolTip("Training steps in each placement, with and without warm-up "
                              "(0: only the measurements at initialisation, in seconds)")
        self.lr = QDoubleSpinBox()
        self.lr.setDecimals(5)
        self.lr.setRange(1e-5, 1.0)
        self.lr.setSingleStep(1e-4)
        self.lr.setValue(TRAIN_LR)
        self.lr.setToolTip("Peak learning rate of the training (AdamW, cosine decay, no clipping)")
        self.shown = QComboBox()
        for key, title in SHOWN.items():
            self.shown.addItem(title, key)
        self.shown.setToolTip("The plot shown (Alt+Down opens the list)")
        self.shown.currentIndexChanged.connect(self._show_plot)
        rows = [list(self.controls.widgets()),
                [QLabel("Depth:"), self.depth, QLabel("Init:"), self.init_box, QLabel("Seed:"),
                 self.seed],
                [QLabel("Steps:"), self.steps, QLabel("Rate:"), self.lr, QLabel("Show:"),
                 self.shown]]
        bar = QVBoxLayout()
        for widgets in rows[:1] + [None] + rows[1:]:
            if widgets is None:
                bar.addLayout(ticks)
                continue
            row = QHBoxLayout()
            for w in widgets:
                row.addWidget(w)
            row.addStretch(1)
            bar.addLayout(row)
        return bar

    def build_later(self):
        """A plot a loop turn (each on a canvas of its own, a legend above it)."""
        plots: dict[Measure, pg.PlotItem] = {}
        for key in SHOWN:
            plots[key] = self._empty_plot(key, tuple(NormPosition))
            if len(plots) < len(SHOWN):
                yield
        self.plots = plots

    def showEvent(self, event) -> None:  # noqa: N802 (Qt name)
        self.build_now()  # in sight: its plots now
        super().showEvent(event)

    def _empty_plots(self, positions=tuple(NormPosition)) -> None:
        for key in SHOWN:
            self.plots[key] = self._empty_plot(key, positions)

    def _empty_plot(self, key: Measure, positions) -> pg.PlotItem:
        canvas = self.canvases.widget(list(SHOWN).index(key))
        canvas.clear()
        legend(canvas, 0, positions, colspan=1, formulas=False)
        plot = placement_plot(canvas, key, 1)
        set_empty(plot, f"Set steps, then press “{RUN}”" if key == Measure.LOSS
                  else f"Press “{RUN}”")
        return plot

    def _show_plot(self) -> None:
        self.canvases.setCurrentIndex(self.shown.currentIndex())

    def run(self) -> None:
        positions = [p for p, box in self.chosen.items() if box.isChecked()]
        if not positions:
            self.words.setText("Tick at least one placement.")
            return
        base = EXPERIMENT_CONFIG.replace(n_layers=self.depth.value())
        scheme, seed, steps, lr = (self.init_box.currentText(), self.seed.value(),
                                   self.steps.value(), self.lr.value())
        self.words.setText(f"Measuring {len(positions)} placements at depth {base.n_layers}"
                           + (f", training each {steps} steps twice" if steps else "") + "…")

        text = resource_path("the-verdict.txt").read_text(encoding="utf-8")
        self.last_ids = encode(text[:4000])  # the tokens every placement is measured on

        def experiment(ctx):
            return stability(base, self.last_ids, positions, scheme, seed, steps, text, lr,
                             lambda done, total: ctx.report((done, total)), ctx.should_stop)

        self.jobs.run(experiment, "placements experiment", finished=self.show_results,
                      cancelled=lambda: self.words.setText("Placements experiment stopped."))

    def _failed(self, message: str) -> None:
        self.words.setText(f"The placements experiment failed: {html.escape(message)}")

    def show_results(self, results: dict[NormPosition, Placed]) -> None:
        self.results = results
        self._empty_plots(list(results))
        draw_placements(self.plots, results)
        if not any(r.losses for r in results.values()):
            set_empty(self.plots[Measure.LOSS], f"Set steps, then press “{RUN}”")
        self.words.setText(INTRO + "<br>" + "<br>".join(html.escape(line)
                                                         for line in summary(results)))
