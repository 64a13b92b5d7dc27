"""Why this token? For the shown pass — a prompt (at a chosen position) or a generated
step (the token it chose) — each part of a token's logit: the embeddings, every
block's attention and feed-forward branch, the final norm's shift, as a waterfall from
the embeddings to the logit; the heads and neurons that gave most. Click a bar, a head
or a neuron to select its node. Against a second token (“vs”) it explains the
difference of the two logits. Post-LN models get the lens's changes, said to be no
decomposition (core.attribution.direct). Computed as an engine job."""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtGui import QFontMetrics
from PySide6.QtWidgets import (QComboBox, QHBoxLayout, QLabel, QLineEdit, QPushButton,
                               QTableWidget, QTableWidgetItem, QVBoxLayout, QWidget)

from ....core.attribution.direct import Split
from ....core.attribution.why import Why, one_token, pass_question, summary_lines, why_token
from ....core.experiments.interventions import intervened
from ....core.gpt.nodes import ATTENTION, Role, block_hook_name, head_label, order_of, role
from ...base.lazy import LazyRefresh
from ...base.session import Session
from ...base.view_jobs import EngineLike, ViewJobs
from ...plots.plot_axes import plot_widget
from ...plots.why_plots import bar_at, draw_waterfall, waterfall_height

EMPTY = "Run a prompt (Ctrl+Enter): then ask why the model chose its next token."
TOP = 8


