"""Ctrl+Enter's work as engine jobs: a prompt (its captured pass, then token by token
from the same forward's KV cache), or a batch of prompts in one pass. Feeds the session
(the pass, the steps, busy, a status line, errors); the prompt panel owns one."""

from __future__ import annotations

from dataclasses import replace

from PySide6.QtCore import QObject, QTimer

from ...core.run.batch import make_batch
from ...core.run.generation import GenerationSettings
from ...core.experiments.interventions import intervened
from ...core.base.cancel import check
from ...core.base.cpu_work import spare_core
from ...core.playground.branches import branch_stream
from ...core.run.sampling import probability
from ...core.run.passes import (Completed, Pass, prompt_then_generate, run_prompt, step_pass,
                                window_keep)
from .jobs import Job
from .session import Session

REASONS = {"stopped": "stopped by you", "eot": "reached <|endoftext|>",
           "max_new_tokens": "reached the token limit", "error": "failed", "batch": "done"}


RATE_TOKENS, RATE_SECONDS = 3, 0.5  # a rate is shown once measured over both


def said(report, specs: list):
    """``report``, with the prompt pass noting the interventions it ran with (the status
    line then says so)."""
    if not specs:
        return report

    def noted(value):
        if isinstance(value, Pass) and value.step is None:
            value.notices.append(f"with {len(specs)} intervention{'s' if len(specs) > 1 else ''} "
                                 "(What if tab)")
        report(value)
    return noted


