"""Where every item of the block graph goes: pure geometry, no widgets.

The block is drawn as a "U" that fits a wide, short view (a laptop's centre): the first
half (the attention half) runs down the left column, the second half (the feed-forward
half) runs up the right column, and the residual stream leaves at the top right. Each
shortcut forks from the arrow leaving its source and runs in a lane on the left of its
column into its add. The embeddings before the block and the final norm and head after
it are thin caps that unfold on a click.

Sizes come from the font's metrics (``Metrics``), so nothing is drawn under another
item at any font size; every arrow has room for its shape label beside it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

from ...core.gpt.config import GPTConfig
from ...core.gpt.nodes import (order_of, ATTENTION, BLOCK_INPUT, FEED_FORWARD, MODEL_NODES_AFTER,
                               MODEL_NODES_BEFORE, Node, block_hook_name, block_input,
                               block_module_name, block_nodes, block_title, drawn_beside,
                               node_for_hook, residual_branches, residual_nodes, shortcut_sources)


@dataclass(frozen=True)
class Metrics:
    """The font's line height and a text-width measure (bold and the large '× N')."""
    line: float
    width: Callable[[str], float]
    bold_width: Callable[[str], float]
    big_width: Callable[[str], float]
    big_line: float


@dataclass
class Box:
    name: str  # hook name
    node: Node
    label: str
    cx: float
    cy: float
    w: float
    h: float

    @property
    def left(self) -> float:
        return self.cx - self.w / 2

    @property
    def right(self) -> float:
        return self.cx + self.w / 2

    @property
    def top(self) -> float:
        return self.cy - self.h / 2

    @property
    def bottom(self) -> float:
        return self.cy + self.h / 2


@dataclass
class Arrow:
    source: str  # the hook name whose tensor flows along it (its label's key)
    target: str  # a hook name, or "" for a cap
    points: list[tuple[float, float]]
    label: tuple[float, float] | None = None  # the label's top-left corner
    label_right: bool = False  # the label ends at that x (it is written leftwards)
    dashed: bool = False


@dataclass
class Shortcut:
    add: str  # the add it enters
    source: str  # the node whose output it carries
    points: list[tuple[float, float]]  # from the fork on the source's arrow to the add
    label: tuple[float, float]  # the rotated word's anchor (bottom-left before rotation)


@dataclass
class Text:
    text: str
    x: float
    y: float
    kind: str  # "title" | "ff-title" | "att-title" | "times" | "cap-before" | "cap-after" | "note"


@dataclass
class Layout:
    boxes: dict[str, Box] = field(default_factory=dict)
    arrows: list[Arrow] = field(default_factory=list)
    shortcuts: list[Shortcut] = field(default_factory=list)
    texts: list[Text] = field(default_factory=list)
    frame: tuple[float, float, float, float] = (0, 0, 0, 0)  # the block: x, y, w, h
    ff_frame: tuple[float, float, float, float] | None = None
    ff_name: str = ""
    times: str = ""
    att_frame: tuple[float, float, float, float] | None = None  # attention opened
    att_name: str = ""
    two_line: set[str] = field(default_factory=set)  # nodes that carry their own shape


def label_floors(cfg: GPTConfig) -> tuple[str, str]:
    """The widest shape labels a single prompt can give (a full context): the layout
    keeps room for them, so no pass of one prompt lays the graph out again (only a batch
    with wider labels does)."""
    t = cfg.context_length
    return f"(1, {t}, {max(cfg.emb_dim, cfg.hidden_dim)})", f"(1, {cfg.n_heads}, {t}, {t})"


def ff_title(cfg: GPTConfig) -> str:
    """The feed-forward frame's title: its expansion, from the config, said as a width
    (a bare "× 4" beside the block's "× 12" read as four feed-forward layers)."""
    ratio = cfg.hidden_dim / cfg.emb_dim
    return f"Feed-forward · {ratio:g}× wider inside"


PATTERN_LABEL = "weights"  # the attention pattern's chip beside attention (attn_weights)


