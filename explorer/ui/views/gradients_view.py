"""Gradients: "shortcuts help gradients flow", measured. For the current prompt, the
next-token loss is backpropagated through the loaded model twice — with the shortcuts,
and with every block's shortcuts removed — and the gradient norms are drawn side by
side on the same axes: along the residual stream, at one chosen node in every block,
and for each block's parameters (core.gradients). Runs on the engine's thread with
progress and Stop."""

from __future__ import annotations

from PySide6.QtWidgets import (QCheckBox, QComboBox, QHBoxLayout, QLabel, QTextBrowser,
                               QVBoxLayout, QWidget)
import pyqtgraph as pg

from ...core.experiments.gradients import GradientReport, describe, gradient_report
from ...core.gpt.nodes import FEED_FORWARD, block_nodes
from ..plots.gradient_plots import draw_report, gradient_plots
from ..widgets.job_controls import JobControls
from ..base.session import Session
from ..base.view import ViewHooks

INTRO = ("The loss of each prompt token predicting the next one, backpropagated; "
         "the same model and prompt with the shortcuts removed (each add returns only its "
         "branch) in orange.")


class GradientsView(ViewHooks, QWidget):
    def __init__(self, session: Session, engine) -> None:
        super().__init__()
        self.session, self.engine = session, engine
        self.report: GradientReport | None = None
        self._asked = 0
        self.controls = JobControls("Compute gradients", self.compute, "Backpropagate the "
                                    "prompt's next-token loss, with and without the shortcuts")
        self.run_button = self.controls.run_button
        self.node_box = QComboBox()
        self.node_box.addItems([n.key for n in block_nodes("pre") if n.kind != "pattern"])
        self.node_box.setCurrentText(FEED_FORWARD)
        self.node_box.setToolTip("The node drawn in every block (middle plot)")
        self.node_box.currentTextChanged.connect(lambda _: self.redraw())
        self.no_norms = QCheckBox("Remove the blocks' LayerNorms too")
        self.no_norms.setToolTip("Both runs without the LayerNorms in the blocks: the book's "
                                 "plain deep network, whose gradient fades without shortcuts")
        self.summary = QTextBrowser()  # beside the plots, scrolling: the bottom area is short
        self.summary.setHtml(INTRO)
        bar = QHBoxLayout()
        for w in (*self.controls.widgets(), QLabel("Node:"), self.node_box, self.no_norms):
            bar.addWidget(w)
        bar.addStretch(1)
        self.canvas = pg.GraphicsLayoutWidget()
        self.plots = gradient_plots(self.canvas)
        self.canvas.setMinimumHeight(170)
        self.summary.setMinimumWidth(200)
        self.summary.setMaximumWidth(320)
        row = QHBoxLayout()
        row.addWidget(self.canvas, 1)
        row.addWidget(self.summary)
        layout = QVBoxLayout(self)
        layout.addLayout(bar)
        layout.addLayout(row, 1)
        session.modelChanged.connect(self._new_model)

    def compute(self) -> None:
        prompt = self.session.prompt
        if prompt is None or prompt.batch is not None:
            self.summary.setHtml("Run a prompt first (Ctrl+Enter; one prompt, not a batch): "
                                 "its tokens give the loss.")
            return
        ids, norms = list(prompt.ids), not self.no_norms.isChecked()
        self._asked += 1
        asked = self._asked
        self.summary.setHtml(f"Backpropagating {len(ids)} tokens, with and without shortcuts…")

        def job(ctx):
            return gradient_report(ctx.model, ids, True, ctx.should_stop,
                                   lambda done, total: ctx.report((done, total)), norms)

        self.controls.started(self.engine.submit(
            job, "gradients", progress=lambda p: self.controls.report(*p),
            finished=lambda report: asked == self._asked and self.show_report(report),
            cancelled=lambda: self._stopped(asked),
            failed=lambda message: self._failed(asked, message)))

    def _stopped(self, asked: int) -> None:
        self.controls.ended()
        if asked == self._asked:
            self.summary.setHtml("Stopped: the gradients were not computed.")

    def _failed(self, asked: int, message: str) -> None:
        self._stopped(asked)
        if asked == self._asked:
            self.summary.setHtml("The gradients could not be computed.")
            self.session.report_error("Gradients", message)

    def show_report(self, report: GradientReport) -> None:
        self.controls.ended()
        self.report = report
        self.redraw()
        n = len(report.runs[0].blocks)
        lines = describe(report, n)
        verdict = f"<b>{lines.pop()}</b><br><br>" if report.ratio() is not None else ""
        self.summary.setHtml(f"{verdict}{INTRO} Prompt of {report.prompt_tokens} tokens.<br>"
                             + "<br>".join(lines))

    def redraw(self) -> None:
        n = self.session.model.config.n_layers if self.session.model else 0
        draw_report(self.plots, self.report, self.node_box.currentText(), n)

    def _new_model(self) -> None:
        """The gradients were the model before's: clear them, ignore its late answers."""
        self._asked += 1
        self.report = None
        self.summary.setHtml(INTRO)
        self.redraw()
