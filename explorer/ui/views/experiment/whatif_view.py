"""What if: the interventions of this window — add one to the selected node (or from the
graph's right-click menu), remove, switch all on or off, save and load them as JSON — and
the clean continuation beside the changed one, token by token, with the KL divergence
of each step and the candidates whose probability moved (core.whatif). Every change
re-runs the prompt with the interventions applied, so every view shows their effect."""

from __future__ import annotations

import html

from PySide6.QtCore import Qt
from PySide6.QtWidgets import (QAbstractItemView, QCheckBox, QComboBox, QDoubleSpinBox,
                               QFileDialog, QHBoxLayout, QHeaderView, QLabel, QLineEdit,
                               QListWidget, QPushButton, QSpinBox, QTableWidget,
                               QTableWidgetItem, QVBoxLayout, QWidget)

from ....core.experiments.interventions import (FUNCTIONS, KINDS, Change, Intervention, allowed_kinds,
                                               load_file, resolve, save_file)
from ....core.experiments.whatif import Comparison, compare
from ....core.gpt.nodes import order_of
from ...widgets.job_controls import JobControls
from ...base.session import Session
from ...base.view_jobs import EngineLike, ViewJobs
from ...base.view import ViewHooks

FIELDS = {Change.SCALE: ("k",), Change.STEER: ("k", "prompt", "prompt_b"),
          Change.PATCH: ("prompt",), Change.HEADS: ("heads",), Change.ACTIVATION: ("function",),
          Change.FORCE: ("experts",), Change.BAN: ("experts",)}
COLUMNS = ("clean", "changed", "KL", "candidates: clean → changed probability")


def numbers(text: str, what: str) -> tuple[int, ...] | None:
    """'all' (or nothing) -> None; '0, 3' -> (0, 3)."""
    text = text.strip()
    if text in ("", "all"):
        return None
    try:
        return tuple(int(t) for t in text.replace(",", " ").split())
    except ValueError:
        raise ValueError(f"{what}: whole numbers separated by commas, e.g. 0, 3") from None


