"""The prompt, in every workspace under the graph: the prompt box with its GPT-2 tokens
shown live as chips, the generation settings, Generate / Stop, and the output — the
generated tokens, each clickable (selecting one makes every view show that step). The
runs themselves are engine jobs (ui.base.runs); the panel keeps its own settings. The
shown step's candidates are the Next token view's (Play)."""

from __future__ import annotations

import re

import html
from functools import partial

from PySide6.QtCore import QSize, QTimer
from PySide6.QtGui import QFontMetrics
from PySide6.QtWidgets import (QCheckBox, QHBoxLayout, QLabel, QPushButton,
                               QTextBrowser, QVBoxLayout, QWidget)

from ....core.run.batch import MAX_BATCH, split_prompts
from ....core.run.generation import MAX_PROMPT_CHARS, GenerationSettings, prepare_prompt
from ....core.gpt.tokenizer import visible
from ...widgets.branch_box import BranchBox
from ...widgets.generation_box import GenerationBox, flag, stored
from ...widgets.prompt_edit import PromptEdit
from ...widgets.token_chips import CHIP_COLOURS, batch_chips_html, chips_html
from ...base import preload
from ...base.runs import Runs
from ...base.session import Session
from ...base.view_jobs import EngineLike
from ...base.view import ViewHooks
from ...widgets.scrolling import lines_high

DEFAULT_PROMPT = "Every effort moves you"


