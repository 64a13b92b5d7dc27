"""Activation patching: a clean and a corrupted prompt of the same length, the answer
and the wrong token; the sweep patches every node of every block of the corrupted run
with its clean value (at the last position, or at each position) on the engine's thread
with progress and Stop, and draws how much of the logit difference each patch restores
(core.patching). Click a cell: that patch is added to the interventions and the
corrupted prompt runs with it in the main view."""

from __future__ import annotations

import html

import pyqtgraph as pg
from PySide6.QtWidgets import (QComboBox, QGridLayout, QHBoxLayout, QLabel, QLineEdit,
                               QVBoxLayout, QWidget)

from ...plots.plot_axes import add_plot
from ....core.experiments.interventions import Intervention
from ....core.gpt.nodes import order_of, block_hook_name
from ....core.experiments.patching import Sweep, patch_sweep
from ...widgets.job_controls import JobControls
from ...plots.patch_plots import Panel, draw_sweep, panel_keys, sweep_title
from ...plots.plot_text import set_empty
from ...base.session import Session
from ...base.view_jobs import EngineLike, ViewJobs
from ...base.view import ViewHooks

CLEAN = "When Mary and John went to the store, John gave a drink to"
CORRUPT = "When Mary and John went to the store, Mary gave a drink to"


class PatchingView(ViewHooks, QWidget):
    def __init__(self, session: Session, engine: EngineLike) -> None:
        super().__init__()
        self.session = session
        self.sweep: Sweep | None = None
        self.shown: dict = {}
        self.clean, self.corrupt = QLineEdit(CLEAN), QLineEdit(CORRUPT)
        self.answer, self.wrong = QLineEdit(" Mary"), QLineEdit(" John")
        for w in (self.answer, self.wrong):
            w.setMaximumWidth(110)
        for w in (self.clean, self.corrupt, self.answer, self.wrong):
            w.setCursorPosition(0)  # a narrow box shows a prompt's start, not its middle
        self.positions = QComboBox()
        self.positions.addItems(["last", "all"])
        self.positions.setToolTip("Patch the last position only, or each position in turn")
        self.controls = JobControls("Run the sweep", self.request)
        self.jobs = ViewJobs(engine, self._failed, controls=self.controls,
                             status=session.set_status, title="Activation patching")
        self.summary = QLabel("Patch the clean run's activations into the corrupted run, node "
                              "by node: which nodes carry the answer?")
        self.summary.setWordWrap(True)
        self.canvas = pg.GraphicsLayoutWidget()
        self.canvas.setBackground("w")
        self.canvas.setMinimumHeight(160)
        self._empty()
        grid = QGridLayout()
        grid.addWidget(QLabel("Clean:"), 0, 0)
        grid.addWidget(self.clean, 0, 1)
        grid.addWidget(QLabel("Answer:"), 0, 2)
        grid.addWidget(self.answer, 0, 3)
        grid.addWidget(QLabel("Corrupted:"), 1, 0)
        grid.addWidget(self.corrupt, 1, 1)
        grid.addWidget(QLabel("Wrong:"), 1, 2)
        grid.addWidget(self.wrong, 1, 3)
        bar = QHBoxLayout()
        for w in (QLabel("Positions:"), self.positions, *self.controls.widgets()):
            bar.addWidget(w)
        bar.addStretch(1)
        layout = QVBoxLayout(self)
        layout.addLayout(grid)
        layout.addLayout(bar)
        layout.addWidget(self.canvas, 1)
        layout.addWidget(self.summary)
        session.modelChanged.connect(self._new_model)

    def _empty(self) -> None:
        self.canvas.clear()
        self.shown = {}
        set_empty(add_plot(self.canvas), "Run the sweep: one cell per node and layer")

    def request(self) -> None:
        if self.session.model is None:
            return
        args = (self.clean.text(), self.corrupt.text(), self.answer.text(), self.wrong.text(),
                self.positions.currentText())
        self.summary.setText("Patching…")

        def job(ctx):
            return patch_sweep(ctx.model, *args, should_stop=ctx.should_stop,
                               progress=lambda d, t: ctx.report((d, t)))

        self.jobs.run(job, "activation patching", finished=self.show_sweep,
                      cancelled=lambda: self.summary.setText("Stopped: the sweep was not finished."))

    def _failed(self, message: str) -> None:
        self.summary.setText(f"<span style='color:#b00020'>{html.escape(message)}</span>")

    def show_sweep(self, sweep: Sweep) -> None:
        self.summary.setText("")
        self.sweep = sweep
        position = order_of(self.session.model.config) if self.session.model else "pre"
        self.shown = draw_sweep(self.canvas, sweep, position)
        for name, (plot, image, rows) in self.shown.items():
            image.mouseClickEvent = lambda event, n=name: self.cell_clicked(n, event.pos())
        key, layer, p, value = sweep.best()
        self.summary.setText(
            f"{html.escape(sweep_title(sweep))}<br>Largest: {block_hook_name(layer, key)} at "
            f"position {p}, {value:.3f} of the difference. Click a cell to apply that patch to "
            "the corrupted prompt in the main view.")

    def cell_clicked(self, panel: Panel, pos) -> Intervention | None:
        """Apply the patch of the clicked cell: added to the interventions, and the
        corrupted prompt runs with it."""
        sweep = self.sweep
        if sweep is None:
            return None
        layer, row = int(pos.x()), int(pos.y())
        if panel is Panel.NODES:
            key, position = sweep.keys[row], sweep.positions[-1]
        else:
            norm = order_of(self.session.model.config) if self.session.model else "pre"
            key, position = panel_keys(sweep, norm)[panel], sweep.positions[row]
        patch = Intervention("patch", block_hook_name(layer, key), prompt=sweep.clean,
                             positions=(position,))
        self.session.set_node(patch.node)
        self.session.add_intervention(patch)
        self.services.run_prompt(sweep.corrupt)
        return patch

    def _new_model(self) -> None:
        self.jobs.forget()
        if self.sweep is not None or self.shown:  # a sweep of the model before: gone
            self._empty()  # (an empty canvas stays as it is: a new plot costs ~30 ms)
        self.sweep = None
        self.summary.setText("Patch the clean run's activations into the corrupted run, node "
                             "by node: which nodes carry the answer?")
