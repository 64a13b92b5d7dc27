"""How long training has left, measured on this machine while it runs: the seconds per
step since the first step (which warms up and is left out), evaluations included, times
the steps left. Nothing is assumed before two steps have been timed."""

from __future__ import annotations

import math

from .training import StepEvent

MEASURING = "measuring…"


class Estimate:
    def __init__(self, total_steps: int | None) -> None:
        self.total = total_steps  # None: a time limit instead of a number of steps
        self.first: StepEvent | None = None
        self.last: StepEvent | None = None

    def add(self, event: StepEvent) -> None:
        if self.first is None:
            self.first = event
        self.last = event

    def seconds_per_step(self) -> float | None:
        first, last = self.first, self.last
        if first is None or last is None or last.step <= first.step:
            return None
        return (last.elapsed - first.elapsed) / (last.step - first.step)

    def seconds_left(self) -> float | None:
        per_step = self.seconds_per_step()
        if per_step is None or self.total is None:
            return None
        return max(0, self.total - self.last.step) * per_step

    def text(self) -> str:
        """'about 4 min left (310 tokens/s here)', or 'measuring…' before two steps."""
        left = self.seconds_left()
        if left is None:
            return MEASURING
        rate = f" ({self.last.tokens_per_second:,.0f} tokens/s here)"
        if left < 60:
            return f"under a minute left{rate}"
        return f"about {math.ceil(left / 60)} min left{rate}"


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