def layout_block(cfg: GPTConfig, layer: int, expand: bool, open_before: bool,
                 open_after: bool, m: Metrics, lw: float, plw: float) -> Layout:
    """The layout of one block; ``lw`` and ``plw`` are the widths its shape labels and
    the attention pattern's label need (the graph lays out again when they grow)."""
    out = Layout()
    p = _plan(cfg, layer, expand, m, lw, plw)
    _place_columns(out, p)
    _ff_frame_and_pattern(out, p)
    frame_bottom = _column_arrows(out, p)
    # the block's input above column A, the caps above both columns, the title
    fh, nh, nw = p.fh, p.nh, p.nw
    inp = _box(out, p.input_name, p.input_node, p.input_label, p.cxa, -(fh + 4) - nh / 2, nw, nh)
    first_a = p.box(out, p.keys_a[0])
    out.arrows.append(Arrow(inp.name, first_a.name, [(inp.cx, inp.bottom), (first_a.cx, first_a.top)],
                            (inp.cx + 5, inp.bottom + 2)))
    before_top = _before(out, cfg, layer, inp, open_before, m, nh, p.gap, nw)
    last_b = p.box(out, p.keys_b[0])  # the top of column B: the block's output
    after_top = _after(out, cfg, layer, last_b, open_after, m, nh, p.gap, nw, 0.0)
    order = "Pre-LN" if order_of(cfg) == "pre" else "Post-LN"
    title = f"{block_title(layer, cfg.n_layers)} · {block_module_name(layer)} · {order}"
    out.texts.append(Text(title, p.cxb - nw / 2, min(after_top, before_top + fh + 6) - fh - 6, "title"))
    _shortcuts(out, p, inp, m)
    # the frame, and '× N' beside the block's output (the top of column B)
    out.times = f"× {cfg.n_layers}"
    times_left = max(last_b.right + 12, p.cxb + 5 + lw + 8)
    out.texts.append(Text(out.times, times_left, last_b.cy - m.big_line / 2, "times"))
    frame_right = max(p.cxb + 5 + lw, p.ff_right, times_left + m.big_width(out.times)) + 8
    out.frame = (0.0, 0.0, frame_right, frame_bottom)
    return out


class _Plan:
    """What the steps of ``layout_block`` share: sizes, the two columns and their x."""

    def name(self, key: str) -> str:
        return block_hook_name(self.layer, key)

    def box(self, out: Layout, key: str) -> Box:
        return out.boxes[self.name(key)]

    def in_ff(self, key: str) -> bool:
        return self.expand and _node_key_in(self.nodes, key, self.ff_parent)


def _plan(cfg: GPTConfig, layer: int, expand: bool, m: Metrics, lw: float, plw: float) -> _Plan:
    """The steps of the block in two columns (the attention half down, the feed-forward
    half up), the nodes' width and every column's and lane's x."""
    p = _Plan()
    p.cfg, p.layer, p.expand, p.lw = cfg, layer, expand, lw
    p.fh = fh = m.line
    p.nh, p.gap = fh + 6, fh + 5  # a node's height; the room an arrow and its label need
    p.pad = 6
    position = order_of(cfg)
    p.nodes = nodes = block_nodes(position)
    p.pattern = drawn_beside(position).get(ATTENTION)
    p.ff_parent = FEED_FORWARD
    p.steps = steps = [nd for nd in nodes if nd.kind != "pattern" and
                       ((nd.parent is None and not (expand and nd.key == p.ff_parent)) or
                        (expand and nd.parent == p.ff_parent))]
    half = residual_nodes(position)[0]  # the first half ends here (add1, or norm1)
    cut = [s.key for s in steps].index(half) + 1
    p.keys_a = [s.key for s in steps[:cut]]
    p.keys_b = [s.key for s in reversed(steps[cut:])]  # top-down: the column runs upwards
    p.input_name = block_input(layer, position)
    if layer == 0:
        p.input_node = MODEL_NODES_BEFORE[3]  # the embeddings' dropout: one name everywhere
        p.input_label = p.input_node.label
    else:
        p.input_node = node_for_hook(p.input_name, position)
        p.input_label = f"Block {layer} output"
    p.labels = {nd.key: nd.label for nd in steps}
    texts = [p.input_label, *p.labels.values(),
             *(nd.label for nd in MODEL_NODES_BEFORE + MODEL_NODES_AFTER)]
    p.nw = nw = max(90.0, max(m.width(t) for t in texts) + 14)
    p.lane = lane = fh + 14  # a shortcut's lane, its word written beside the line
    p.cxa = cxa = lane + nw / 2
    p.chip_w = m.width(PATTERN_LABEL) + 14
    p.chip_left = cxa + nw / 2 + 12
    right_a = max(cxa + 5 + lw, p.chip_left + max(p.chip_w, plw) if p.pattern else 0) + 6
    p.lane2 = right_a + fh + 6
    p.cxb = cxb = p.lane2 + 10 + 8 + nw / 2
    p.ff_right = cxb + 5 + max(lw, m.bold_width(ff_title(cfg))) + 8
    return p


