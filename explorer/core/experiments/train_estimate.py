"""How long training has left, measured on this machine while it runs: everything the
run still has to do — its steps, its evaluations (each with its sample) and its
snapshots — each at the time it took here. The first step warms up and is left out;
nothing is said before two steps have been timed, and until two evaluations have, the
time left is a range (their cost taken from none to five steps each)."""

from __future__ import annotations

import math
import statistics

from .snapshots import SnapshotEvent, snapshot_plan
from .training import EvalEvent, StepEvent

MEASURING = "measuring…"
RECENT = 20  # the steps a step's time is taken from (the latest: the machine may change)
UNMEASURED_EVAL = (0.0, 5.0)  # an evaluation's cost in steps before one is timed: a range


class Estimate:
    def __init__(self, total_steps: int | None, eval_every: int = 25, snapshots: int = 0) -> None:
        self.total = total_steps  # None: a time limit instead of a number of steps
        self.eval_every = eval_every
        self.snapshots = set(snapshot_plan(total_steps, snapshots)) if total_steps else set()
        self.last: StepEvent | None = None
        self.steps: list[float] = []  # each step's seconds, the first left out
        self.evals: list[float] = []  # each evaluation's seconds (its sample included)
        self.snaps: list[float] = []
        self.seen: set[tuple[str, int]] = set()  # the evaluations and snapshots done

    def add(self, event) -> None:
        if isinstance(event, StepEvent):
            if self.last is not None:
                self.steps = (self.steps + [event.seconds])[-RECENT:]
            self.last = event
        elif isinstance(event, EvalEvent):
            self.seen.add(("eval", event.step))
            if event.step > 0:  # the first: a cold start
                self.evals.append(event.seconds)
        elif isinstance(event, SnapshotEvent):
            self.seen.add(("snapshot", event.step))
            self.snaps.append(event.seconds)

    def seconds_per_step(self) -> float | None:
        return statistics.fmean(self.steps) if self.steps else None

    def _left(self) -> tuple[int, int, int]:
        """Steps, evaluations and snapshots still to come."""
        done = self.last.step if self.last else 0
        due = range(done, self.total + 1)  # this step's may still come
        evals = sum(1 for s in due if (s % self.eval_every == 0 or s == self.total)
                    and ("eval", s) not in self.seen)
        snaps = sum(1 for s in self.snapshots if s >= done and ("snapshot", s) not in self.seen)
        return self.total - done, evals, snaps

    def seconds_left(self) -> tuple[float, float] | None:
        """(lowest, highest) seconds left: equal once an evaluation has been timed."""
        per_step = self.seconds_per_step()
        if per_step is None or self.total is None:
            return None
        steps, evals, snaps = self._left()
        snap = statistics.fmean(self.snaps) if self.snaps else 0.0
        base = steps * per_step + snaps * snap
        if self.evals:
            each = statistics.fmean(self.evals)
            return base + evals * each, base + evals * each
        lo, hi = UNMEASURED_EVAL
        return base + evals * lo * per_step, base + evals * hi * per_step

    def text(self) -> str:
        """'about 4 min left (310 tokens/s here)', '3–6 min left' until an evaluation has
        been timed, or 'measuring…' before two steps."""
        left = self.seconds_left()
        if left is None:
            return MEASURING
        lo, hi = left
        rate = f" ({self.last.tokens_per_second:,.0f} tokens/s here)"
        if hi < 60:
            return f"under a minute left{rate}"
        low, high = math.ceil(lo / 60), math.ceil(hi / 60)
        if low == high:
            return f"about {low} min left{rate}"
        return f"{'under 1' if lo < 60 else low}–{high} min left{rate}"


def result_words(evals: list) -> str:
    """What a finished run got, honestly: the validation loss against where it started
    and its lowest, and what to expect of a model trained for minutes on one short
    story (``evals``: the run's EvalEvents in order)."""
    if not evals:
        return "Done."
    first, last = evals[0], evals[-1]
    best = min(evals, key=lambda e: e.val_loss)
    words = (f"Done: validation loss {last.val_loss:.2f} (at the start {first.val_loss:.2f}, "
             f"lowest {best.val_loss:.2f} at step {best.step}).")
    if best.step < last.step and last.val_loss > best.val_loss:
        words += (" The validation loss stopped falling while the training loss went on: "
                  "trained on one short story, the model starts to memorise it, as in the "
                  "book's chapter 5.")
    else:
        words += (" Trained for minutes on one short story, it writes words of the story, "
                  "not sense; a longer run starts to memorise the text (chapter 5).")
    return words