class PromptPanel(ViewHooks, QWidget):
    def __init__(self, session: Session, engine: EngineLike) -> None:
        super().__init__()
        self.session = session
        self.runs = Runs(session, engine)
        self.settings_store = None  # the window's QSettings, once restored
        self.running = False
        self._chips_pending = False
        self._shown_prompt = None  # the prompt pass whose steps the output shows
        self._shown_steps = 0
        self._shown_list = None  # the session's list of steps the output shows
        self._prompt_widgets()
        self._buttons()
        self._lay_out()
        self._connect(session)
        if self.session.tokenizer.ready():  # else it is read on a thread once the window is painted
            self.update_chips()  # (or with the model): the chips come a moment later
        else:
            self.token_count.setText("Reading GPT-2's vocabulary…")
        self.update_output()  # a panel made after a run shows it

    def _prompt_widgets(self) -> None:
        """The prompt, its token chips and count, the batch switch, the output."""
        self.prompt = PromptEdit(DEFAULT_PROMPT)  # a long word wrapped in linear time
        self.prompt.setPlaceholderText("Type a prompt, then Ctrl+Enter")
        self.prompt.setMaximumHeight(90)
        self.chips = QTextBrowser()  # rich text lays out hundreds of chips in a few ms
        self.chips.setMaximumHeight(70)
        self.chips.setToolTip("The prompt's GPT-2 tokens: piece and id (· is a space)")
        self.token_ids: list[int] = []
        self.token_count = QLabel()
        self.token_count.setWordWrap(True)  # a long note wraps instead of widening the dock
        self.batch = QCheckBox("Batch")
        self.batch.setToolTip("Batch: one prompt per line. Run several prompts at once (padded on the right) to see the "
                              "batch dimension at every node; generation runs one prompt at a time")
        self.batch.toggled.connect(self._batch_toggled)

        self.output = QTextBrowser()  # one rich-text document: appending a token is one call
        self.output.setOpenLinks(False)
        self.output.setToolTip("Click the prompt or a generated token: every view shows that step")
        self.output.anchorClicked.connect(lambda url: self.select(None if url.toString() == "prompt"
                                                                  else int(url.toString())))
        self.selected: int | None = None  # None: the prompt pass; else a step index

    def _buttons(self) -> None:
        """The generation settings (their widgets as the panel's own), Generate, Stop."""
        self.settings_box = GenerationBox()
        box = self.settings_box  # its widgets, as the panel's own
        self.max_tokens, self.leave_room, self.sample = box.max_tokens, box.leave_room, box.sample
        self.temperature, self.top_k, self.top_p, self.seed = box.temperature, box.top_k, box.top_p, box.seed

        self.generate_button = QPushButton("Generate  (Ctrl+Enter)")
        self.generate_button.clicked.connect(self.request_run)
        self.stop_button = QPushButton("Stop  (Esc)")
        self.stop_button.setEnabled(False)
        self.stop_button.clicked.connect(self.runs.stop)

    def _lay_out(self) -> None:
        """Three columns: the prompt and its tokens; the settings and Generate; the
        output, the panel's whole height."""
        left = QVBoxLayout()
        left.setSpacing(3)
        left.addWidget(self.prompt, 1)
        row = QHBoxLayout()
        row.addWidget(self.token_count, 1)
        row.addWidget(self.batch)
        left.addLayout(row)
        left.addWidget(self.chips, 1)
        buttons = QVBoxLayout()
        buttons.addWidget(self.settings_box)
        run = QHBoxLayout()
        run.addWidget(self.generate_button, 2)
        run.addWidget(self.stop_button, 1)
        buttons.addLayout(run)
        buttons.addStretch(1)
        output_title = QLabel("Output — click a token to see that step")
        output_title.setWordWrap(True)
        title_row = QHBoxLayout()  # the title, and the run's branches to choose from
        for w, stretch in ((output_title, 1), (BranchBox(self.session), 0)):
            title_row.addWidget(w, stretch)
        right = QVBoxLayout()
        right.setSpacing(3)
        right.addLayout(title_row)
        right.addWidget(self.output, 1)
        lines_high(self.output)
        for box in (self.prompt, self.chips):  # short: the graph keeps the room
            box.setMinimumHeight(QFontMetrics(box.font()).height() * 2 + 10)
        layout = QHBoxLayout(self)
        layout.setContentsMargins(6, 2, 6, 2)
        layout.addLayout(left, 3)
        layout.addLayout(buttons, 0)
        layout.addLayout(right, 4)

    def _connect(self, session: Session) -> None:
        self._retokenize = QTimer(self, singleShot=True, interval=120)
        self._retokenize.timeout.connect(self.update_chips)
        self.prompt.textChanged.connect(self._retokenize.start)
        # the note on cropping depends on them too
        for changed in (self.max_tokens.valueChanged, self.leave_room.toggled):
            changed.connect(lambda _: self._retokenize.start())
        session.stepsChanged.connect(self.update_output)
        session.modelChanged.connect(self.update_chips)
        session.modelChanged.connect(self._vocabulary)
        session.busyChanged.connect(self.set_running)
        session.interventionsChanged.connect(self._rerun)
        self._rerun_timer = QTimer(self, singleShot=True, interval=0)
        self._rerun_timer.timeout.connect(self._rerun_now)

    # ------------------------------------------------------------------ settings
    def settings(self) -> GenerationSettings:
        return self.settings_box.settings()

    def set_running(self, running: bool) -> None:
        self.running = running
        self.generate_button.setEnabled(not running)
        self.stop_button.setEnabled(running)
        if not running and self._chips_pending:
            self.update_chips()

    def _batch_toggled(self, on: bool) -> None:
        self.settings_box.setEnabled(not on)
        self.generate_button.setText("Run batch  (Ctrl+Enter)" if on else "Generate  (Ctrl+Enter)")
        self.prompt.setPlaceholderText("One prompt per line, then Ctrl+Enter" if on
                                       else "Type a prompt, then Ctrl+Enter")
        self.prompt.setMaximumHeight(130 if on else 90)
        self.update_chips()

    def prompts(self) -> list[str]:
        """Batch mode: the prompts, one per non-blank line."""
        return split_prompts(self.prompt.toPlainText())

    def request_run(self) -> bool:
        """Run the prompt (or the batch) as typed; False when it is refused (the reason
        shown under the prompt) or a run is going on."""
        if not self.generate_button.isEnabled():
            return False
        text = self.prompt.toPlainText()
        if self.batch.isChecked():
            prompts = self.prompts()
            error = ("The batch is empty: type one prompt per line." if not prompts else
                     f"At most {MAX_BATCH} prompts at once." if len(prompts) > MAX_BATCH else "")
            if error:
                return self._refuse(error)
            self.save_settings()
            return self.runs.start_batch(prompts) is not None
        if not text.strip():
            return self._refuse("The prompt is empty: type some text first.")
        self.save_settings()  # what the user typed survives whatever happens next
        try:
            ids = self.session.input_tokenizer.encode(text)
        except ValueError as exc:  # the model's own tokenizer failed on it
            self.session.set_status(str(exc))
            return self._refuse(str(exc))
        return self.runs.start(ids, self.settings()) is not None

    def _refuse(self, why: str) -> bool:
        """Why the prompt does not run, in red under it (what was typed stays)."""
        self.token_count.setText(f"<span style='color:#b00020'>{html.escape(why)}</span>")
        return False

    def run_prompt(self, text: str = "") -> None:
        """Run ``text`` (another view's request), or the prompt as it is when empty."""
        if text:
            self.batch.setChecked(False)
            self.prompt.setPlainText(text)
        self.request_run()

    def text(self) -> str:
        """The prompt as typed."""
        return self.prompt.toPlainText()

    def run_text(self, text: str | None = None, max_new_tokens: int | None = None) -> str | None:
        """Run ``text`` (the prompt as typed when None) for ``max_new_tokens``; why it did
        not start, in words, or None when it did."""
        if text is not None:
            self.batch.setChecked(False)
            self.prompt.setPlainText(text)
        if max_new_tokens is not None:
            self.max_tokens.setValue(max_new_tokens)
        if self.request_run():
            return None
        return re.sub(r"<[^>]+>", "", self.token_count.text()) or "a run is going on"

    def show_saved(self, text: str, settings: GenerationSettings, tokens: int) -> None:
        """A saved run's prompt and settings in the boxes, for ``tokens`` new tokens."""
        self.batch.setChecked(False)
        self.prompt.setPlainText(text)
        self.settings_box.apply(settings)
        self.leave_room.setChecked(settings.leave_room)  # they decide what is run
        self.settings_box.recompute.setChecked(settings.recompute)
        self.seed.setValue(min(max(settings.seed or 0, 0), self.seed.maximum()))
        self.max_tokens.setValue(max(1, tokens))

    def replay(self, tokens: list[int]) -> bool:
        """Run the prompt with ``tokens`` forced as its new tokens (a saved run replayed);
        False when the panel did not start it (it has said why)."""
        self.runs.forced = list(tokens)
        self.request_run()
        if self.runs.forced is not None:
            self.runs.forced = None
            return False
        return True

    def use_sampling(self, settings: GenerationSettings) -> None:
        """The next generation's settings (the Sampling view's), shown in the panel."""
        self.settings_box.apply(settings)

    def _rerun(self) -> None:
        """Interventions changed: the shown prompt runs again with them (if idle), a
        loop turn later, so that a view that also asks for another prompt comes first."""
        self._rerun_timer.start()

    def rerun_pending(self) -> bool:
        """Whether a run asked for by a change of the interventions has yet to start."""
        return self._rerun_timer.isActive()

    def _rerun_now(self) -> None:
        if self.session.prompt is not None and not self.runs.running:
            plan = self.runs.branch_plan()  # its branches, made again under the change
            if plan:
                self.runs.next_note = (f"the run's {len(plan)} branch{'es' * (len(plan) > 1)} "
                                       "made again under this change")
            self.request_run()
            self.runs.replay = plan if self.runs.running else []

    # ------------------------------------------------------------------ remembered
    def save_settings(self, store=None) -> None:
        store = store or self.settings_store
        if store is None:
            return
        values = {**self.settings_box.values(), "prompt": self.prompt.toPlainText(),
                  "batch": self.batch.isChecked()}
        for key, value in values.items():
            store.setValue(f"generation/{key}", value)

    def restore_settings(self, store) -> None:
        """The last run's settings; a value that cannot be read keeps the default."""
        self.settings_store = store
        read = partial(stored, store)
        self.settings_box.restore(read)
        self.prompt.setPlainText(read("prompt", str, self.prompt.toPlainText())[:MAX_PROMPT_CHARS])
        self.batch.setChecked(read("batch", flag, "false"))

    # ------------------------------------------------------------------ views
    def _vocabulary(self) -> None:
        if self.session.model is not None:
            self.settings_box.set_vocabulary(self.session.model.config.vocab_size)

    def update_chips(self) -> None:
        if self.running:  # the run has its prompt; redraw the chips when it ends
            self._chips_pending = True
            return
        self._chips_pending = False
        # what is typed runs on the loaded model (also while a saved run is shown)
        tok, runs_on = self.session.input_tokenizer, self.session.loaded or self.session.model
        if not tok.ready() and not preload.busy() and not preload.started():
            preload.read_soon(tok.load)  # the window has not painted yet: not read here
        if not tok.ready() and preload.busy():  # read on a thread: chips a bit later
            self.token_count.setText("Reading GPT-2's vocabulary…")
            self._retokenize.start()
            return
        ctx = runs_on.config.context_length if runs_on else None
        if self.batch.isChecked():
            self._batch_chips(ctx)
            return
        try:
            ids = tok.encode(self.prompt.toPlainText())
        except ValueError as exc:  # the model's own tokenizer failed on it: said, kept
            self.token_ids = []
            self.chips.setHtml("")
            self._refuse(str(exc))
            return
        self.token_ids = ids
        self.chips.setHtml(chips_html(ids, tok))
        note, notices = "", []
        if ctx and ids:  # short here (a narrow column); the whole notice in the tooltip
            new = self.max_tokens.value()
            kept, notices = prepare_prompt(ids, ctx, new_tokens=new,
                                           leave_room=self.leave_room.isChecked(),
                                           tokenizer=tok)
            parts = [f"the last {len(kept)} run"] if len(kept) < len(ids) else []
            if not self.leave_room.isChecked() and new > ctx - len(kept):
                parts.append(f"slow after {ctx - len(kept)} new")
            if parts:
                note = f" — <span style='color:#b06000'>{html.escape('; '.join(parts))}</span>"
        self.token_count.setText(f"{len(ids)} tokens{note}")
        tip = "; ".join(notices)
        self.token_count.setToolTip(tip[:1].upper() + tip[1:])

    def _batch_chips(self, ctx: int | None) -> None:
        """One row of chips per prompt, padded to the longest with grey [pad] chips."""
        prompts = self.prompts()
        tok = self.session.input_tokenizer
        try:
            rows = [tok.encode(p) for p in prompts[:MAX_BATCH]]
        except ValueError as exc:  # the model's own tokenizer failed on one of them
            self._refuse(str(exc))
            return
        if ctx:
            rows = [r[-ctx:] for r in rows]
        self.token_ids = rows[0] if rows else []
        width = max((len(r) for r in rows), default=0)
        self.chips.setHtml(batch_chips_html(rows, tok))
        if not rows:
            self.token_count.setText("Batch: no prompts yet (one per line)")
            return
        lengths = ", ".join(str(len(r)) for r in rows)
        if len(prompts) > MAX_BATCH:  # say so, do not quietly show the first 16 as the batch
            self._refuse(f"{len(prompts)} prompts: at most {MAX_BATCH} run at once")
            return
        self.token_count.setText(f"Batch of {len(rows)} × {width} tokens (lengths {lengths}; "
                                 f"{sum(width - len(r) for r in rows)} padding)")

    def update_output(self) -> None:
        """Append the new steps' tokens (redraw everything only when the run changed)."""
        session = self.session
        if session.prompt is None or self._shown_prompt is not session.prompt or \
                self._shown_steps > len(session.steps) or self._shown_list is not session.steps:
            shown = session.current.step if session.current is not None else None
            self._shown_prompt, self._shown_steps, self.selected = session.prompt, 0, shown
            self._shown_list = session.steps  # another branch: drawn again
            self._redraw_output()
            return
        new = session.steps[self._shown_steps:]
        if new:
            cursor = self.output.textCursor()
            cursor.movePosition(cursor.MoveOperation.End)
            cursor.insertHtml("".join(self._token_html(step) for step in new))
            self._shown_steps = len(session.steps)
            self.output.ensureCursorVisible()

    def _token_html(self, step) -> str:
        colour = "#ffd27f" if self.selected == step.step else CHIP_COLOURS[step.step % 2]
        return (f"<a href='{step.step}' style='text-decoration:none; color:black'>"
                f"<span style='background:{colour}'>&nbsp;{html.escape(visible(self.session.tokenizer.token_piece(step.token_id)))}"
                f"<sub>&nbsp;{step.prob:.2g}</sub>&nbsp;</span></a> ")

    def _redraw_output(self) -> None:
        session = self.session
        if session.prompt is None:
            self.output.clear()
            return
        colour = "#ffd27f" if self.selected is None else "#e0e0e0"
        batch = session.prompt.batch
        what = (f"batch ({batch.size} prompts × {batch.width} tokens)" if batch is not None
                else f"prompt ({len(session.prompt.ids)} tokens)")
        prompt = (f"<a href='prompt' style='text-decoration:none; color:black'><span style='background:{colour}'>"
                  f"&nbsp;{what.replace(' ', '&nbsp;')}&nbsp;</span></a> ")  # one piece
        self.output.setHtml(prompt + "".join(self._token_html(s) for s in session.steps))
        self._shown_steps = len(session.steps)

    def output_count(self) -> int:
        """Clickable entries shown: the prompt pass and each generated token."""
        return (1 if self._shown_prompt is not None else 0) + self._shown_steps

    def select(self, index: int | None) -> None:
        """Show the prompt pass (None) or a generated step everywhere."""
        if self.session.prompt is None:
            return
        self.selected = index
        self.session.show_step(index)
        self._redraw_output()

    def sizeHint(self) -> QSize:  # noqa: N802
        return QSize(900, 200)
