"""The block graph with attention opened: pure geometry, no widgets.

The attention node becomes a frame of its own steps, in the book's order, on a grid of
three lanes — the query, key and value lanes — and four rows (GPT-2's)::

    W_query      W_key         W_value
    queries      keys          values ─┐
    scores  →    masked   →    weights │
    out_proj ←   joined   ←    context ←┘

A Llama block's has more rows: Qwen3's q_norm and k_norm, the rotations (RoPE) of the
queries and keys, and the keys and values shared by each group of query heads::

    W_query      W_key         W_value
    queries      keys          values
    q_norm       k_norm          │          (Qwen3)
    RoPE q       RoPE k          │
       │         keys shared   values shared ─┐
    scores  →    masked   →    weights        │
    out_proj ←   joined   ←    context  ←─────┘

Each step's node carries its own shape on a second line (the arrows inside the frame
are short and carry none). The block's other steps run up the right column from the
first dropout to the block's output, the feed-forward folded, so that the whole block
still fits a laptop's view; the shortcuts run in two lanes between the frame and that
column and enter their adds from the left.
"""

from __future__ import annotations

from ...core.gpt.config import GPTConfig
from ...core.gpt.nodes import (ATTENTION, BLOCK_INPUT, CONTEXT, CONTEXT_JOINED, HEADS_MIX, KEYS,
                               MASKED_SCORES, PATTERN, QUERIES, SCORES, SPLIT_KEYS, SPLIT_QUERIES,
                               SPLIT_VALUES, VALUES, as_order,
                               attention_inside, block_hook_name, block_input, block_steps,
                               block_title, model_nodes, node_for_hook, order_of,
                               residual_branches, shortcut_sources)
from .caps_layout import _after, _before
from .graph_layout import order_title
from .layout_types import Arrow, Layout, Metrics, Shortcut, Text, TextKind, _box

BASE_ROWS = 4  # a grid's rows at least: the projections, the heads, the scores, the mixing
PROJECTIONS = (QUERIES, KEYS, VALUES)  # its first row, in every family


def grid_of(order) -> tuple[tuple[str | None, ...], ...]:
    """The rows attention's steps are drawn in: the family's grid for the model's steps
    (GPT-2's four rows; a Llama block's six, Qwen3's with its q/k norms)."""
    order = as_order(order)
    return order.family.attention_grid(order.switches)


def inner_labels(order="pre") -> list[str]:
    order = as_order(order)
    return [node_for_hook(block_hook_name(0, key), order).label
            for row in grid_of(order) for key in row if key]


