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
