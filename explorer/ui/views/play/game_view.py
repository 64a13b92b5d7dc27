"""The prediction game (core.lessons.game). *Next token*: the rounds follow the last
generation — the text so far, then type a word or pick one of five; the score is the
model's log-probability of the guess, and the model's choice and the guess's rank are
shown. *Layer*: at which block does the logit lens first rank the final prediction
first? While a round is open the views that would answer it (the prompt panel with its
output and chart, the lens, sampling, why) are covered, as Learn covers its questions."""

from __future__ import annotations

from PySide6.QtWidgets import (QComboBox, QGridLayout, QHBoxLayout, QLabel, QLineEdit,
                               QPushButton, QSizePolicy, QSpinBox, QTextBrowser, QVBoxLayout,
                               QWidget)

from ....core.lessons.game import (Answer, Score, answer, choices, first_layer, guess_token,
                                   layer_facts, round_facts)
from ....core.gpt.nodes import order_of
from ....core.run.analysis import lens_nodes, logit_lens
from ...base.session import Session
from ...base.view import ViewHooks
from ...widgets.scrolling import lines_high
from ...base.view_jobs import EngineLike, ViewJobs

START = "Generate some tokens (Ctrl+Enter), then play: guess each one before you see it."


class GameView(ViewHooks, QWidget):
    def __init__(self, session: Session, engine: EngineLike) -> None:
        super().__init__()
        self.session = session
        self.score, self.layer_score = Score(), [0, 0]  # layer game: rounds, exact
        self.round: int | None = None  # the step being guessed
        self.run = None  # the prompt pass of the run being played
        self.lens_answer: int | None = None
        self.mode = QComboBox()
        self.mode.addItems(["Guess the next token", "Guess the layer"])
        self.mode.currentIndexChanged.connect(lambda _i: self.stop())
        self.start_button = QPushButton("Start")
        self.start_button.clicked.connect(self.start)
        self.score_label = QLabel(self.score.words)
        self.score_label.setWordWrap(True)
        self.context = QTextBrowser()
        self.context.setMinimumHeight(50)
        self.guess_edit = QLineEdit()
        self.guess_edit.setPlaceholderText("your guess")
        self.guess_edit.returnPressed.connect(lambda: self.guess_text(self.guess_edit.text()))
        self.layer_box = QSpinBox()
        self.layer_box.setPrefix("Block ")
        self.guess_button = QPushButton("Guess")
        self.guess_button.clicked.connect(self._guess_clicked)
        self.buttons = [QPushButton() for _ in range(5)]
        for b in self.buttons:  # a long token is cut, whole in the tooltip: never wider
            b.setSizePolicy(QSizePolicy.Ignored, QSizePolicy.Fixed)
            b.clicked.connect(lambda _c=False, b=b: self.guess_id(b.property("token")))
        self.result = QLabel(START)
        self.result.setWordWrap(True)
        self.jobs = ViewJobs(engine, lambda m: self.result.setText(f"The lens failed: {m}"))
        self._lay_out()
        session.modelChanged.connect(lambda: self.stop("A new model: the game starts again "
                                                       "on its run (Start)."))
        session.stepsChanged.connect(self._steps_changed)
        self._enable(False)

    def _lay_out(self) -> None:
        top = QHBoxLayout()
        for w in (self.mode, self.start_button):
            top.addWidget(w)
        top.addStretch(1)
        picks = QGridLayout()  # the five choices in two rows, then the typed guess
        for i, b in enumerate(self.buttons):
            picks.addWidget(b, i // 3, i % 3)
        guess = QHBoxLayout()
        for w in (self.guess_edit, self.layer_box, self.guess_button):
            guess.addWidget(w)
        lines_high(self.context)
        layout = QVBoxLayout(self)
        layout.addLayout(top)
        layout.addWidget(self.score_label)  # its own line, wrapped: it grows as rounds add up
        layout.addWidget(self.context, 1)  # the text so far: the round's question
        layout.addLayout(picks)
        layout.addLayout(guess)
        layout.addWidget(self.result)

    def _enable(self, open_: bool) -> None:
        layer = self.mode.currentIndex() == 1
        for b in self.buttons:
            b.setVisible(not layer)
            b.setEnabled(open_)
        self.guess_edit.setVisible(not layer)
        self.layer_box.setVisible(layer)
        for w in (self.guess_edit, self.layer_box, self.guess_button):
            w.setEnabled(open_)

    # ------------------------------------------------------------------ next token
    def start(self) -> None:
        if self.mode.currentIndex() == 1:
            return self.start_layer()
        if self.session.prompt is None or not self.session.steps:
            self.result.setText(START)
            return
        if self.round is None:  # a new game; else the next round
            self.round, self.run = 0, self.session.prompt
        self._open_round()

    def _open_round(self) -> None:
        steps = self.session.steps
        if self.round is None or self.round >= len(steps):
            self.stop()
            self.result.setText(f"That was every generated token. {self.score.words}. "
                                "Generate more (Ctrl+Enter) to play on.")
            return
        step = steps[self.round]
        ids = self.session.prompt.ids + [s.token_id for s in steps[:self.round]]
        self.context.setPlainText(self.session.tokenizer.decode(ids[-200:]) + " …")
        for b, token in zip(self.buttons, choices(step.next_logits, self.round)):
            b.setText(repr(self.session.tokenizer.token_piece(token)))
            b.setToolTip(b.text())
            b.setProperty("token", token)
        self.guess_edit.clear()
        self.session.set_covered(round_facts(step.next_logits, step.token_id, self.session.tokenizer))
        self._enable(True)
        self.result.setText(f"Round {self.round + 1} of {len(steps)}: what comes next?")

    def guess_text(self, text: str) -> None:
        try:
            token, note = guess_token(text, self.session.tokenizer)
        except ValueError as exc:
            self.result.setText(str(exc))
            return
        self.guess_id(token, note)

    def guess_id(self, token: int, note: str = "") -> Answer | None:
        if self.round is None or self.round >= len(self.session.steps):
            return None
        step = self.session.steps[self.round]
        a = answer(step.next_logits, int(token), step.token_id, note)
        self.score.add(a)
        self.score_label.setText(self.score.words)
        self.session.set_covered()
        self._enable(False)
        verdict = "the model's favourite!" if a.rank == 1 else f"its rank {a.rank:,}."
        piece = self.session.tokenizer.token_piece
        self.result.setText(
            (note + ". " if note else "") + f"You: {piece(a.guess)!r}, log-probability "
            f"{a.log_prob:.2f} ({a.points:+.2f} bits), {verdict} The generation took "
            f"{piece(a.chosen)!r} ({a.chosen_log_prob:.2f}). Next round goes on.")
        self.round += 1
        self.start_button.setText("Next round")
        return a

    # ------------------------------------------------------------------ layer
    def start_layer(self) -> None:
        current, info = self.session.prompt, self.session.model
        if current is None or info is None:
            self.result.setText("Run a prompt (Ctrl+Enter) first.")
            return
        names = lens_nodes(info.config.n_layers, order_of(info.config))
        arrays = {n: current.views[n].array for n in names
                  if n in current.views and current.views[n].array is not None}
        position = len(current.ids) - 1
        self.layer_box.setRange(0, info.config.n_layers - 1)
        self.run = current
        self.context.setPlainText(self.session.tokenizer.decode(current.ids[-200:]))
        self.result.setText("Reading the lens…")
        self.jobs.run(lambda ctx: logit_lens(ctx.model, arrays, position, k=1), "game lens",
                      finished=self._lens_ready)

    def _lens_ready(self, rows) -> None:
        if self.run is None or self.run is not self.session.prompt:
            return  # read on a run that is gone
        if not rows:
            self.result.setText("This pass kept no residual tensors to read.")
            return
        first = first_layer([r.top_ids[0] for r in rows], rows[-1].top_ids[0])
        self.lens_answer = first // 2  # two reads a block: after each half
        self.session.set_covered(layer_facts())
        self._enable(True)
        self.result.setText(f"The model will say {rows[-1].top_pieces[0]!r} next. At which "
                            "block does the logit lens first rank it first?")

    def guess_layer(self, block: int) -> None:
        if self.lens_answer is None:
            return
        right = self.lens_answer
        self.layer_score[0] += 1
        self.layer_score[1] += block == right
        self.session.set_covered()
        self._enable(False)
        self.lens_answer = None
        verdict = (f"You: block {block}; the lens first has it at block {right} "
                   f"({'exactly!' if block == right else f'{abs(block - right)} off'}). "
                   f"Layer rounds: {self.layer_score[1]} of {self.layer_score[0]} exact.")
        self.result.setText(f"{verdict} The Logit lens tab shows it.")
        self.score_label.setText(f"Layer rounds: {self.layer_score[1]} of "
                                 f"{self.layer_score[0]} exact")
        self.services.show_view("lens")  # the answer's table; the verdict stays on screen:
        self.session.set_status(f"Guess the layer — {verdict}")  # on the status line too

    def _guess_clicked(self) -> None:
        if self.mode.currentIndex() == 1:
            self.guess_layer(self.layer_box.value())
        else:
            self.guess_text(self.guess_edit.text())

    # ------------------------------------------------------------------ ending
    def _steps_changed(self) -> None:
        """The rounds are the run's that was shown when the game started: another run (a
        new generation, a training snapshot's samples, a reopened run) ends them."""
        if (self.round is not None or self.lens_answer is not None) and \
                self.session.prompt is not self.run:
            self.stop("A new run replaced the one being played: Start plays the new one.")

    def stop(self, why: str = "") -> None:
        if self.round is not None or self.lens_answer is not None:
            self.session.set_covered()
            if why:
                self.result.setText(f"{why} {self.score.words}.")
        self.round, self.lens_answer, self.run = None, None, None
        self.start_button.setText("Start")
        self._enable(False)