def _pack(p: _Plan, keys: list[str], gaps: list[float]) -> list[float]:
    """Top edges of the nodes, top-down, with ``gaps`` between them (frame room added
    where a feed-forward layer starts or ends)."""
    tops, y = [], 0.0
    for i, key in enumerate(keys):
        if p.in_ff(key) and (i == 0 or not p.in_ff(keys[i - 1])):
            y += p.fh + 6  # the frame's title row
        tops.append(y)
        y += p.nh
        if p.in_ff(key) and (i == len(keys) - 1 or not p.in_ff(keys[i + 1])):
            y += 5  # the frame's bottom
        if i < len(gaps):
            y += gaps[i]
    return tops


def _place_columns(out: Layout, p: _Plan) -> None:
    """Each column packed, then spread so both end on one bottom row."""
    gaps_a = [2 * p.fh + 8 if k == ATTENTION and p.pattern else p.gap for k in p.keys_a[:-1]]
    gaps_b = [p.gap] * (len(p.keys_b) - 1)
    bottom_a, bottom_b = _pack(p, p.keys_a, gaps_a)[-1], _pack(p, p.keys_b, gaps_b)[-1]
    target = max(bottom_a, bottom_b)
    if gaps_a:
        gaps_a = [g + (target - bottom_a) / len(gaps_a) for g in gaps_a]
    if gaps_b:
        gaps_b = [g + (target - bottom_b) / len(gaps_b) for g in gaps_b]
    for keys, gaps, cx in ((p.keys_a, gaps_a, p.cxa), (p.keys_b, gaps_b, p.cxb)):
        for key, t in zip(keys, _pack(p, keys, gaps)):  # nodes start one pad below the top
            _box(out, p.name(key), _step(p.steps, key), p.labels[key], cx,
                 p.pad + t + p.nh / 2, p.nw, p.nh)
    p.bottom_row = p.pad + target + p.nh / 2  # both columns' last node's centre


def _ff_frame_and_pattern(out: Layout, p: _Plan) -> None:
    """The feed-forward frame around its layers; the pattern's chip beside attention."""
    fh, nw = p.fh, p.nw
    if p.expand:
        inside = [p.box(out, k) for k in p.keys_b + p.keys_a if p.in_ff(k)]
        if inside:
            ftop = min(b.top for b in inside) - (fh + 6)
            fbottom = max(b.bottom for b in inside) + 5
            out.ff_frame = (p.cxb - nw / 2 - 8, ftop, p.ff_right - (p.cxb - nw / 2 - 8), fbottom - ftop)
            out.ff_name = p.name(p.ff_parent)
            out.texts.append(Text(ff_title(p.cfg), p.cxb + 6, ftop + 3, "ff-title"))
    if p.pattern and ATTENTION in p.keys_a:  # its shape under it
        att = p.box(out, ATTENTION)
        chip = _box(out, p.name(p.pattern.key), p.pattern, PATTERN_LABEL,
                    p.chip_left + p.chip_w / 2, att.cy, p.chip_w, p.nh - 4)
        out.arrows.append(Arrow(p.name(p.pattern.key), "", [(att.right, att.cy), (chip.left, chip.cy)],
                                (chip.left, chip.bottom + 2), dashed=True))


