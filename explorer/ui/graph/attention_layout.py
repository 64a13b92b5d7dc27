"""The block graph with attention opened: pure geometry, no widgets.

The attention node becomes a frame of its own steps, in the book's order, on a grid of
three lanes — the query, key and value lanes — and four rows::

    W_query      W_key         W_value
    queries      keys          values ─┐
    scores  →    masked   →    weights │
    out_proj ←   joined   ←    context ←┘

Each step's node carries its own shape on a second line (the arrows inside the frame
are short and carry none). The block's other steps run up the right column from the
first dropout to the block's output, the feed-forward folded, so that the whole block
still fits a laptop's view; the shortcuts run in two lanes between the frame and that
column and enter their adds from the left.
"""

from __future__ import annotations

from ...core.gpt.config import GPTConfig
from ...core.gpt.nodes import (order_of, ATTENTION, BLOCK_INPUT, CONTEXT, CONTEXT_JOINED, HEAD_KEYS,
                               HEAD_QUERIES, HEAD_VALUES, HEADS_MIX, KEYS, MASKED_SCORES,
                               MODEL_NODES_BEFORE, PATTERN, QUERIES, SCORES, VALUES,
                               block_hook_name, block_input, block_steps,
                               block_title, node_for_hook, residual_branches, shortcut_sources)
from .graph_layout import Arrow, Layout, Metrics, Shortcut, Text, _after, _before, _box

GRID = ((QUERIES, KEYS, VALUES),
        (HEAD_QUERIES, HEAD_KEYS, HEAD_VALUES),
        (SCORES, MASKED_SCORES, PATTERN),
        (HEADS_MIX, CONTEXT_JOINED, CONTEXT))
ATTENTION_TITLE = "Multi-head attention"


def inner_labels() -> list[str]:
    return [node_for_hook(block_hook_name(0, key)).label for row in GRID for key in row]


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
    name = lambda key: block_hook_name(layer, key)  # noqa: E731
    steps = block_steps(position)
    at = [s.key for s in steps].index(ATTENTION)
    above = list(steps[:at])  # LayerNorm 1 in Pre-LN, nothing in Post-LN
    right = list(steps[at + 1:])  # the rest, up the right column (bottom first)
    under = [right.pop(0)] if len(right) > RIGHT_AT_MOST else []  # Post-LN: under the frame
    labels = [s.label for s in steps if s.key != ATTENTION] + \
             [n.label for n in MODEL_NODES_BEFORE] + ["Final LayerNorm", "Output head"]
    nw = max(90.0, max(m.width(t) for t in labels) + 14)
    nb = max(max(m.width(s.label) for s in steps if s.key != ATTENTION), lw) + 14
    iw = max(max(m.width(t) for t in inner_labels()), plw, lw) + 14  # an inner node
    lanes = [6 + 4 + iw / 2 + i * (iw + hg) for i in range(3)]
    cxa = lanes[1]  # what feeds the frame sits over the key lane
    y = pad
    for step in above:
        _two_line(out, name(step.key), step, cxa, y + ih / 2, nb, ih)
        y += ih + rg + 4
    ftop = y
    rows = [ftop + fh + 10 + r * (ih + rg) + ih / 2 for r in range(4)]
    frame_right = lanes[2] + iw / 2 + 12  # the values' route to the context runs inside
    fbottom = rows[3] + ih / 2 + 6
    out.att_frame = (6.0, ftop, frame_right - 6.0, fbottom - ftop)
    out.att_name = name(ATTENTION)
    out.texts.append(Text(ATTENTION_TITLE, 6.0 + 6, ftop + 3, "att-title"))
    for r, row in enumerate(GRID):
        for cx, key in zip(lanes, row):
            _two_line(out, name(key), node_for_hook(name(key), position), cx, rows[r], iw, ih)
    _inner_arrows(out, name, lanes, rows, iw, ih, frame_right)
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
    inp = _feed(out, cfg, layer, cxa, fh, nh, nw, above, lanes, rows, ih, name)
    _right_shortcuts(out, cfg, layer, inp, lane_a, lane_b, name, m)
    edge = cxb + nb / 2 + 8  # the block's right edge: the texts above end there
    _caps_and_title(out, cfg, layer, inp, out.boxes[name(right[-1].key)], (open_before, open_after),
                    m, edge)
    for arrow in out.arrows:  # a node with its shape on its own line needs no label beside
        if arrow.source in out.two_line:
            arrow.label = None
    out.frame = (0.0, 0.0, edge, turn + ih / 2 + 6)
    return out


RIGHT_AT_MOST = 6  # steps in the right column; a seventh (Post-LN) goes under the frame