class WhyView(LazyRefresh, QWidget):
    def __init__(self, session: Session, engine: EngineLike) -> None:
        super().__init__()
        self.session = session
        self.jobs = ViewJobs(engine, self._failed, status=session.set_status,
                             title="Why this token")
        self._target: int | None = None  # a token asked for from the next-token chart
        self.why: Why | None = None
        self._bar()
        self.note = QLabel(EMPTY)
        self.note.setWordWrap(True)
        self.plot_widget = plot_widget()
        self.plot = self.plot_widget.getPlotItem()
        self.plot.getAxis("left").enableAutoSIPrefix(False)
        self._line = QFontMetrics(self.plot.getAxis("left").font()).height()
        self.plot_widget.setMinimumHeight(waterfall_height(None, self._line))
        self.plot.scene().sigMouseClicked.connect(self._clicked_bar)
        self.heads = self._table(["top head", "part"])
        self.neurons = self._table(["top neuron", "part"])
        self.heads.cellClicked.connect(lambda r, _c: self._select(self.heads, r, ATTENTION))
        self.neurons.cellClicked.connect(lambda r, _c: self._select(self.neurons, r, self._neurons()))
        tables = QHBoxLayout()  # under the waterfall, side by side
        tables.addWidget(self.heads)
        tables.addWidget(self.neurons)
        for table in (self.heads, self.neurons):
            rows = table.verticalHeader().defaultSectionSize()
            table.setFixedHeight(table.horizontalHeader().sizeHint().height() + 6 * rows + 4)
        layout = QVBoxLayout(self)
        layout.addLayout(self.bar)
        layout.addWidget(self.note)
        layout.addWidget(self.plot_widget, 1)  # every part a named row: the tab scrolls
        layout.addLayout(tables)
        draw_waterfall(self.plot, None, EMPTY)
        session.on_pass(self.request_refresh)
        session.modelChanged.connect(self._forget)

    def _bar(self) -> None:
        self.position_box = QComboBox()
        self.position_box.setSizeAdjustPolicy(QComboBox.AdjustToMinimumContentsLengthWithIcon)
        self.position_box.setMinimumContentsLength(10)  # a long piece does not widen the view
        self.position_box.setToolTip("The position whose next token is explained")
        self.position_box.activated.connect(lambda _i: self.explain())
        self.target_edit = QLineEdit()
        self.target_edit.setPlaceholderText("the model's choice")
        self.target_edit.setToolTip("The token to explain, as text with its leading space "
                                    "(' know'); empty: the token the model chose")
        self.versus_edit = QLineEdit()
        self.versus_edit.setPlaceholderText("(none)")
        self.versus_edit.setToolTip("Explain the target's logit minus this token's")
        for edit in (self.target_edit, self.versus_edit):
            edit.returnPressed.connect(self.explain)
        self.button = QPushButton("Explain")
        self.button.clicked.connect(self.explain)
        self.bar = QHBoxLayout()
        for label, widget, stretch in (("Position:", self.position_box, 2),
                                       ("Token:", self.target_edit, 1),
                                       ("vs", self.versus_edit, 1)):
            self.bar.addWidget(QLabel(label))
            self.bar.addWidget(widget, stretch)
        self.bar.addWidget(self.button)

    @staticmethod
    def _table(headers: list[str]) -> QTableWidget:
        table = QTableWidget(0, len(headers))
        table.setHorizontalHeaderLabels(headers)
        table.verticalHeader().hide()
        table.setEditTriggers(QTableWidget.NoEditTriggers)
        table.setSelectionBehavior(QTableWidget.SelectRows)
        table.horizontalHeader().setStretchLastSection(True)
        table.setHorizontalScrollBarPolicy(Qt.ScrollBarAlwaysOff)
        table.verticalHeader().setDefaultSectionSize(table.fontMetrics().height() + 6)
        table.setMinimumWidth(table.fontMetrics().horizontalAdvance("B12 N3071   +0.000") + 40)
        return table

    # ------------------------------------------------------------------ asking
    def redraw(self) -> None:
        """A new pass: list its positions and explain its next token."""
        current = self.session.current
        self.position_box.clear()
        if current is None or self.session.model is None or current.batch is not None:
            self._show(None, EMPTY if current is None or current.batch is None else
                       "Why works on one prompt, not a batch.")
            return
        if current.step is None:
            self.position_box.addItems([f"{i}: {p!r}" for i, p in enumerate(current.pieces)])
            self.position_box.setCurrentIndex(len(current.pieces) - 1)
        else:
            self.position_box.addItem(f"generation step {current.step}: "
                                      f"{self.session.tokenizer.token_piece(current.token_id)!r}")
        self.explain()

    def explain_token(self, token_id: int) -> None:
        """A candidate of the next-token chart, explained at the position the chart is
        about; the view shows itself."""
        if self.position_box.count():
            self.position_box.setCurrentIndex(self.position_box.count() - 1)
        self.target_edit.setText(self.session.tokenizer.token_piece(token_id))
        self._target = token_id
        self.services.show_view("why")
        self.explain()

    def explain(self) -> None:
        current = self.session.current
        if current is None or self.session.model is None or current.batch is not None:
            return
        try:
            target = self._token(self.target_edit.text(), "Token")
            versus = self._token(self.versus_edit.text(), "vs")
        except ValueError as exc:
            self.note.setText(str(exc))
            return
        position = None if current.step is not None else self.position_box.currentIndex()
        ids, position, chosen = pass_question(current.ids, current.step, current.token_id,
                                              position)
        target = chosen if target is None else target
        self.note.setText("Computing…")
        specs = self.session.active_interventions()  # the model that ran: with them
        prompt = list(self.session.prompt.ids) if self.session.prompt is not None else ids

        def job(ctx):
            with intervened(ctx.model, specs, prompt):
                return why_token(ctx.model, ids, position, target, versus, ctx.should_stop,
                                 len(specs))

        self.jobs.run(job, "why this token", finished=self._answered)

    def _token(self, text: str, what: str) -> int | None:
        if not text:
            return None
        if self._target is not None and what == "Token" and \
                text == self.session.tokenizer.token_piece(self._target):
            return self._target  # the chart's candidate, whatever its text encodes to
        return one_token(text, what, self.session.tokenizer)

    def _answered(self, why: Why) -> None:
        self.session.set_why(why)
        self._show(why)

    def _failed(self, message: str) -> None:
        self._show(None, f"Could not explain it: {message}")

    def _forget(self) -> None:
        self.jobs.forget()  # an answer still coming is the model before's
        self._target = None
        self._show(None, EMPTY)

    # ------------------------------------------------------------------ showing
    def _show(self, why: Why | None, message: str = EMPTY) -> None:
        self.why = why
        draw_waterfall(self.plot, why.attribution if why else None, message)
        self.plot_widget.setMinimumHeight(waterfall_height(why.attribution if why else None,
                                                           self._line))
        experts = why is not None and why.attribution.split is Split.EXPERT
        self.neurons.setHorizontalHeaderLabels(["top expert" if experts else "top neuron", "part"])
        for table, rows in ((self.heads, why.attribution.top_heads(TOP) if why else []),
                            (self.neurons, why.attribution.top_neurons(TOP) if why else [])):
            table.setRowCount(len(rows))
            for r, (layer, index, value) in enumerate(rows):
                name = head_label(layer, index) if table is self.heads else \
                    f"B{layer} {'E' if experts else 'N'}{index}"
                for c, text in enumerate((name, f"{value:+.3f}")):
                    item = QTableWidgetItem(text)
                    item.setData(Qt.UserRole, (layer, index))
                    table.setItem(r, c, item)
            table.resizeColumnToContents(0)
        for table in (self.heads, self.neurons):  # a Post-LN model has no such split
            table.setVisible(why is None or why.attribution.exact)
        neurons = why.attribution.neurons if why is not None else None
        if neurons is not None and not neurons.size:  # no split of the feed-forward
            self.neurons.setVisible(False)
        if why is None:
            self.note.setText(message)
            return
        lines = summary_lines(why, 3)
        # a lens note opens with the placement that rules contributions out ("Peri-LN: …")
        how = ("the parts add up to it (the final norm's scale held fixed)" if
               why.attribution.exact else f"{why.attribution.lens_note.split(':')[0]}: changes "
               "of the lens, not contributions; no head or neuron split")
        self.note.setText(f"{lines[0]} — {how}")
        self.note.setToolTip("\n".join(lines))

    def _clicked_bar(self, event) -> None:
        if self.why is None:
            return
        point = self.plot.vb.mapSceneToView(event.scenePos())
        index = bar_at(self.why.attribution, point.y())
        if index is not None and self.why.attribution.parts[index].node:
            self.session.set_node(self.why.attribution.parts[index].node)

    def _neurons(self) -> str:
        """The node whose values the neurons are: what the feed-forward's last Linear reads
        (GPT-2's GELU output, a SwiGLU's product); a mixture's experts: its weights."""
        order = order_of(self.session.model.config)
        return role(order, Role.ACTIVATION_OUTPUT) or role(order, Role.ROUTING)

    def _select(self, table: QTableWidget, row: int, key: str) -> None:
        item = table.item(row, 0)
        if item is not None:
            layer, _index = item.data(Qt.UserRole)
            self.session.set_node(block_hook_name(layer, key))
