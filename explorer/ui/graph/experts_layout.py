"""A mixture of experts opened in the block graph: the router's top-k weights fan out to
one box for each expert and the experts join again into the feed-forward's output (the
frame around them, the weighted sum). Pure geometry, no widgets.

One row of at most ``SHOWN`` boxes, so that the block fits a laptop's screen with 8 or
128 experts: a model of up to ``SHOWN`` experts shows every expert, those no token was
routed to drawn as idle; a larger one shows the experts that ran in the shown pass, the
busiest first (drawn in their order), and one line says how many more ran and how many
sat idle. A box is its expert's output node (``ff.fc3.E``): a click shows its values."""

from __future__ import annotations

from dataclasses import dataclass

from ...core.gpt.nodes import block_hook_name, expert_nodes
from .layout_types import Arrow, Layout, Text, TextKind, _box

SHOWN = 8  # expert boxes in the row at most
ROW = "<experts>"  # the row's place among the column's keys


@dataclass(frozen=True)
class Chips:
    """The boxes of the row: each expert shown (its index) and whether it ran; what the
    row's note says of the rest."""

    experts: tuple[int, ...]
    idle: frozenset[int]
    note: str


def chips(n_experts: int, tokens: dict[int, int] | None) -> Chips:
    """The experts the row shows, from how many tokens each got in the shown pass
    (``tokens``; None before a pass)."""
    if n_experts <= SHOWN:
        ran = set(range(n_experts)) if tokens is None else {e for e, n in tokens.items() if n}
        return Chips(tuple(range(n_experts)), frozenset(set(range(n_experts)) - ran), "")
    if tokens is None:
        return Chips((), frozenset(), f"{n_experts} experts: run a prompt to see which ran")
    ran = sorted((e for e, n in tokens.items() if n), key=lambda e: (-tokens[e], e))
    shown = sorted(ran[:SHOWN - 1])
    more = len(ran) - len(shown)
    idle = n_experts - len(ran)
    note = f"+ {more} more ran" if more else ""
    note += ("; " if note else "+ ") + f"{idle} idle" if idle else ""
    return Chips(tuple(shown), frozenset(), note)


def row_height(p) -> float:
    """The room the row takes in the column: the fan's line below it, the boxes, the
    join's line above them."""
    return p.fh + p.nh + p.fh


def row_width(p, m) -> float:
    """The row's width from the column's left edge: its boxes, then its note."""
    n = len(p.chips.experts)
    return n * (chip_width(p, m) + 4) + (m.width(p.chips.note) + 8 if p.chips.note else 0)


def chip_width(p, m) -> float:
    return m.width(f"E{max(p.cfg.n_experts - 1, 0)}") + 12


def place(out: Layout, p, top: float, m) -> None:
    """The row of expert boxes with its top at ``top``, the fan from the top-k weights
    below it and the join into the block's add above it."""
    cfg, layer = p.cfg, p.layer
    routing = p.box(out, p.keys_b[p.keys_b.index(ROW) + 1])
    above = p.box(out, p.keys_b[p.keys_b.index(ROW) - 1])
    left = p.cxb - p.nw / 2
    w, h = chip_width(p, m), p.nh - 2
    join_y = top + p.fh / 2  # the join's line
    cy = top + p.fh + p.nh / 2
    fan_y = cy + p.nh / 2 + p.fh / 2  # the fan's line
    xs = [left + w / 2 + i * (w + 4) for i in range(len(p.chips.experts))]
    for e, x in zip(p.chips.experts, xs):
        node = expert_nodes(cfg, e)[-1]  # the expert's output
        name = block_hook_name(layer, node.key)
        _box(out, name, node, f"E{e}", x, cy, w, h)
        if e in p.chips.idle:
            out.idle.add(name)
        idle = e in p.chips.idle  # no token went there: its lines dashed
        out.arrows.append(Arrow(routing.name, name, [(x, fan_y), (x, cy + h / 2)], dashed=idle))
        out.arrows.append(Arrow(name, "", [(x, cy - h / 2), (x, join_y)], dashed=idle))
    if p.chips.note:  # right of the boxes
        out.texts.append(Text(p.chips.note, xs[-1] + w / 2 + 6 if xs else left, cy - p.fh / 2,
                              TextKind.NOTE))
    # the fan: up from the weights to a line under every box; the join: a line over them,
    # up into the add (the arrow carries the feed-forward's output, the weighted sum)
    ends = xs + [routing.cx]
    out.arrows.append(Arrow(routing.name, "", [(min(ends), fan_y), (max(ends), fan_y)]))
    out.arrows.append(Arrow(routing.name, "", [(routing.cx, routing.top), (routing.cx, fan_y)],
                            (routing.cx + 5, (routing.top + fan_y) / 2 - p.fh / 2)))
    ends = xs + [above.cx]
    ff = block_hook_name(layer, p.ff_parent)
    out.arrows.append(Arrow(ff, "", [(min(ends), join_y), (max(ends), join_y)]))
    frame_top = top - (p.fh + 6)  # its label between the add and the frame, as fc3's
    out.arrows.append(Arrow(ff, above.name, [(above.cx, join_y), (above.cx, above.bottom)],
                            (above.cx + 5, (above.bottom + frame_top) / 2 - p.fh / 2)))
