"""Gradients: "shortcuts help gradients flow", measured. For the current prompt, the
next-token loss is backpropagated through the loaded model twice — with the shortcuts,
and with every block's shortcuts removed — and the gradient norms are drawn side by
side on the same axes: along the residual stream, at one chosen node in every block,
and for each block's parameters (core.gradients). Runs on the engine's thread with
progress and Stop."""

from __future__ import annotations

import html

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QCheckBox, QComboBox, QGridLayout, QLabel, QVBoxLayout, QWidget
import pyqtgraph as pg

from ....core.experiments.gradients import GradientReport, describe, gradient_report
from ....core.gpt.nodes import FEED_FORWARD, Kind, block_nodes, order_of
from ...plots.gradient_plots import draw_report, gradient_plots
from ...widgets.job_controls import JobControls
from ...base.session import Session
from ...base.view_jobs import EngineLike, ViewJobs
from ...base.view import ViewHooks

INTRO = ("The loss of each prompt token predicting the next one, backpropagated; "
         "the same model and prompt with the shortcuts removed (each add returns only its "
         "branch) in orange.")


def summary_html(report: GradientReport) -> str:
    """The verdict in bold, then each run's figures as a row of a table (the lines the
    command line prints, laid out to be read in a narrow column)."""
    lines = describe(report, len(report.runs[0].blocks))[len(report.runs):]
    verdict = f"<b>{html.escape(lines.pop(), quote=False)}</b><br>" if report.ratio() is not None else ""
    head = "<tr>" + "".join(f"<th>{h}</th>" for h in (
        "", "loss", "first block", "last block", "embeddings", "last output")) + "</tr>"
    names = {True: "with shortcuts", False: "shortcuts removed"}
    bare = {True: "", False: f", blocks' {report.norm}s removed"}
    rows = "".join(
        f"<tr><td>{names[r.shortcut]}{bare[r.norms_kept]}</td>"
        f"<td>{r.loss:.4g}</td><td>{r.blocks[0]:.3g}</td><td>{r.blocks[-1]:.3g}</td>"
        f"<td>{r.residual[0]:.3g}</td><td>{r.residual[-1]:.3g}</td></tr>" for r in report.runs)
    return (f"{verdict}Prompt of {report.prompt_tokens} tokens; gradient norms of the block "
            f"parameters (first, last block) and along the residual stream:"
            f"<table cellspacing=0 cellpadding=3>{head}{rows}</table>"
            + "<br>".join(html.escape(line, quote=False) for line in lines))


class GradientsView(ViewHooks, QWidget):
    def __init__(self, session: Session, engine: EngineLike) -> None:
        super().__init__()
        self.session = session
        self.report: GradientReport | None = None
        self.controls = JobControls("Compute gradients", self.compute, "Backpropagate the "
                                    "prompt's next-token loss, with and without the shortcuts")
        self.jobs = ViewJobs(engine, self._failed, controls=self.controls,
                             status=session.set_status, title="Gradients")
        self.run_button = self.controls.run_button
        self.node_box = QComboBox()
        self.node_box.setToolTip("The node drawn in every block (middle plot)")
        self.no_norms = QCheckBox("No LayerNorms")
        self._fill_nodes()
        self.node_box.currentTextChanged.connect(lambda _: self.redraw())
        self.no_norms.setToolTip("Both runs without the LayerNorms in the blocks: the book's "
                                 "plain deep network, whose gradient fades without shortcuts")
        self.summary = QLabel(INTRO)  # under the plots: the words of the figure, whole
        self.summary.setWordWrap(True)
        self.summary.setTextInteractionFlags(Qt.TextSelectableByMouse)
        bar = QGridLayout()  # two rows: the column is narrow
        for i, w in enumerate(self.controls.widgets()):
            bar.addWidget(w, 0, i)
        for i, w in enumerate((QLabel("Node:"), self.node_box, self.no_norms)):
            bar.addWidget(w, 1, i)
        bar.setColumnStretch(3, 1)
        self.canvas = pg.GraphicsLayoutWidget()
        self.plots = gradient_plots(self.canvas, columns=1)  # one above another: a tall column
        self.canvas.setMinimumHeight(3 * 120 + 30)  # the plots share one block axis
        layout = QVBoxLayout(self)
        layout.addLayout(bar)
        layout.addWidget(self.canvas, 1)
        layout.addWidget(self.summary)
        session.modelChanged.connect(self._new_model)

    def compute(self) -> None:
        prompt = self.session.prompt
        if prompt is None or prompt.batch is not None:
            self.summary.setText("Run a prompt first (Ctrl+Enter; one prompt, not a batch): "
                                 "its tokens give the loss.")
            return
        ids, norms = list(prompt.ids), not self.no_norms.isChecked()
        self.summary.setText(f"Backpropagating {len(ids)} tokens, with and without shortcuts…")

        def job(ctx):
            return gradient_report(ctx.model, ids, True, ctx.should_stop,
                                   lambda done, total: ctx.report((done, total)), norms)

        self.jobs.run(job, "gradients", finished=self.show_report, cancelled=self._stopped)

    def _stopped(self) -> None:
        self.summary.setText("Stopped: the gradients were not computed.")

    def _failed(self, message: str) -> None:
        self.summary.setText(f"The gradients could not be computed: {html.escape(message)}")

    def show_report(self, report: GradientReport) -> None:
        self.report = report
        self.redraw()
        self.summary.setText(summary_html(report))

    def redraw(self) -> None:
        n = self.session.model.config.n_layers if self.session.model else 0
        draw_report(self.plots, self.report, self.node_box.currentText(), n)

    def _fill_nodes(self) -> None:
        """The model's own block's nodes to draw (the feed-forward first shown)."""
        info = self.session.model
        order = order_of(info.config) if info is not None else "pre"
        keys = [n.key for n in block_nodes(order) if n.kind != Kind.PATTERN]
        if keys != [self.node_box.itemText(i) for i in range(self.node_box.count())]:
            self.node_box.blockSignals(True)
            self.node_box.clear()
            self.node_box.addItems(keys)
            self.node_box.setCurrentText(FEED_FORWARD)
            self.node_box.blockSignals(False)
        self.no_norms.setText("No RMSNorms" if info is not None and not info.config.family.centred_norm
                              else "No LayerNorms")

    def _new_model(self) -> None:
        """The gradients were the model before's: clear them, ignore its late answers."""
        self._fill_nodes()
        self.jobs.forget()
        self.report = None
        self.summary.setText(INTRO)
        self.redraw()