def layout_open(cfg: GPTConfig, layer: int, open_before: bool, open_after: bool,
                m: Metrics, lw: float, plw: float) -> Layout:
    """The layout of block ``layer`` with its attention opened; ``lw`` and ``plw`` are
    the widths the shape labels need (the widest inner shape is the score matrix's).
    Every step of the block carries its shape on a second line, so that no label needs
    room beside an arrow: the whole block fits a 1150 × 700 window's graph."""
    out = Layout()
    position = order_of(cfg)
    fh = m.line
    nh, pad = fh + 6, 6.0  # the block's input, above it, as in the folded graph
    ih, rg, hg = 2 * fh + 4, 8.0, 10.0  # a two-line node; the gaps between rows, lanes
    grid = grid_of(position)
    if len(grid) > BASE_ROWS:  # more steps, the same height: closer rows (room for a head)
        rg = 6.0
    name = lambda key: block_hook_name(layer, key)  # noqa: E731
    steps = block_steps(position)
    at = [s.key for s in steps].index(ATTENTION)
    above = list(steps[:at])  # LayerNorm 1 in Pre-LN, nothing in Post-LN
    right = list(steps[at + 1:])  # the rest, up the right column (bottom first)
    under = [right.pop(0)] if len(right) > RIGHT_AT_MOST else []  # Post-LN: under the frame
    before, after = model_nodes(position)
    labels = [s.label for s in steps if s.key != ATTENTION] + [n.label for n in before + after]
    nw = max(90.0, max(m.width(t) for t in labels) + 14)
    nb = max(max(m.width(s.label) for s in steps if s.key != ATTENTION), lw) + 14
    iw = max(max(m.width(t) for t in inner_labels(position)), plw, lw) + 14  # an inner node
    lanes = [6 + 4 + iw / 2 + i * (iw + hg) for i in range(3)]
    cxa = lanes[1]  # what feeds the frame sits over the key lane
    # a tall grid (a Llama block's): its first norm beside the block's input, over the
    # query lane, so that the whole block keeps GPT-2's height
    beside = len(grid) > BASE_ROWS and len(above) == 1
    y = pad
    for step in above:
        if beside:
            _two_line(out, name(step.key), step, lanes[0], -4 - ih / 2, min(nb, iw), ih)
            continue
        _two_line(out, name(step.key), step, cxa, y + ih / 2, nb, ih)
        y += ih + rg + 4
    ftop = 2.0 if beside else y  # beside: only the shortcut's line between input and frame
    rows, frame_right, fbottom = _frame(out, position, name, grid, lanes, ftop, fh, ih, rg, iw,
                                        beside)
    exit_ = out.boxes[name(HEADS_MIX)]
    for step in under:  # below out_proj, in its lane
        box = _two_line(out, name(step.key), step, exit_.cx, fbottom + rg + 4 + ih / 2, nb, ih)
        out.arrows.append(Arrow(exit_.name, box.name, [(exit_.cx, exit_.bottom), (box.cx, box.top)]))
        exit_ = box
    lane_a = frame_right + fh + 6  # the first add's shortcut
    lane_b = lane_a + fh + 6  # the second add's
    cxb = lane_b + 10 + nb / 2
    turn = max(exit_.bottom + 4 + ih / 2, pad + ih / 2 + (len(right) - 1) * (ih + rg))
    _right_column(out, right, name, exit_, cxb, turn, nb, ih, pad)
    inp = _feed(out, cfg, layer, cxa, fh, nh, nw, above, lanes, rows, ih, name, beside)
    _right_shortcuts(out, cfg, layer, inp, lane_a, lane_b, name, m, beside)
    edge = cxb + nb / 2 + 8  # the block's right edge: the texts above end there
    _caps_and_title(out, cfg, layer, inp, out.boxes[name(right[-1].key)], (open_before, open_after),
                    m, edge)
    for arrow in out.arrows:  # a node with its shape on its own line needs no label beside
        if arrow.source in out.two_line:
            arrow.label = None
    out.frame = (0.0, 0.0, edge, turn + ih / 2 + (3 if beside else 6))
    return out


RIGHT_AT_MOST = 6  # steps in the right column; a seventh (Post-LN) goes under the frame


def _frame(out: Layout, position, name, grid, lanes, ftop: float, fh: float, ih: float,
           rg: float, iw: float, beside: bool) -> tuple[list[float], float, float]:
    """Attention's frame, its title and its steps on the grid, joined; the rows' centres,
    the frame's right edge and its bottom."""
    rows = [ftop + fh + 10 + r * (ih + rg) + ih / 2 for r in range(len(grid))]
    frame_right = lanes[2] + iw / 2 + 12  # the values' route to the context runs inside
    fbottom = rows[-1] + ih / 2 + 6
    out.att_frame = (6.0, ftop, frame_right - 6.0, fbottom - ftop)
    out.att_name = name(ATTENTION)
    title = node_for_hook(name(ATTENTION), position).label
    # right of the query lane when the first norm feeds it from above (its arrow runs there)
    out.texts.append(Text(title, lanes[0] + 6 if beside else 6.0 + 6, ftop + 3, TextKind.ATT_TITLE))
    for r, row in enumerate(grid):
        for cx, key in zip(lanes, row):
            if key is not None:
                _two_line(out, name(key), node_for_hook(name(key), position), cx, rows[r], iw, ih)
    if len(grid) == BASE_ROWS:  # the four rows: their arrows drawn by hand
        _inner_arrows(out, name, lanes, rows, iw, ih, frame_right)
    else:
        _linked_arrows(out, name, position, grid, lanes, iw, frame_right)
    return rows, frame_right, fbottom


def _caps_and_title(out: Layout, cfg, layer: int, inp, top, opened: tuple[bool, bool],
                    m: Metrics, edge: float) -> None:
    """The lines about the blocks before and after (open or folded), the latter ending at
    the block's edge, and the title at the right of the line about the blocks before (it
    says "of N": no "× N" here, whose row the graph has no height for)."""
    fh = m.line
    nh, gap = fh + 6, fh + 5
    nw = max(90.0, max(m.width(n.label) for n in model_nodes(order_of(cfg))[0]) + 14)
    before_top = _before(out, cfg, layer, inp, opened[0], m, nh, gap, nw)
    after_top = _after(out, cfg, layer, top, opened[1], m, nh, gap, nw, 0.0)
    for text in out.texts:
        if text.kind == TextKind.CAP_AFTER:
            text.x = min(text.x, edge - m.width(text.text) - 4)
    title = f"{block_title(layer, cfg.n_layers)} · {order_title(cfg, layer)}"
    out.texts.append(Text(title, edge - m.bold_width(title) - 4, min(after_top - fh - 4, before_top),
                          TextKind.TITLE))