class Runs(QObject):
    def __init__(self, session: Session, engine) -> None:
        super().__init__()
        self.session, self.engine = session, engine
        self.job: Job | None = None
        self.next_note = ""  # a word for the next run's prompt pass (branches left behind)
        self._step_times: list[float] = []
        self._status = ""  # the run's own last word (Stop's "Stopping…" aside)
        self._prompt_done = False
        self._notes = ""  # the prompt pass's notices (a cropped prompt)
        self.lazy = True  # statistics when something shows them (Keep.later)
        self.streams: dict[int, object] = {}  # branch -> its generation stream (its KV cache)
        self.settings: GenerationSettings | None = None  # the run's, which its branches keep
        self.forced: list[int] | None = None  # the next run replays these tokens (Open run)
        self.replay: list[tuple[int, int, int]] = []  # branches to make again: (line, step, token)

    @property
    def running(self) -> bool:
        return self.job is not None

    def start(self, ids: list[int], settings: GenerationSettings) -> Job | None:
        """The prompt pass, then generation; None when a run is going on or no model."""
        if self.running or self.session.model is None:
            return None
        self.session.leave_record()  # a saved run shown read-only: back to the loaded model
        self._begin(f"Running the prompt ({len(ids)} tokens)…")
        self._step_times = []
        engine = self.engine
        keep = self.keep()
        specs = self.session.active_interventions()
        forced, self.forced = self.forced, None
        if forced:  # a saved run replayed: as many steps as it has, whatever the panel says
            settings = replace(settings, max_new_tokens=len(forced))

        self.streams, self.settings = {}, settings

        def run(ctx):
            with intervened(ctx.model, specs, ids):
                return prompt_then_generate(ctx.model, ids, settings, said(ctx.report, specs),
                                            ctx.should_stop, keep,
                                            after_prompt=getattr(engine, "catch_up", None),
                                            streams=lambda st: self.streams.__setitem__(0, st),
                                            forced=forced)

        self.job = engine.submit(
            run, "prompt and generation", progress=self._pass, finished=self._end,
            failed=self._failed, cancelled=lambda: self._end("stopped"))
        return self.job

    def keep(self):
        """The window's pass (``passes.window_keep``) for the shown block and node; the
        statistics computed ahead, on the core torch leaves the window."""
        info = self.session.model
        return window_keep(info.config if info else None, self.session.layer, self.session.node,
                           self.session.attention_opened, later=self.lazy, ahead=spare_core())

    def start_batch(self, prompts: list[str]) -> Job | None:
        """Several prompts padded into one forward pass (nothing is generated)."""
        if self.running or self.session.model is None:
            return None
        self.session.leave_record()  # a saved run shown read-only: back to the loaded model
        try:
            batch = make_batch(prompts, self.session.model.config.context_length,
                               self.session.tokenizer)
        except ValueError as exc:
            self.session.report_error("GPT Block Explorer", str(exc))
            return None
        self._begin(f"Running {batch.describe()}…")
        specs = self.session.active_interventions()
        keep = replace(window_keep(self.session.model.config, self.session.layer,
                                   attention_opened=self.session.attention_opened,
                                   ahead=spare_core()), now=())

        def run(ctx):
            with intervened(ctx.model, specs, batch.sample(0)):
                return run_prompt(ctx.model, batch, keep, ctx.should_stop)

        self.job = self.engine.submit(
            run, "batch pass", finished=self._batch_done, failed=self._failed,
            cancelled=lambda: self._end("stopped"))
        return self.job

    def branch(self, token: int) -> Job | None:
        """Continue from the shown step with ``token`` instead of the one drawn there: a
        new branch, from the KV cache of the run it leaves, with its settings and the
        interventions that apply now."""
        s = self.session
        at = (s.current.step or 0) if s.current is not None else 0
        stream = self.streams.get(s.branch)
        why = ("a run is going on" if self.running else "the run shown is a saved one, "
               "read-only: open it with its model loaded to continue it" if s.record else
               "generate first: a branch continues "
               "the tokens of a run" if s.prompt is None or not s.steps else
               "this run kept no cache to continue from (Recompute all, or the context "
               "filled)" if stream is None or stream.cache is None else "")
        if why:
            s.report_error("Continue with this token", why[0].upper() + why[1:])
            return None
        base = s.steps[min(at, len(s.steps) - 1)]
        before = list(base.ids[:-1])  # what chose the step's token
        forced = replace(base, token_id=token, ids=before + [token],  # the step as chosen
                         prob=probability(base.next_logits, token))
        piece = s.tokenizer.token_piece(token)
        s.start_branch(f"{piece!r} at step {base.step}", s.steps[:base.step] + [forced])
        index, specs, first = s.branch, s.active_interventions(), base.step + 1
        self._begin(f"Branching at step {base.step} with {piece!r}…")
        self._step_times = []

        def run(ctx):
            with intervened(ctx.model, specs, s.prompt.ids):
                new = branch_stream(ctx.model, before, token, self.settings, stream.cache,
                                    capture=True)
                self.streams[index] = new
                seen = before + [token]
                for step in new:
                    seen.append(step.token_id)
                    ctx.report(replace(step_pass(step, seen), step=first + step.index))
                    check(ctx.should_stop)
                return new.stopped_by or "max_new_tokens"

        self.job = self.engine.submit(run, "branch", progress=self._pass, finished=self._end,
                                      failed=self._failed, cancelled=lambda: self._end("stopped"))
        return self.job

    def stop(self) -> None:
        if self.job is not None:
            self.job.cancel()  # checked between tokens and blocks
            self.session.set_status("Stopping…")

    # ------------------------------------------------------------------ results
    def _begin(self, status: str) -> None:
        self._prompt_done = False
        self._notes = ""
        self.session.set_busy(True)
        self._say(status)

    def _say(self, status: str) -> None:
        self._status = status
        self.session.set_status(status)

    def _pass(self, result: Pass | Completed) -> None:
        if isinstance(result, Completed):
            self.session.pass_completed(result.result)
            return
        if result.step is None:
            self._prompt_done = True
            if self.next_note:  # said once, with the run it is about
                result.notices.append(self.next_note)
                self.next_note = ""
            self.session.set_prompt(result)
            self._notes = "; ".join(result.notices)  # also said when the run ends
            self._say(f"Prompt pass: {len(result.ids)} tokens in {result.seconds:.2f} s"
                      + (f" — {self._notes}" if self._notes else ""))
            return
        self.session.add_step(result)
        self._step_times.append(result.seconds)  # seconds since generation started
        if len(self._step_times) > 1:
            self._say(f"Generating: {self._rate()}")

    def _rate(self) -> str:
        """'7 tokens, 21.3 tok/s': the tokens after the first over the time they took
        (the first comes from the prompt pass at once), shown once measured over at
        least RATE_TOKENS tokens and RATE_SECONDS."""
        n = len(self._step_times)
        span = self._step_times[-1] - self._step_times[0] if n > 1 else 0.0
        measured = n - 1 >= RATE_TOKENS and span >= RATE_SECONDS
        rate = f", {(n - 1) / span:.1f} tok/s" if measured else ""
        return f"{n} token{'s' if n != 1 else ''}{rate}"

    def _batch_done(self, result: Pass) -> None:
        self._prompt_done = True
        self.session.set_prompt(result)
        note = "; ".join(result.notices)
        self._say(f"Batch pass: {result.batch.describe() if result.batch else '1 prompt'}"
                  f" in {result.seconds:.2f} s" + (f" — {note}" if note else ""))
        self._end("batch")

    def _failed(self, message: str) -> None:
        self._end("error")
        self.session.report_error("GPT Block Explorer", message)

    def branch_plan(self) -> list[tuple[int, int, int]]:
        """Each branch as it was made: (the line it left, the step where, the token chosen
        there), in the order made — its steps are the line's own up to that step (the
        same passes), then the chosen one."""
        lines, plan = self.session.branches, []
        for i in range(1, len(lines)):
            steps = lines[i][1]
            shared = [next((k for k, (a, b) in enumerate(zip(steps, lines[j][1])) if a is not b),
                           min(len(steps), len(lines[j][1]))) for j in range(i)]
            k = max(shared)
            if k < len(steps):
                plan.append((shared.index(k), k, steps[k].token_id))
        return plan

    def _replay_next(self) -> None:
        """The next branch of the run before, made again on the new run (its line's steps
        as they now are, the same token chosen at the same step)."""
        while self.replay and not self.running:
            line, k, token = self.replay.pop(0)
            s = self.session
            if line < len(s.branches) and k < len(s.branches[line][1]):
                s.select_branch(line)
                s.show_step(k)
                self.branch(token)
                return
            self.session.set_status(f"A branch at step {k} was not made again: its line now "
                                    "ends before it")

    def _end(self, reason: str) -> None:
        self.job = None
        if self.replay:  # the branches of the run before, each made again in turn
            if reason in ("stopped", "error"):
                self.replay = []
            else:
                QTimer.singleShot(0, self._replay_next)
        self.session.set_busy(False)
        base = self._status
        if reason == "stopped" and not self._prompt_done:
            base = "Stopped during the prompt pass"
        elif self._step_times:  # what the run did, not what it was doing
            base = f"Generated {self._rate()}"
            if self._notes:
                reason = f"{REASONS.get(reason, reason)} ({self._notes})"
        self.session.set_status(f"{base} — {REASONS.get(reason, reason)}")