def _column_arrows(out: Layout, p: _Plan) -> float:
    """Arrows down column A, up column B and the turn along the bottom; the frame's
    bottom edge."""
    fh, frame = p.fh, out.ff_frame
    for upper, lower in zip(p.keys_a, p.keys_a[1:]):
        a, b = p.box(out, upper), p.box(out, lower)
        out.arrows.append(Arrow(a.name, b.name, [(a.cx, a.bottom), (b.cx, b.top)], (a.cx + 5, b.top - 2 - fh)))
    for lower, upper in zip(reversed(p.keys_b), list(reversed(p.keys_b))[1:]):
        a, b = p.box(out, lower), p.box(out, upper)
        hi, lo = b.bottom, a.top  # the free band between them, outside a frame's border
        if frame is not None and p.in_ff(lower) and not p.in_ff(upper):
            lo = frame[1]
        elif frame is not None and p.in_ff(upper) and not p.in_ff(lower):
            hi = frame[1] + frame[3]
        out.arrows.append(Arrow(a.name, b.name, [(a.cx, a.top), (b.cx, b.bottom)],
                                (a.cx + 5, (hi + lo) / 2 - fh / 2)))
    last_a, first_b, row = p.box(out, p.keys_a[-1]), p.box(out, p.keys_b[-1]), p.bottom_row
    out.arrows.append(Arrow(last_a.name, first_b.name, [(last_a.right, row), (first_b.left, row)],
                            (last_a.right + 4, row + p.nh / 2 + 1)))  # under both nodes' row
    return row + p.nh / 2 + 1 + fh + 3


def _shortcuts(out: Layout, p: _Plan, inp: Box, m: Metrics) -> None:
    """Each shortcut forks from the arrow leaving its source, runs in its lane and enters
    its add from the left."""
    sources = shortcut_sources(order_of(p.cfg))
    for add_key in residual_branches():
        src_key = sources[add_key]
        src = inp.name if src_key == BLOCK_INPUT else p.name(src_key)
        add = p.box(out, add_key)
        if src == inp.name:  # fork on the arrow into the first node, lane on the left
            y0 = inp.bottom + 4
            pts = [(p.cxa, y0), (p.lane - 8, y0), (p.lane - 8, add.cy), (add.left, add.cy)]
            word_x = p.lane - 11
        else:  # fork on the turn (the source is column A's last node), lane between
            pts = [(p.lane2, p.bottom_row), (p.lane2, add.cy), (add.left, add.cy)]
            word_x = p.lane2 - 3
        ys = [q[1] for q in pts]
        out.shortcuts.append(Shortcut(p.name(add_key), src, pts,
                                      (word_x, (min(ys) + max(ys)) / 2 + m.width("shortcut") / 2)))