def _two_line(out: Layout, name: str, node, cx: float, cy: float, w: float, h: float):
    box = _box(out, name, node, node.label, cx, cy, w, h)
    out.two_line.add(name)
    return box


def _right_column(out: Layout, right, name, exit_, cxb: float, turn: float, nb: float,
                  ih: float, pad: float) -> None:
    """The steps after attention, up the right column from the turn (its bottom row) to
    the top, and the arrow from the last step on the left along the turn into the first."""
    step_y = (turn - pad - ih / 2) / max(1, len(right) - 1)
    for i, step in enumerate(right):
        _two_line(out, name(step.key), step, cxb, turn - i * step_y, nb, ih)
    for lower, upper in zip(right, right[1:]):
        a, b = out.boxes[name(lower.key)], out.boxes[name(upper.key)]
        out.arrows.append(Arrow(a.name, b.name, [(a.cx, a.top), (b.cx, b.bottom)]))
    first = out.boxes[name(right[0].key)]
    out.arrows.append(Arrow(exit_.name, first.name, [(exit_.cx, exit_.bottom), (exit_.cx, turn),
                                                     (first.left, turn)]))


def _inner_arrows(out: Layout, name, lanes, rows, iw: float, ih: float, frame_right: float) -> None:
    """The arrows between attention's steps, in the grid's lanes and rows."""
    box = lambda key: out.boxes[name(key)]  # noqa: E731

    def arrow(source: str, target: str, points) -> None:
        out.arrows.append(Arrow(name(source), name(target), points))

    for w, h in ((QUERIES, SPLIT_QUERIES), (KEYS, SPLIT_KEYS), (VALUES, SPLIT_VALUES)):
        a, b = box(w), box(h)
        arrow(w, h, [(a.cx, a.bottom), (b.cx, b.top)])
    q, k, s = box(SPLIT_QUERIES), box(SPLIT_KEYS), box(SCORES)
    arrow(SPLIT_QUERIES, SCORES, [(q.cx - iw / 6, q.bottom), (s.cx - iw / 6, s.top)])
    arrow(SPLIT_KEYS, SCORES, [(k.cx, k.bottom), (s.right - 10, s.top)])  # past its name
    for a_key, b_key in ((SCORES, MASKED_SCORES), (MASKED_SCORES, PATTERN)):
        a, b = box(a_key), box(b_key)
        arrow(a_key, b_key, [(a.right, a.cy), (b.left, b.cy)])
    w, c = box(PATTERN), box(CONTEXT)
    arrow(PATTERN, CONTEXT, [(w.cx, w.bottom), (c.cx, c.top)])
    v = box(SPLIT_VALUES)
    route = frame_right - 6
    arrow(SPLIT_VALUES, CONTEXT, [(v.right, v.cy), (route, v.cy), (route, c.cy), (c.right, c.cy)])
    for a_key, b_key in ((CONTEXT, CONTEXT_JOINED), (CONTEXT_JOINED, HEADS_MIX)):
        a, b = box(a_key), box(b_key)
        arrow(a_key, b_key, [(a.left, a.cy), (b.right, b.cy)])


def _linked_arrows(out: Layout, name, order, grid, lanes, iw: float, frame_right: float) -> None:
    """Each step joined to the steps it reads (the node table's inputs), drawn by where
    they sit: down a lane, along a row, from the key lane down into the scores' corner,
    from the value lane along a line under its row into the scores, and along the
    frame's right edge when a lane has nodes between the two."""
    at = {key: (r, c) for r, row in enumerate(grid) for c, key in enumerate(row) if key}
    box = lambda key: out.boxes[name(key)]  # noqa: E731
    for node in attention_inside(order):
        if node.key not in at:
            continue
        t = box(node.key)
        (tr, tc) = at[node.key]
        for source in node.inputs:
            if source not in at:
                continue
            (sr, sc), s = at[source], box(source)
            if sr == tr:  # along the row
                points = [(s.right, s.cy), (t.left, t.cy)] if sc < tc else [(s.left, s.cy), (t.right, t.cy)]
            elif sc == tc and not any(at.get(k) for k in at if at[k][1] == sc and sr < at[k][0] < tr):
                dx = -iw / 6 if node.key == SCORES else 0.0  # the keys come in at its corner
                points = [(s.cx + dx, s.bottom), (t.cx + dx, t.top)]
            elif sc == tc:  # down a lane past other steps: along the frame's right edge
                route = frame_right - 6
                points = [(s.right, s.cy), (route, s.cy), (route, t.cy), (t.right, t.cy)]
            elif sc == tc + 1:  # the key lane into the scores' corner
                points = [(s.cx, s.bottom), (t.right - 10, t.top)]
            else:  # further right: down under its row, across, into the corner
                bus = s.bottom + (t.top - s.bottom) / 2
                points = [(s.cx, s.bottom), (s.cx, bus), (t.right - 10, bus), (t.right - 10, t.top)]
            out.arrows.append(Arrow(name(source), name(node.key), points))


