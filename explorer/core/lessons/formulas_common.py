"""What every worked formula shares: what is asked (``Ask``), the record of one
(``Worked``), a node's row at a token, the numbers as the formulas write them, one
query's row over its keys."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from ..gpt.nodes import FINAL_NORM, block_hook_name, block_output, input_node

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


@dataclass(frozen=True)
class Ask:
    """One node's formula asked for at one token (and head) of a pass: what every
    kind's worker (``KindLesson.formula``) reads."""
    model: Any  # a BlockModel: its parameters are read, never changed
    name: str  # the hook name
    key: str  # its key in the block (or the model)
    layer: int | None
    node: Any  # its Node
    views: dict  # the pass's NodeViews, kept in full
    ids: list[int]
    pos: int
    head: int
    index: int  # the head's own index in its tensor: its key/value head for a kv_head node
    where: str  # "token ' moves' at position 2"
    captured: np.ndarray  # what the node captured there
    order: Any  # the model's block order


def _row(views: dict, name: str, pos: int) -> np.ndarray:
    """The node's vector at ``pos`` (the batch's first sample), in float64."""
    array = np.asarray(views[name].array, dtype=np.float64)
    if array.ndim == 2:  # the position embedding: (T, C)
        return array[pos]
    return array[0, pos]


def norm_input(ask: Ask) -> tuple[Any, np.ndarray]:
    """A norm's module and its input vector at the token: the node before it, or for the
    final norm the last block's output."""
    source = input_node(ask.name, ask.order) if ask.name != FINAL_NORM else \
        block_hook_name(ask.model.cfg.n_layers - 1, block_output(ask.order))
    return ask.model.get_submodule(ask.name), _row(ask.views, source, ask.pos)


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




def dyt(ask: Ask) -> Worked:
    """Dynamic Tanh where a norm would be: γ · tanh(α · x) + β, value by value."""
    name, where, captured = ask.name, ask.where, ask.captured
    module, x = norm_input(ask)
    alpha = float(_p(module.alpha)[0])
    scale, shift = _p(module.scale), _p(module.shift)
    value = scale * np.tanh(alpha * x) + shift
    lines = [f"{where}: α {_f(alpha)}; no mean or spread of the token is taken — each value "
             f"is squashed on its own, so the largest |x| here, {_f(float(np.abs(x).max()))}, "
             f"comes out at most |γ| + |β| away from β"]
    lines += [f"feature {i}: {_f(scale[i])} · tanh({_f(alpha)} · {_f(x[i])}) + {_f(shift[i])} = "
              f"{_f(value[i])}" for i in range(SHOWN)]
    return Worked(name, "y = γ · tanh(α · x) + β", lines, value, captured)
