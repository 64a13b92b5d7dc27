"""Learn mode: with "Predict before you see" on, selecting a node first asks a
multiple-choice question about it (its output shape, which node runs first, whether it
changes the last dimension, Pre-LN or Post-LN); the inspector stays covered until the
answer is given, then the live tensor is revealed with the right answer explained.
Keeps the session's score."""

from __future__ import annotations

import html

from PySide6.QtWidgets import (QButtonGroup, QCheckBox, QLabel, QPushButton, QVBoxLayout,
                               QWidget)

from ..core.quiz import Question, Score, question_for
from .session import Session


class LearnView(QWidget):
    def __init__(self, session: Session, engine=None) -> None:
        super().__init__()
        self.session = session
        self.score = Score()
        self.question: Question | None = None
        self.enabled = QCheckBox("Predict before you see: ask a question before showing a node")
        self.enabled.toggled.connect(self._toggled)
        self.prompt = QLabel("Turn learn mode on, then click a node in the block graph.")
        self.prompt.setWordWrap(True)
        self.buttons: list[QPushButton] = []
        self.group = QButtonGroup(self)
        self.feedback = QLabel()
        self.feedback.setWordWrap(True)
        self.score_label = QLabel()
        layout = QVBoxLayout(self)
        layout.addWidget(self.enabled)
        layout.addWidget(self.prompt)
        for i in range(4):
            button = QPushButton()
            button.hide()
            button.clicked.connect(lambda _=False, i=i: self.answer(i))
            layout.addWidget(button)
            self.buttons.append(button)
        layout.addWidget(self.feedback)
        layout.addWidget(self.score_label)
        layout.addStretch(1)
        session.nodeChanged.connect(self.ask)
        self._show_score()

    def _toggled(self, on: bool) -> None:
        if on:
            self.ask(self.session.node)
        else:
            self.session.set_hidden(False)
            self.question = None
            for b in self.buttons:
                b.hide()

    def ask(self, name: str) -> None:
        if not self.enabled.isChecked() or self.session.model is None:
            return
        prompt = self.session.prompt
        batch, tokens = (1, 4) if prompt is None else (
            (prompt.batch.size, prompt.batch.width) if prompt.batch is not None else (1, len(prompt.ids)))
        self.question = question_for(name, self.session.model.config, batch, tokens, self.score.asked)
        self.prompt.setText(f"<b>{html.escape(self.question.text)}</b>")
        for i, button in enumerate(self.buttons):
            if i < len(self.question.options):
                button.setText(self.question.options[i])
                button.setEnabled(True)
                button.show()
            else:
                button.hide()
        self.feedback.clear()
        self.session.set_hidden(True)

    def answer(self, choice: int) -> bool:
        q = self.question
        if q is None:
            return False
        right = q.check(choice)
        self.score.record(right)
        for b in self.buttons:
            b.setEnabled(False)
        verdict = "Right." if right else f"Not quite: the answer is {q.options[q.answer]}."
        self.feedback.setText(f"{verdict} {html.escape(q.explanation)}")
        self.question = None
        self._show_score()
        self.session.set_hidden(False)  # reveal the live tensor
        return right

    def _show_score(self) -> None:
        self.score_label.setText(f"Score this session: {self.score.right} of {self.score.asked}")