def _before(out: Layout, cfg, layer: int, inp: Box, open_: bool, m: Metrics, nh: float,
            gap: float, nw: float) -> float:
    """The cap above the block's input: folded, one line saying what ran before; open,
    the embeddings (and a note on the blocks between). Returns its top."""
    fh = m.line
    tok, pos, emb_add, drop = MODEL_NODES_BEFORE
    between = "" if layer == 0 else ("block 1" if layer == 1 else f"blocks 1–{layer}")
    if not open_:
        text = "▸ Token + position embeddings" + (f", {between}" if between else "")
        y = inp.top - gap - fh
        out.texts.append(Text(text, inp.left, y, "cap-before"))
        out.arrows.append(Arrow(emb_add.key if layer == 0 else block_input(layer - 1, order_of(cfg)),
                                inp.name, [(inp.cx, y + fh + 1), (inp.cx, inp.top)], (inp.cx + 5, y + fh + 2)))
        return y
    cx = inp.cx
    y = inp.top
    below = inp
    if layer:  # drop_emb, then the note on the blocks between, then the input
        y -= gap + fh + 4 + nh
        d = _box(out, drop.key, drop, drop.label, cx, y + nh / 2, nw, nh)
        out.arrows.append(Arrow(d.name, inp.name, [(cx, d.bottom), (cx, inp.top)],
                                (cx + 5, inp.top - 2 - fh)))
        out.texts.append(Text(f"⋮ {between} run here", cx - 6 - m.width(f"⋮ {between} run here"),
                              d.bottom + 3, "note"))
        below = d
    y = below.top - gap - nh
    e = _box(out, emb_add.key, emb_add, emb_add.label, cx, y + nh / 2, nw, nh)
    out.arrows.append(Arrow(e.name, below.name, [(cx, e.bottom), (cx, below.top)], (cx + 5, below.top - 2 - fh)))
    y = e.top - (2 * fh + 8) - nh
    half = nw / 2 + 4
    t = _box(out, tok.key, tok, tok.label, cx - half, y + nh / 2, nw, nh)
    p = _box(out, pos.key, pos, pos.label, cx + half, y + nh / 2, nw, nh)
    bend = t.bottom + fh + 6  # each label under its own node, the arrows bend below them
    out.arrows.append(Arrow(t.name, e.name, [(t.cx, t.bottom), (t.cx, bend), (e.cx - 12, bend),
                                             (e.cx - 12, e.top)], (t.cx - 5, t.bottom + 2),
                            label_right=True))
    out.arrows.append(Arrow(p.name, e.name, [(p.cx, p.bottom), (p.cx, bend), (e.cx + 12, bend),
                                             (e.cx + 12, e.top)], (p.cx + 5, p.bottom + 2)))
    y = t.top - gap + 2
    out.texts.append(Text("▾ Embeddings (click to fold)", t.left, y - fh + 2, "cap-before"))
    return y - fh + 2


def _after(out: Layout, cfg, layer: int, last: Box, open_: bool, m: Metrics, nh: float,
           gap: float, nw: float, frame_top: float) -> float:
    """The cap above the block's output: folded, one line saying what runs after; open,
    the final norm and the output head. Returns its top."""
    fh = m.line
    n = cfg.n_layers
    final, head = MODEL_NODES_AFTER
    rest = ("" if layer == n - 1 else f"block {n}" if layer == n - 2 else f"blocks {layer + 2}–{n}")
    label_y = frame_top - 2 - fh  # the output's label just above the frame, below the cap
    if not open_:
        text = "▸ " + (f"{rest}, " if rest else "") + "final norm, output head"
        y = frame_top - gap - fh
        out.texts.append(Text(text, last.left, y, "cap-after"))
        out.arrows.append(Arrow(last.name, "", [(last.cx, last.top), (last.cx, y + fh + 1)],
                                (last.cx + 5, label_y)))
        return y
    cx = last.cx
    y = frame_top - gap - (fh + 4 if rest else 0) - nh
    f = _box(out, final.key, final, final.label, cx, y + nh / 2, nw, nh)
    out.arrows.append(Arrow(last.name, f.name, [(cx, last.top), (cx, f.bottom)], (cx + 5, label_y)))
    if rest:
        note = f"⋮ {rest} run here"
        out.texts.append(Text(note, cx - 6 - m.width(note), f.bottom + 3, "note"))
    y = f.top - gap - nh
    h = _box(out, head.key, head, head.label, cx, y + nh / 2, nw, nh)
    out.arrows.append(Arrow(f.name, h.name, [(cx, f.top), (cx, h.bottom)], (cx + 5, (f.top + h.bottom) / 2 - fh / 2)))
    y = h.top - gap - fh
    out.arrows.append(Arrow(h.name, "", [(cx, h.top), (cx, y + fh + 1)], (cx + 5, (y + fh + h.top) / 2 - fh / 2)))
    out.texts.append(Text("▾ Final norm, head (click to fold)", h.left, y, "cap-after"))
    return y


def _box(out: Layout, name: str, node: Node, label: str, cx: float, cy: float, w: float, h: float) -> Box:
    b = Box(name, node, label, cx, cy, w, h)
    out.boxes[name] = b
    return b


def _step(steps, key: str) -> Node:
    return next(s for s in steps if s.key == key)


def _node_key_in(nodes, key: str, parent: str) -> bool:
    return any(nd.key == key and nd.parent == parent for nd in nodes)