class WhatIfView(ViewHooks, QWidget):
    def __init__(self, session: Session, engine: EngineLike) -> None:
        super().__init__()
        self.session = session
        self.comparison: Comparison | None = None
        self._compared = None  # the prompt pass the comparison was asked for
        self.message = QLabel()
        self.message.setWordWrap(True)
        layout = QVBoxLayout(self)
        layout.addLayout(self._list_row(session))
        layout.addLayout(self._add_row())
        layout.addWidget(self.list)
        layout.addWidget(self.message)
        layout.addLayout(self._compare_row())
        self.jobs = ViewJobs(engine, self._failed, controls=self.controls,
                             status=session.set_status, title="Clean against changed")
        layout.addWidget(self.table, 1)
        session.nodeChanged.connect(self._target)
        session.interventionsChanged.connect(self._show_list)
        session.stepsChanged.connect(self._prompt_changed)  # a new prompt pass
        session.modelChanged.connect(self._new_model)
        self._target(session.node)
        self._show_list()
        self._new_model()  # built after a model change: what it dropped

    def _list_row(self, session: Session) -> QVBoxLayout:
        """The one switch, and under it Remove, Clear, Load…, Save… for the list."""
        self.switch = QCheckBox("Apply the interventions")
        self.switch.setChecked(True)
        self.switch.setToolTip("One switch for all of them: off runs the model as it is")
        self.switch.toggled.connect(lambda on: session.set_interventions(session.interventions, on))
        self.list = QListWidget()
        self.list.setSelectionMode(QAbstractItemView.SingleSelection)
        self.list.setMaximumHeight(90)
        self.list.setWordWrap(True)  # a long intervention wraps in the column, never scrolls
        self.list.setResizeMode(QListWidget.Adjust)
        self.list.setHorizontalScrollBarPolicy(Qt.ScrollBarAlwaysOff)
        buttons = QHBoxLayout()
        for text, slot in (("Remove", self.remove), ("Clear", self.clear), ("Load…", self.load),
                           ("Save…", self.save)):
            button = QPushButton(text)
            button.clicked.connect(slot)
            buttons.addWidget(button)
        buttons.addStretch(1)
        top = QVBoxLayout()  # two rows: the column is narrow
        top.addWidget(self.switch)
        top.addLayout(buttons)
        return top

    def _add_row(self) -> QVBoxLayout:
        """The selected node, and under it what to do to it with the fields its kind
        needs."""
        self.target = QLabel()
        self.kind = QComboBox()
        self.kind.setToolTip("What to do to the node")
        self.k = QDoubleSpinBox()
        self.k.setRange(-1000.0, 1000.0)
        self.k.setValue(2.0)
        self.k.setPrefix("k ")
        self.heads = QLineEdit()
        self.heads.setPlaceholderText("heads, e.g. 0, 3")
        self.experts = QLineEdit()
        self.experts.setPlaceholderText("experts, e.g. 2 or 0, 5")
        self.prompt_a = QLineEdit()
        self.prompt_a.setPlaceholderText("prompt (A)")
        self.prompt_b = QLineEdit()
        self.prompt_b.setPlaceholderText("prompt B")
        self.function = QComboBox()
        self.function.addItems(list(FUNCTIONS))
        self.positions = QLineEdit()
        self.positions.setPlaceholderText("positions: all")
        self.positions.setMaximumWidth(130)
        self.add_button = QPushButton("Add")
        self.add_button.clicked.connect(self.add)
        self.kind.currentTextChanged.connect(self._fields)
        fields = QHBoxLayout()
        for w in (self.kind, self.k, self.heads, self.experts, self.prompt_a, self.prompt_b,
                  self.function, self.positions, self.add_button):
            fields.addWidget(w)
        fields.addStretch(1)
        add = QVBoxLayout()
        add.addWidget(self.target)
        add.addLayout(fields)
        return add

    def _compare_row(self) -> QHBoxLayout:
        """Clean against changed: how many tokens, Run/Stop, and the table below."""
        self.tokens = QSpinBox()
        self.tokens.setRange(1, 50)
        self.tokens.setValue(10)
        self.tokens.setSuffix(" tokens")
        self.controls = JobControls("Compare clean and changed", self.request_comparison)
        self.compare_button = self.controls.run_button
        self.table = QTableWidget(0, len(COLUMNS))
        self.table.setHorizontalHeaderLabels(COLUMNS)
        self.table.setEditTriggers(QAbstractItemView.NoEditTriggers)
        header = self.table.horizontalHeader()  # the candidates cut to the view, whole on hover
        header.setMinimumSectionSize(20)
        for col in range(len(COLUMNS)):
            header.setSectionResizeMode(col, QHeaderView.Stretch if col == len(COLUMNS) - 1
                                        else QHeaderView.ResizeToContents)
        row = QHBoxLayout()
        for w in (self.compare_button, self.tokens, *self.controls.widgets()[1:]):
            row.addWidget(w)
        row.addStretch(1)
        return row

    # ------------------------------------------------------------- the list
    def _target(self, name: str) -> None:
        self.target.setText(f"Add to <b>{html.escape(name)}</b>:")
        current = self.kind.currentText()
        self.kind.blockSignals(True)
        self.kind.clear()
        info = self.session.model
        for kind in allowed_kinds(name, order_of(info.config) if info is not None else "pre"):
            self.kind.addItem(kind.value)
            self.kind.setItemData(self.kind.count() - 1, KINDS[kind], Qt.ToolTipRole)
        self.kind.setCurrentText(current)
        self.kind.blockSignals(False)
        self._fields()

    def _fields(self) -> None:
        shown = FIELDS.get(self.kind.currentText(), ())
        for name, widget in (("k", self.k), ("heads", self.heads), ("experts", self.experts),
                             ("prompt", self.prompt_a),
                             ("prompt_b", self.prompt_b), ("function", self.function)):
            widget.setVisible(name in shown)
        self.positions.setVisible(self.kind.currentText() not in (Change.HEADS, Change.NO_SHORTCUT,
                                                                  Change.ACTIVATION))

    def build(self) -> Intervention:
        kind = self.kind.currentText()
        return Intervention(
            kind, self.session.node, k=self.k.value() if kind in (Change.SCALE, Change.STEER) else 1.0,
            heads=numbers(self.heads.text(), "heads") or () if kind == Change.HEADS else (),
            experts=numbers(self.experts.text(), "experts") or ()
            if kind in (Change.FORCE, Change.BAN) else (),
            positions=numbers(self.positions.text(), "positions") if self.positions.isVisible() else None,
            prompt=self.prompt_a.text() or None if kind in (Change.PATCH, Change.STEER) else None,
            prompt_b=self.prompt_b.text() or None if kind == Change.STEER else None,
            function=self.function.currentText() if kind == Change.ACTIVATION else None)

    def add(self) -> bool:
        info = self.session.model
        try:
            one = self.build()
            if info is not None:
                one.check(info.config)
        except ValueError as exc:
            self.message.setText(f"<span style='color:#b00020'>{html.escape(str(exc))}</span>")
            return False
        self.message.setText(f"Added: {html.escape(one.describe())}. The prompt runs again with it.")
        self.session.add_intervention(one)
        return True

    def _show_list(self) -> None:
        self.list.clear()
        self.list.addItems([i.describe() for i in self.session.interventions])
        if not self.session.interventions:
            self.list.addItem("No interventions yet: choose one above and Add, or right-click a "
                              "node in the graph.")
            self.list.item(0).setFlags(Qt.NoItemFlags)
        self.switch.blockSignals(True)
        self.switch.setChecked(self.session.interventions_on)
        self.switch.blockSignals(False)
        self._forget()

    def remove(self) -> None:
        row = self.list.currentRow()
        if 0 <= row < len(self.session.interventions):
            kept = self.session.interventions[:row] + self.session.interventions[row + 1:]
            self.session.set_interventions(kept)

    def clear(self) -> None:
        self.session.set_interventions([])

    def load(self, path: str | None = None) -> None:
        if not path:
            path, _ = QFileDialog.getOpenFileName(self, "Load interventions", "", "JSON (*.json)")
        if not path or self.session.model is None:
            return
        try:
            found, enabled = load_file(path, self.session.model.config)
        except ValueError as exc:  # nothing applied: the list stays as it was
            self.message.setText(f"<span style='color:#b00020'>{html.escape(str(exc))}</span>")
            return
        self.session.set_interventions(found, on=enabled)
        self.message.setText(f"Loaded {len(found)} intervention(s) from {html.escape(path)}"
                             + ("." if enabled else ", switched off as saved."))

    def save(self, path: str | None = None) -> None:
        if not path:
            path, _ = QFileDialog.getSaveFileName(self, "Save interventions", "interventions.json",
                                                  "JSON (*.json)")
        if path:
            try:
                save_file(path, self.session.interventions, self.session.interventions_on)
                self.message.setText(f"Saved to {html.escape(path)}.")
            except (OSError, ValueError) as exc:  # a folder, a FIFO, a full disk: one line
                self.message.setText(f"<span style='color:#b00020'>Could not save: "
                                     f"{html.escape(str(exc))}</span>")

    # ------------------------------------------------------- clean vs changed
    def request_comparison(self) -> None:
        prompt = self.session.prompt
        if prompt is None or not self.session.active_interventions():
            self.message.setText("Run a prompt and add an intervention (with the switch on) first.")
            return
        ids, specs, n = list(prompt.ids), self.session.active_interventions(), self.tokens.value()
        self._forget()
        self._compared = prompt
        self.message.setText("Comparing the clean and the changed continuation…")
        self.jobs.run(
            lambda ctx: compare(ctx.model, resolve(ctx.model, specs, ids), ids, n, ctx.should_stop),
            "clean vs changed", finished=self.show_comparison,
            cancelled=lambda: self.message.setText("Stopped: the continuations were not compared."))

    def _failed(self, message: str) -> None:
        self.message.setText(f"The comparison failed: {html.escape(message)}")

    def show_comparison(self, c: Comparison) -> None:
        self.comparison = c
        self.table.setRowCount(len(c.steps))
        for r, step in enumerate(c.steps):
            moved = ", ".join(f"{t.piece!r} {t.clean:.3f}→{t.changed:.3f} ({t.delta_logp:+.2f})"
                              for t in step.top)
            piece = self.session.tokenizer.token_piece
            cells = (repr(piece(step.clean_id)), repr(piece(step.changed_id)),
                     f"{step.kl:.4g}", moved)
            for col, text in enumerate(cells):
                item = QTableWidgetItem(text)
                item.setToolTip(text)
                if step.clean_id != step.changed_id and col < 2:
                    item.setBackground(Qt.yellow)
                self.table.setItem(r, col, item)
        first = c.first_difference()
        self.message.setText(
            f"<b>clean:</b> {html.escape(c.text('clean'))}<br><b>changed:</b> "
            f"{html.escape(c.text('changed'))}<br>"
            + ("The two continuations are the same." if first is None else
               f"They part at step {first}. KL per step on the clean prefix; Δ log-probability in brackets."))

    def _forget(self) -> None:
        """A comparison belongs to its prompt and interventions: a change of either, or
        Clear, takes its table and its words away."""
        self.jobs.forget()
        self._compared = None
        if self.comparison is not None or self.table.rowCount():
            self.message.setText("")
        self.comparison = None
        self.table.setRowCount(0)

    def _prompt_changed(self) -> None:
        if self._compared is not None and self.session.prompt is not self._compared:
            self._forget()

    def _new_model(self) -> None:
        """The session dropped the interventions that do not fit the new model (a node
        it lacks, a head it has not): the tab says which; the others stay."""
        self._forget()
        self._target(self.session.node)
        if self.session.dropped:
            self.message.setText("Removed, as they do not fit this model: "
                                 + html.escape("; ".join(self.session.dropped)))