def _caps_and_title(out: Layout, cfg, layer: int, inp, top, opened: tuple[bool, bool],
                    m: Metrics, edge: float) -> None:
    """The lines about the blocks before and after (open or folded), the latter ending at
    the block's edge, and the title at the right of the line about the blocks before (it
    says "of N": no "× N" here, whose row the graph has no height for)."""
    fh = m.line
    nh, gap = fh + 6, fh + 5
    nw = max(90.0, max(m.width(n.label) for n in MODEL_NODES_BEFORE) + 14)
    before_top = _before(out, cfg, layer, inp, opened[0], m, nh, gap, nw)
    after_top = _after(out, cfg, layer, top, opened[1], m, nh, gap, nw, 0.0)
    for text in out.texts:
        if text.kind == "cap-after":
            text.x = min(text.x, edge - m.width(text.text) - 4)
    order = "Pre-LN" if order_of(cfg) == "pre" else "Post-LN"
    title = f"{block_title(layer, cfg.n_layers)} · {order}"
    out.texts.append(Text(title, edge - m.bold_width(title) - 4, min(after_top - fh - 6, before_top),
                          "title"))


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

    for w, h in ((QUERIES, HEAD_QUERIES), (KEYS, HEAD_KEYS), (VALUES, HEAD_VALUES)):
        a, b = box(w), box(h)
        arrow(w, h, [(a.cx, a.bottom), (b.cx, b.top)])
    q, k, s = box(HEAD_QUERIES), box(HEAD_KEYS), box(SCORES)
    arrow(HEAD_QUERIES, SCORES, [(q.cx - iw / 6, q.bottom), (s.cx - iw / 6, s.top)])
    arrow(HEAD_KEYS, SCORES, [(k.cx, k.bottom), (s.right - 10, s.top)])  # past its name
    for a_key, b_key in ((SCORES, MASKED_SCORES), (MASKED_SCORES, PATTERN)):
        a, b = box(a_key), box(b_key)
        arrow(a_key, b_key, [(a.right, a.cy), (b.left, b.cy)])
    w, c = box(PATTERN), box(CONTEXT)
    arrow(PATTERN, CONTEXT, [(w.cx, w.bottom), (c.cx, c.top)])
    v = box(HEAD_VALUES)
    route = frame_right - 6
    arrow(HEAD_VALUES, CONTEXT, [(v.right, v.cy), (route, v.cy), (route, c.cy), (c.right, c.cy)])
    for a_key, b_key in ((CONTEXT, CONTEXT_JOINED), (CONTEXT_JOINED, HEADS_MIX)):
        a, b = box(a_key), box(b_key)
        arrow(a_key, b_key, [(a.left, a.cy), (b.right, b.cy)])


def _feed(out: Layout, cfg, layer, cxa, fh, nh, nw, above, lanes, rows, ih, name):
    """The block's input above the frame's key lane, the arrows down to what comes
    first (LayerNorm 1, or the frame itself), and from there into the three projections."""
    position = order_of(cfg)
    input_name = block_input(layer, position)
    node = MODEL_NODES_BEFORE[3] if layer == 0 else node_for_hook(input_name, position)
    label = node.label if layer == 0 else f"Block {layer} output"
    inp = _box(out, input_name, node, label, cxa, -(fh + 4) - nh / 2, nw, nh)
    feeder = out.boxes[name(above[-1].key)] if above else inp
    if above:  # the input into LayerNorm 1; its label on the left (the shortcut forks right)
        first = out.boxes[name(above[0].key)]
        out.arrows.append(Arrow(inp.name, first.name, [(inp.cx, inp.bottom), (first.cx, first.top)],
                                (inp.cx - 5, inp.bottom + 2), label_right=True))
    top_row = rows[0] - ih / 2
    bus = top_row - 7
    into = [name(k) for k in GRID[0]]
    label = (feeder.cx - 5, feeder.bottom + 2) if feeder is inp else None  # LayerNorm 1: its own line
    out.arrows.append(Arrow(feeder.name, into[1], [(feeder.cx, feeder.bottom), (lanes[1], top_row)],
                            label, label_right=feeder is inp))
    for cx, target in ((lanes[0], into[0]), (lanes[2], into[2])):
        out.arrows.append(Arrow(feeder.name, target, [(lanes[1], bus), (cx, bus), (cx, top_row)]))
    return inp


def _right_shortcuts(out: Layout, cfg, layer, inp, lane_a: float, lane_b: float, name, m) -> None:
    """The first add's shortcut forks on the arrow leaving the block's input and runs down
    lane a; the second's forks on the arrow leaving its source (in the right column) and
    runs up lane b; both enter their adds from the left."""
    sources = shortcut_sources(order_of(cfg))
    for add_key, lane in zip(residual_branches(), (lane_a, lane_b)):
        src_key = sources[add_key]
        add = out.boxes[name(add_key)]
        if src_key == BLOCK_INPUT:
            y0 = inp.bottom + 4
            pts = [(inp.cx, y0), (lane, y0), (lane, add.cy), (add.left, add.cy)]
            src = inp.name
        else:
            s = out.boxes[name(src_key)]
            y0 = s.top - 4
            pts = [(s.cx, y0), (lane, y0), (lane, add.cy), (add.left, add.cy)]
            src = s.name
        ys = [p[1] for p in pts]
        out.shortcuts.append(Shortcut(add.name, src, pts,
                                      (lane - 3, (min(ys) + max(ys)) / 2 + m.width("shortcut") / 2)))