def _feed(out: Layout, cfg, layer, cxa, fh, nh, nw, above, lanes, rows, ih, name,
          beside: bool = False):
    """The block's input above the frame's key lane, the arrows down to what comes
    first (LayerNorm 1, or the frame itself), and from there into the three projections.
    ``beside``: the first norm sits beside the input, which then carries its own shape."""
    position = order_of(cfg)
    input_name = block_input(layer, position)
    node = node_for_hook(input_name, position)  # block 0's: the embeddings' one name
    label = node.label if layer == 0 else f"Block {layer - 1} output"
    feeder = out.boxes[name(above[-1].key)] if above else None
    top_row = rows[0] - ih / 2
    bus = top_row - 7
    if beside:
        inp = _two_line(out, input_name, node, cxa, feeder.cy, out.boxes[name(QUERIES)].w, ih)
        inp.label = label
        out.arrows.append(Arrow(inp.name, feeder.name, [(inp.left, inp.cy), (feeder.right, feeder.cy)]))
        into = [name(k) for k in PROJECTIONS]
        out.arrows.append(Arrow(feeder.name, into[0], [(lanes[0], feeder.bottom), (lanes[0], top_row)]))
        for cx, target in ((lanes[1], into[1]), (lanes[2], into[2])):
            out.arrows.append(Arrow(feeder.name, target, [(lanes[0], bus), (cx, bus), (cx, top_row)]))
        return inp
    inp = _box(out, input_name, node, label, cxa, -(fh + 4) - nh / 2, nw, nh)
    feeder = feeder or inp
    if above:  # the input into LayerNorm 1; its label on the left (the shortcut forks right)
        first = out.boxes[name(above[0].key)]
        out.arrows.append(Arrow(inp.name, first.name, [(inp.cx, inp.bottom), (first.cx, first.top)],
                                (inp.cx - 5, inp.bottom + 2), label_right=True))
    into = [name(k) for k in PROJECTIONS]  # the first row in every family
    label = (feeder.cx - 5, feeder.bottom + 2) if feeder is inp else None  # LayerNorm 1: its own line
    out.arrows.append(Arrow(feeder.name, into[1], [(feeder.cx, feeder.bottom), (lanes[1], top_row)],
                            label, label_right=feeder is inp))
    for cx, target in ((lanes[0], into[0]), (lanes[2], into[2])):
        out.arrows.append(Arrow(feeder.name, target, [(lanes[1], bus), (cx, bus), (cx, top_row)]))
    return inp


def _right_shortcuts(out: Layout, cfg, layer, inp, lane_a: float, lane_b: float, name, m,
                     beside: bool = False) -> None:
    """The first add's shortcut forks on the arrow leaving the block's input and runs down
    lane a; the second's forks on the arrow leaving its source (in the right column) and
    runs up lane b; both enter their adds from the left."""
    sources = shortcut_sources(order_of(cfg))
    for add_key, lane in zip(residual_branches(order_of(cfg)), (lane_a, lane_b)):
        src_key = sources[add_key]
        add = out.boxes[name(add_key)]
        if src_key == BLOCK_INPUT:
            y0 = inp.bottom + 4
            pts = [(inp.cx, y0), (lane, y0), (lane, add.cy), (add.left, add.cy)]
            if beside:  # the input's arrow leaves to the left: the shortcut from its bottom
                y0 = inp.bottom + 3
                pts = [(inp.cx, inp.bottom), (inp.cx, y0), (lane, y0), (lane, add.cy), (add.left, add.cy)]
            src = inp.name
        else:
            s = out.boxes[name(src_key)]
            y0 = s.top - 4
            pts = [(s.cx, y0), (lane, y0), (lane, add.cy), (add.left, add.cy)]
            src = s.name
        ys = [p[1] for p in pts]
        out.shortcuts.append(Shortcut(add.name, src, pts,
                                      (lane - 3, (min(ys) + max(ys)) / 2 + m.width("shortcut") / 2)))
