"""What every worked formula shares: the record of one (``Worked``), a node's row at a
token, the numbers as the formulas write them, one query's row over its keys."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import torch

SHOWN = 3  # features worked through


@dataclass(frozen=True)
class Worked:
    node: str
    formula: str  # the general formula, as the book writes it
    lines: list[str]  # this token's numbers put through it
    value: np.ndarray  # the recomputed output at the token (float64)
    captured: np.ndarray  # what the node captured there
    notes: list[str] = field(default_factory=list)

    @property
    def max_error(self) -> float:
        """The largest difference; equal infinities (a masked score's −inf) differ by 0."""
        if not self.value.size:
            return 0.0
        same = self.value == self.captured
        with np.errstate(invalid="ignore"):  # inf − inf where both are −inf: same, so 0
            return float(np.max(np.where(same, 0.0, np.abs(self.value - self.captured))))


def _row(views: dict, name: str, pos: int) -> np.ndarray:
    """The node's vector at ``pos`` (the batch's first sample), in float64."""
    array = np.asarray(views[name].array, dtype=np.float64)
    if array.ndim == 2:  # the position embedding: (T, C)
        return array[pos]
    return array[0, pos]


def _rows(views: dict, name: str, upto: int) -> np.ndarray:
    return np.asarray(views[name].array, dtype=np.float64)[0, :upto + 1]


def _p(module_param: torch.Tensor) -> np.ndarray:
    return module_param.detach().to("cpu", torch.float64).numpy()


def _f(x: float) -> str:
    return f"{x:.4g}"


ROW_WHOLE = 8  # a row of attention shown whole up to this many keys


def key_row(values: np.ndarray) -> str:
    """One query's row over its keys: every key up to ``ROW_WHOLE`` keys; beyond that the
    first, the largest and the last, with "…" wherever keys are left out — never a part
    of the row that reads as the whole."""
    n, top = len(values), int(np.argmax(values))
    shown = range(n) if n <= ROW_WHOLE else sorted({0, top, n - 1})
    parts, last = [], -1
    for i in shown:
        if i > last + 1:
            parts.append("…")
        parts.append(f"key {i} {_f(values[i])}" + (" (largest)" if n > ROW_WHOLE and i == top
                                                     else ""))
        last = i
    return ", ".join(parts)


