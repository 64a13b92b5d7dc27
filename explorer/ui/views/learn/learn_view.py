"""Learn mode: with "Predict before you see" on, selecting a node first asks a
multiple-choice question about it, computed from the shown pass's tensors
(core.lessons.learn); whatever would give the answer away — the graph's shapes or order, the
inspector, the explanation, the plots — stays covered (ui.widgets.cover) until the answer,
then the feedback explains it with this model's numbers and says why each wrong option
is wrong. Questions rotate per node. Keeps the session's score."""

from __future__ import annotations

import html

from PySide6.QtCore import Qt
from PySide6.QtWidgets import (QCheckBox, QLabel, QPushButton, QScrollArea, QVBoxLayout,
                               QWidget)

from ....core.gpt.nodes import order_of, inside_attention, is_pattern, layer_of
from ....core.lessons.facts import KINDS, Facts
from ....core.lessons.learn import NOT_WRITTEN, Score, question_for
from ....core.lessons.question import Question
from ...base.session import Session
from ...base.view_jobs import EngineLike
from ...base.view import ViewHooks
from ...graph.attention_opener import opener_for


def _rich(text: str) -> str:
    return html.escape(text, quote=False).replace("\n", "<br>")


class LearnView(ViewHooks, QWidget):
    def __init__(self, session: Session, engine: EngineLike) -> None:
        super().__init__()
        self.session = session
        self.opener = opener_for(session, engine)  # what a pass did not make of attention
        self.score = Score()
        self.asked: dict[str, int] = {}  # per node: how many questions so far (they rotate)
        self.question: Question | None = None
        self._waiting: str | None = None  # the node asked about, not in the pass shown yet
        self.enabled = QCheckBox("Predict before you see: ask a question before showing a node")
        self.enabled.toggled.connect(self._toggled)
        self.prompt = QLabel("Turn learn mode on, then click a node in the block graph.")
        self.feedback = QLabel()
        for label in (self.prompt, self.feedback):
            label.setWordWrap(True)
            label.setTextFormat(Qt.RichText)
        self.feedback.setTextInteractionFlags(Qt.TextSelectableByMouse)
        self.buttons: list[QPushButton] = []
        self.score_label = QLabel()
        inner = QWidget()
        layout = QVBoxLayout(inner)
        layout.addWidget(self.enabled)
        layout.addWidget(self.prompt)
        for i in range(4):
            button = QPushButton()
            button.setShortcut(f"Alt+{i + 1}")
            button.hide()
            button.clicked.connect(lambda _=False, i=i: self.answer(i))
            layout.addWidget(button)
            self.buttons.append(button)
        layout.addWidget(self.feedback)
        self.next_button = QPushButton("Another question about this node")
        self.next_button.setShortcut("Alt+N")
        self.next_button.setToolTip("Alt+N")
        self.next_button.clicked.connect(lambda: self.ask(self.session.node))
        self.next_button.hide()  # with learn mode on
        layout.addWidget(self.next_button)
        layout.addWidget(self.score_label)
        layout.addStretch(1)
        scroll = QScrollArea()
        scroll.setWidgetResizable(True)
        scroll.setWidget(inner)
        outer = QVBoxLayout(self)
        outer.setContentsMargins(0, 0, 0, 0)
        outer.addWidget(scroll)
        session.nodeChanged.connect(self.ask)
        session.on_pass(self._on_pass)
        session.modelChanged.connect(self._model_changed)
        self._show_score()

    def _toggled(self, on: bool) -> None:
        self.next_button.setVisible(on)
        self.session.set_learning(on)
        if on:
            self.ask(self.session.node)
        else:
            self._close()
            self.prompt.setText("Turn learn mode on, then click a node in the block graph.")

    def _close(self) -> None:
        self.question = None
        for b in self.buttons:
            b.hide()
        self.session.set_covered()

    def _model_changed(self) -> None:
        """The question's numbers were the old model's: it is asked again on the new one's
        pass (the next snapshot with Follow training), covered until then."""
        was_open = self.question is not None
        self._close()
        self.feedback.clear()
        if was_open and self.enabled.isChecked():
            self._waiting = self.session.node
            self.asked[self._waiting] -= 1  # the same question again, not the node's next
            self.prompt.setText("The model changed (a new snapshot?): the question comes again "
                                "on its numbers once the prompt has run on it.")
            self.session.set_covered(Facts(frozenset(KINDS), (), "learn"))

    def ask(self, name: str) -> None:
        if not self.enabled.isChecked():
            return
        current = self.session.current
        self.feedback.clear()
        self._waiting = None
        if self.session.model is None or current is None or name not in current.views:
            self._close()
            if current is None:
                self.prompt.setText("Run a prompt first (Ctrl+Enter): the questions are about "
                                    "its real tensors. Then click a node.")
            else:  # e.g. another block's pattern, made when its block is shown
                self._waiting = name
                why = self._coming(name, current)
                self.prompt.setText(f"{name} is not in the pass shown: " + (
                    "its question comes when it is computed." if why is None else why))
                if why is None:  # it is coming: nothing of it seen before the question
                    self.session.set_covered(Facts(frozenset(KINDS), (), "learn"))
            return
        norm_position = order_of(self.session.model.config)
        if not norm_position.family.quiz:
            self._close()
            self.prompt.setText(NOT_WRITTEN)
            return
        asked = self.asked.get(name, 0)
        self.asked[name] = asked + 1
        self.question = question_for(name, current.views, norm_position, asked, self.score.asked,
                                     self.session.model.config.norm_eps)
        q = self.question
        self.prompt.setText(f"<b>{_rich(q.text)}</b>")
        for i, button in enumerate(self.buttons):
            if i < len(q.options):
                button.setText(f"{q.options[i]}")
                button.setStyleSheet("")
                button.setToolTip(f"Alt+{i + 1}")
                button.setEnabled(True)
                button.show()
            else:
                button.hide()
        self.session.set_covered(q.facts("learn"))
        self.services.show_view("learn")  # the question in front, not behind a tab

    def _coming(self, name: str, current) -> str | None:
        """None when ``name`` is on its way into ``current`` (a block's pattern or
        attention steps, made from the input the pass kept); else why it will not come."""
        layer = layer_of(name)
        if layer is None or not (is_pattern(name) or inside_attention(name)):
            return "run a prompt (Ctrl+Enter) to capture it."
        why = self.opener.want(layer, current, steps=not is_pattern(name))
        return None if why is None else why[0].lower() + why[1:] + "."

    def _on_pass(self) -> None:
        """The node asked about joined the pass shown (or a new pass holds it)."""
        current, name = self.session.current, self._waiting
        if name is not None and name == self.session.node and current is not None \
                and name in current.views:
            self.ask(name)

    def answer(self, choice: int) -> bool:
        q = self.question
        if q is None:
            return False
        right = q.check(choice)
        self.score.record(right)
        for i, b in enumerate(self.buttons):
            b.setEnabled(False)
            if i == q.answer:  # the answer green, a wrong choice red
                b.setStyleSheet("background: #cdeccd; color: #1d4d1d; font-weight: bold")
            elif i == choice:
                b.setStyleSheet("background: #f6d0d0; color: #6d1d1d")
        self.feedback.setText(_rich(q.feedback(choice)))
        self.question = None
        self._show_score()
        self.session.set_covered()  # reveal the live tensor
        return right

    def _show_score(self) -> None:
        self.score_label.setText(f"Score since the window opened: {self.score.right} of {self.score.asked}")
