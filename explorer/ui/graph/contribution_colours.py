"""The block graph coloured by "why this token?": each branch node of the drawn block by
its part of the explained logit (the Why view's answer), on a diverging scale around 0
(blue: against the token, red: for it), and the layer strip by each block's total."""

from __future__ import annotations

import numpy as np
from PySide6.QtGui import QColor

from ...core.gpt.nodes import eval_chain
from .graph_colours import colour_map

CONTRIBUTION = "part of the logit (Why)"
NEUTRAL = QColor("#ffffff")  # not a branch: apart from the scale's light grey 0


def diverging(value: float, top: float) -> QColor:
    """Blue below 0, white-ish at 0, red above, saturated at ±top."""
    t = 0.5 + 0.5 * max(-1.0, min(1.0, value / top)) if top > 0 else 0.5
    return colour_map("CET-D1").map(t, mode="qcolor")


def node_parts(why) -> dict[str, float]:
    """Every node that carries a part's tensor, with the part: the attention branch's
    dropout and attention itself, the feed-forward's dropout, block and Linear 2."""
    out = {}
    for part in why.attribution.parts:
        if part.node is not None and part.layer is not None:
            for name in eval_chain(part.node):
                out[name] = part.value
    return out


def scale(why) -> float:
    """One scale for every block: the largest part of any block."""
    values = [abs(p.value) for p in why.attribution.parts if p.layer is not None]
    return max(values, default=0.0) or 1.0


def colour_by_why(items: dict, why) -> tuple[str, np.ndarray | None]:
    """Fill the graph's items by the answer's parts (all grey without one); returns the
    legend's words and each block's total for the strip."""
    if why is None:
        for item in items.values():
            item.set_fill(NEUTRAL)
        return "Ask why a token was chosen (Why, Ctrl+Shift+W) to colour by it", None
    parts, top = node_parts(why), scale(why)
    for name, item in items.items():
        item.set_fill(diverging(parts[name], top) if name in parts else NEUTRAL)
    return (f"part of {why.tokenizer.token_piece(why.attribution.target)!r}'s logit: blue against, red "
            f"for (±{top:.3g}); white: not a branch", why.attribution.block_totals())


def strip_colours(totals: np.ndarray) -> list[QColor]:
    top = float(np.abs(totals).max()) if len(totals) else 0.0
    return [diverging(float(v), top or 1.0) for v in totals]
