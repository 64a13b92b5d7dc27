"""Divergence finder: model B — a change of the loaded model from the seeds' list, or a
checkpoint — runs on the current prompt beside model A; the table shows the largest
difference at every node in forward order and the first node beyond the tolerance,
which the block graph marks in red."""

from __future__ import annotations

import html

from PySide6.QtCore import Qt
from PySide6.QtGui import QBrush, QColor
from PySide6.QtWidgets import (QComboBox, QDoubleSpinBox, QFileDialog, QHBoxLayout, QLabel,
                               QSpinBox, QTableWidget, QTableWidgetItem, QVBoxLayout,
                               QWidget)

from ....core.experiments.divergence import (NO_SIZE, Divergence, describe, ff_mutation,
                                            find_divergence, lesson)
from ....core.gpt.mutations import FF_WIDTH, MUTATIONS, SECOND_HALF
from ....core.sources import Mutation, model_for, parse_source
from ...widgets.job_controls import JobControls
from ...base.session import Session
from ...base.view_jobs import EngineLike, ViewJobs
from ...base.view import ViewHooks

CHECKPOINT = "checkpoint file…"


class DivergenceView(ViewHooks, QWidget):
    """Marks the first diverging node in the session (the block graph outlines it)."""

    def __init__(self, session: Session, engine: EngineLike) -> None:
        super().__init__()
        self.session = session
        self.kind = QComboBox()
        for name, words in MUTATIONS.items():
            self.kind.addItem(name, name)
            self.kind.setItemData(self.kind.count() - 1, words, Qt.ToolTipRole)
        self.kind.addItem(CHECKPOINT, CHECKPOINT)  # its data: not a mutation's name
        self.ff_width = QSpinBox()  # ff-N: the width the user types
        self.ff_width.setRange(1, 100_000)
        self.ff_width.setPrefix("width ")
        self.ff_width.setToolTip("The second feed-forward Linear's output width (ff-N)")
        self.kind.currentIndexChanged.connect(self._kind_changed)
        self.layer = QSpinBox()
        self.layer.setPrefix("Block ")
        self.tol = QDoubleSpinBox()
        self.tol.setDecimals(6)
        self.tol.setRange(0.0, 10.0)
        self.tol.setSingleStep(1e-4)
        self.tol.setValue(1e-4)
        self.controls = JobControls("Find the first divergence", self.request)
        self.jobs = ViewJobs(engine, lambda m: self.summary.setText(
            f"The comparison failed: {html.escape(m)}"), controls=self.controls,
            status=session.set_status, title="Divergence finder")
        bar = QVBoxLayout()  # two rows: the tab fits a laptop's narrow right-hand column
        first, second = QHBoxLayout(), QHBoxLayout()
        for w in (QLabel("Model B = A with:"), self.kind, self.ff_width, self.layer):
            first.addWidget(w)
        for w in (QLabel("tolerance"), self.tol, *self.controls.widgets()):
            second.addWidget(w)
        first.addStretch(1)
        second.addStretch(1)
        bar.addLayout(first)
        bar.addLayout(second)
        self.summary = QLabel("Run a prompt, choose a change, and find where the two models part.")
        self.summary.setWordWrap(True)
        self.question = QLabel(
            "<b>The chapter's exercise:</b> the second half of the block is wrong — where do "
            "you look first? Choose " + ", ".join(SECOND_HALF) + ", guess the node, then find "
            "it: the first red row answers, and the note says why.")
        self.question.setWordWrap(True)
        self.table = QTableWidget(0, 4)
        self.table.setHorizontalHeaderLabels(["shape A", "shape B", "max |A−B|", "relative"])
        layout = QVBoxLayout(self)
        layout.addLayout(bar)
        layout.addWidget(self.question)
        layout.addWidget(self.summary)
        layout.addWidget(self.table, 1)
        session.modelChanged.connect(self._new_model)
        session.stepsChanged.connect(self._prompt_changed)  # a new prompt pass
        self.result: Divergence | None = None
        self._searched = None  # the prompt pass the search ran on
        self._new_model()

    def _new_model(self) -> None:
        """A result belongs to the model it was found with: a new model clears it."""
        if self.session.model is not None:
            cfg = self.session.model.config
            self.layer.setRange(0, cfg.n_layers - 1)  # blocks counted from 0, as in the graph
            self.layer.setSuffix(f" of {cfg.n_layers}")  # the last: "Block 11 of 12"
            ff = next(i for i in range(self.kind.count()) if FF_WIDTH.match(str(self.kind.itemData(i))))
            self.kind.setItemData(ff, ff_mutation(cfg))  # a width that does not fit this model
            self.kind.setItemText(ff, ff_mutation(cfg))
            self.kind.setItemData(ff, describe(ff_mutation(cfg)), Qt.ToolTipRole)
            self._kind_changed()
        self._clear()

    def _kind_changed(self, _index: int = 0) -> None:
        kind = str(self.kind.currentData())
        self.ff_width.setVisible(FF_WIDTH.match(kind) is not None)
        if FF_WIDTH.match(kind):
            self.ff_width.setValue(int(FF_WIDTH.match(kind)[1]))

    def _prompt_changed(self) -> None:
        """... and to its prompt: another prompt clears it, and the graph's outline."""
        if self._searched is not None and self.session.prompt is not self._searched:
            self._clear()
            self.session.set_mark("")

    def _clear(self) -> None:
        self.result = None
        self._searched = None
        self.table.setRowCount(0)
        self.summary.setText("Run a prompt, choose a change, and find where the two models part.")

    def request(self) -> None:
        if self.session.prompt is None:
            self.summary.setText("Run a prompt first (Ctrl+Enter): both models get the same prompt.")
            return
        kind = self.kind.currentData()
        if kind == CHECKPOINT:
            path, _ = QFileDialog.getOpenFileName(self, "Model B checkpoint")
            if not path:
                return
            source = parse_source(path)
        else:
            if FF_WIDTH.match(kind):  # the width as typed
                kind = f"ff-{self.ff_width.value()}"
            source = parse_source(f"mutation:{kind}", layer=self.layer.value())
        prompt = self.session.prompt  # a batch runs as the batch: (2, 3, 1024) in ff-1024
        self._searched = prompt
        ids = prompt.batch if prompt.batch is not None else list(prompt.ids)
        tolerance = self.tol.value()
        self.summary.setText("Comparing…")

        def job(ctx):
            b = model_for(source, ctx.loaded, ctx.should_stop)
            result = find_divergence(ctx.model, b, ids, tolerance, ctx.should_stop)
            if isinstance(source, Mutation):  # what the exercise teaches, in numbers
                result.notes += lesson(source.name, b, source.layer, ids)
            return result

        self.jobs.run(job, "divergence finder", finished=self.show_result,
                      cancelled=lambda: self.summary.setText(
                          "Stopped: the two models were not compared."))

    def show_result(self, result: Divergence) -> None:
        self.result = result
        self.table.setRowCount(len(result.rows))
        self.table.setVerticalHeaderLabels([r.name for r in result.rows])
        for i, r in enumerate(result.rows):
            words = r.status in NO_SIZE  # no size to give
            cells = [str(r.shape_a), str(r.shape_b) if r.shape_b else "not reached",
                     r.status if words else f"{r.max_abs:.3g}", "" if words else f"{r.relative:.3g}"]
            for j, text in enumerate(cells):
                item = QTableWidgetItem(text)
                if r.name == result.first:
                    item.setBackground(QBrush(QColor("#ffb3b3")))
                self.table.setItem(i, j, item)
        text = (f"First divergence: <b>{html.escape(result.headline())}</b>" if result.first
                else f"No node differs by more than {result.tolerance:g}.")
        if result.error_b:
            text += f"<br>Model B failed: {html.escape(result.error_b)}"
        text += "".join(f"<br>{html.escape(note)}" for note in result.notes)
        self.summary.setText(text)
        if result.first:
            self.table.scrollToItem(self.table.item([r.name for r in result.rows].index(result.first), 0))
        self.session.set_mark(result.first or "")
