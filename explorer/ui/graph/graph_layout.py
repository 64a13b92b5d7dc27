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

from ...core.gpt.config import GPTConfig
from ...core.gpt.nodes import (ATTENTION, BLOCK_INPUT, FEED_FORWARD, PARENT_INPUT, Kind, Node,
                               block_hook_name, block_input, block_module_name, block_nodes,
                               block_title, drawn_beside, embeddings, input_node, model_nodes,
                               node_for_hook, order_of, residual_branches, residual_nodes,
                               shortcut_sources)
from . import experts_layout
from .caps_layout import _after, _before
from .experts_layout import ROW
from .layout_types import Arrow, Box, Layout, Metrics, Shortcut, Text, TextKind, _box

FLOOR_TOKENS = 8192  # a prompt longer than this lays the graph out again


def label_floors(cfg: GPTConfig) -> tuple[str, str]:
    """The widest shape labels a single prompt can give (a full context, or 8,192 tokens
    of a longer one): the layout keeps room for them, so no pass of one prompt lays the
    graph out again (only a batch with wider labels does, or a prompt past 8,192 tokens
    on a model of a longer context)."""
    t = min(cfg.context_length, FLOOR_TOKENS)
    return f"(1, {t}, {max(cfg.emb_dim, cfg.hidden_dim)})", f"(1, {cfg.n_heads}, {t}, {t})"


def ff_title(cfg: GPTConfig) -> str:
    """The feed-forward frame's title: its expansion, from the config, said as a width
    (a bare "× 4" beside the block's "× 12" read as four feed-forward layers)."""
    if cfg.n_experts:  # a mixture: how many experts, how many run for a token
        return f"Mixture of experts · {cfg.experts_per_token} of {cfg.n_experts} a token"
    ratio = cfg.hidden_dim / cfg.emb_dim
    return f"Feed-forward · {ratio:.3g}× wider inside"


PATTERN_LABEL = "weights"  # the attention pattern's chip beside attention (attn_weights)


def order_title(cfg: GPTConfig, layer: int | None = None) -> str:
    """The block's kind in a word or two, as its family names it: GPT-2's order (Pre-LN
    or Post-LN), or the family whose block it is; in a model with sliding layers, whether
    block ``layer``'s attention slides (and its window) or sees every earlier token."""
    title = order_of(cfg).title
    if layer is not None and cfg.sliding_layers:
        window = cfg.window(layer)
        title += f" · sliding window {window:,}" if window else " · full attention"
    return title


def layout_block(cfg: GPTConfig, layer: int, expand: bool, open_before: bool,
                 open_after: bool, m: Metrics, lw: float, plw: float,
                 tokens: dict[int, int] | None = None) -> Layout:
    """The layout of one block; ``lw`` and ``plw`` are the widths its shape labels and
    the attention pattern's label need (the graph lays out again when they grow); in a
    mixture of experts, ``tokens``: how many tokens each expert got in the shown pass."""
    out = Layout()
    p = _plan(cfg, layer, expand, m, lw, plw, tokens)
    _place_columns(out, p)
    _fork(out, p)
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
    title = f"{block_title(layer, cfg.n_layers)} · {block_module_name(layer)} · {order_title(cfg, layer)}"
    # on the line about the blocks before, or just above the line about those after
    title_y = before_top if before_top + fh + 6 <= after_top else after_top - fh - 4
    out.texts.append(Text(title, p.cxb - nw / 2, title_y, TextKind.TITLE))
    _shortcuts(out, p, inp, m)
    # the frame, and '× N' beside the block's output (the top of column B)
    out.times = f"× {cfg.n_layers}"
    times_left = max(last_b.right + 12, p.cxb + 5 + lw + 8)
    out.texts.append(Text(out.times, times_left, last_b.cy - m.big_line / 2, TextKind.TIMES))
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
        return self.expand and (key == ROW or _node_key_in(self.nodes, key, self.ff_parent))

    def height(self, key: str) -> float:
        return experts_layout.row_height(self) if key == ROW else self.nh


def _plan(cfg: GPTConfig, layer: int, expand: bool, m: Metrics, lw: float, plw: float,
          tokens: dict[int, int] | None = None) -> _Plan:
    """The steps of the block in two columns (the attention half down, the feed-forward
    half up), the nodes' width and every column's and lane's x."""
    p = _Plan()
    p.cfg, p.layer, p.expand, p.lw, p.m = cfg, layer, expand, lw, m
    p.fh = fh = m.line
    p.nh, p.gap = fh + 6, fh + 5  # a node's height; the room an arrow and its label need
    p.pad = 6
    position = order_of(cfg)
    p.nodes = nodes = block_nodes(position)
    p.pattern = drawn_beside(position).get(ATTENTION)
    p.ff_parent = FEED_FORWARD
    p.steps = steps = [nd for nd in nodes if nd.kind != Kind.PATTERN and
                       ((nd.parent is None and not (expand and nd.key == p.ff_parent)) or
                        (expand and nd.parent == p.ff_parent))]
    half = residual_nodes(position)[0]  # the first half ends here (add1, or norm1)
    cut = [s.key for s in steps].index(half) + 1
    # a feed-forward that forks (SwiGLU: fc2 reads what fc1 reads): the side branch is
    # drawn beside the column, the column runs through the gate
    p.side = [s.key for s in steps if s.parent == p.ff_parent and s.inputs[:1] == (PARENT_INPUT,)]
    ff = [s.key for s in steps if s.parent == p.ff_parent]
    p.fork_base = ff[0] if p.side else None  # the gate's first node: the side's row
    p.keys_a = [s.key for s in steps[:cut]]
    p.keys_b = [s.key for s in reversed(steps[cut:]) if s.key not in p.side]  # top-down
    p.chips = None
    if expand and cfg.n_experts:  # the experts' row between the weights and the add
        p.chips = experts_layout.chips(cfg.n_experts, tokens)
        p.keys_b.insert(1, ROW)
    p.input_name = block_input(layer, position)
    if layer == 0:  # what enters block 1 (GPT-2: the embeddings' dropout): one name everywhere
        p.input_node = node_for_hook(embeddings(position), position)
        p.input_label = p.input_node.label
    else:
        p.input_node = node_for_hook(p.input_name, position)
        p.input_label = f"Block {layer - 1} output"
    p.labels = {nd.key: nd.label for nd in steps}
    before, after = model_nodes(position)
    texts = [p.input_label, *p.labels.values(), *(nd.label for nd in before + after)]
    p.nw = nw = max(90.0, max(m.width(t) for t in texts) + 14)
    p.lane = lane = fh + 14  # a shortcut's lane, its word written beside the line
    p.cxa = cxa = lane + nw / 2
    p.chip_w = m.width(PATTERN_LABEL) + 14
    p.chip_left = cxa + nw / 2 + 12
    right_a = max(cxa + 5 + lw, p.chip_left + max(p.chip_w, plw) if p.pattern else 0) + 6
    # the second half reads another node than the first half's end (a parallel block: the
    # norm): that node's line comes down a lane of its own, left of the shortcut's
    p.reads = input_node(p.name(p.keys_b[-1]), position)
    p.reads_x = right_a + 2 if p.reads != p.name(p.keys_a[-1]) else None
    p.lane2 = right_a + fh + 6 + (8 if p.reads_x is not None else 0)
    p.cxb = cxb = p.lane2 + 10 + 8 + nw / 2
    p.ff_right = cxb + 5 + max(lw, m.bold_width(ff_title(cfg))) + 8
    if p.chips is not None:
        p.ff_right = max(p.ff_right, cxb - nw / 2 + experts_layout.row_width(p, m) + 8)
    if p.side:  # the gate's side of the fork at the column's left, the other at its right
        p.half_w = max(nw / 2 - 3, max(m.width(p.labels[k]) for k in p.side + _gate(p)) + 14)
        p.cx_left = cxb - nw / 2 + p.half_w / 2
        p.cx_right = max(cxb + nw / 2 - p.half_w / 2, p.cx_left + 5 + lw + 6 + p.half_w / 2)
        p.ff_right = max(p.ff_right, p.cx_right + 5 + lw + 8)
    return p


def _pack(p: _Plan, keys: list[str], gaps: list[float]) -> list[float]:
    """Top edges of the nodes, top-down, with ``gaps`` between them (frame room added
    where a feed-forward layer starts or ends)."""
    tops, y = [], 0.0
    for i, key in enumerate(keys):
        if p.in_ff(key) and (i == 0 or not p.in_ff(keys[i - 1])):
            y += p.fh + (2 if p.side else 6)  # the frame's title row (tighter over a fork)
        tops.append(y)
        y += p.height(key)
        if key == p.fork_base:
            y += p.fh - 4  # under the fork's row: the line both of its branches leave from
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
            if key == ROW:
                p.row_top = p.pad + t
                continue
            _box(out, p.name(key), _step(p.steps, key), p.labels[key], cx,
                 p.pad + t + p.nh / 2, p.nw, p.nh)
    p.bottom_row = p.pad + target + p.nh / 2  # both columns' last node's centre


def _gate(p: _Plan, side: str | None = None) -> list[str]:
    """The gate's nodes of a forked feed-forward: the column's nodes before the one that
    joins ``side`` (the first side branch if none) to them (fc1 and its activation)."""
    ff = [s for s in p.steps if s.parent == p.ff_parent]
    side = side or p.side[0]
    join = next(s for s in ff if side in s.inputs)
    return [s.key for s in ff[:ff.index(join)] if s.key not in p.side]


def _fork(out: Layout, p: _Plan) -> None:
    """A feed-forward that forks (SwiGLU): the gate's nodes (fc1, SiLU) narrowed to the
    column's left, the side branch (fc2) beside fc1 at its right, its arrow up to the
    node that joins them (the product)."""
    if not p.side:
        return
    for key in p.side:
        side_node = _step(p.steps, key)
        gate = _gate(p, key)
        for k in gate:
            b = p.box(out, k)
            b.cx, b.w = p.cx_left, p.half_w
        first = p.box(out, gate[0])
        _box(out, p.name(key), side_node, p.labels[key], p.cx_right, first.cy, p.half_w, first.h)
    p.gate = set(gate)


def _ff_frame_and_pattern(out: Layout, p: _Plan) -> None:
    """The feed-forward frame around its layers; the pattern's chip beside attention."""
    fh, nw = p.fh, p.nw
    if p.expand:
        inside = [p.box(out, k) for k in p.keys_b + p.keys_a + p.side if p.in_ff(k) and k != ROW]
        if inside:
            ftop = min([b.top for b in inside] + ([p.row_top] if p.chips else [])) - (fh + 6)
            fbottom = max(b.bottom for b in inside) + 5
            out.ff_frame = (p.cxb - nw / 2 - 8, ftop, p.ff_right - (p.cxb - nw / 2 - 8), fbottom - ftop)
            out.ff_name = p.name(p.ff_parent)
            out.texts.append(Text(ff_title(p.cfg), p.cxb + 6, ftop + 3, TextKind.FF_TITLE))
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
        if ROW in (lower, upper):  # the experts' fan and join
            continue
        a, b = p.box(out, lower), p.box(out, upper)
        hi, lo = b.bottom, a.top  # the free band between them, outside a frame's border
        if frame is not None and p.in_ff(lower) and not p.in_ff(upper):
            lo = frame[1]
        elif frame is not None and p.in_ff(upper) and not p.in_ff(lower):
            hi = frame[1] + frame[3]
        x = min(a.cx, b.cx)  # the narrow gate's side: straight up into a wider node
        points = [(x, a.top), (x, b.bottom)]
        if upper == p.fork_base:  # into the fork: up to its line, across, up into the gate
            bus = b.bottom + (fh - 4) / 2 + 1
            points = [(a.cx, a.top), (a.cx, bus), (b.cx, bus), (b.cx, b.bottom)]
            x, hi = a.cx, frame[1] + frame[3] if frame is not None else bus
        out.arrows.append(Arrow(a.name, b.name, points, (x + 5, (hi + lo) / 2 - fh / 2)))
    last_a, first_b, row = p.box(out, p.keys_a[-1]), p.box(out, p.keys_b[-1]), p.bottom_row
    label = (last_a.right + 4, row + p.nh / 2 + 1)  # under both nodes' row
    if p.reads_x is None:
        out.arrows.append(Arrow(last_a.name, first_b.name, [(last_a.right, row), (first_b.left, row)],
                                label))
    else:  # the second half reads another node (a parallel block's: the norm), not the add:
        # the stream turns into the shortcut's lane only, and that node's line comes down
        # its own lane into the second half's first node
        out.arrows.append(Arrow(last_a.name, "", [(last_a.right, row), (p.lane2, row)], label))
        src, x = out.boxes[p.reads], p.reads_x
        out.arrows.append(Arrow(p.reads, first_b.name, [(src.right, src.cy), (x, src.cy),
                                                        (x, row - 6), (first_b.left, row - 6)]))
    _side_arrows(out, p)
    if p.chips is not None:
        experts_layout.place(out, p, p.row_top, p.m)
    return row + p.nh / 2 + 1 + fh + 3


def _side_arrows(out: Layout, p: _Plan) -> None:
    """The fork's side branch: off the line that feeds the gate, up into its own node,
    then up into the node that joins the two (beside the gate's, or around its corner)."""
    fh = p.fh
    for key in p.side:
        side, base = p.box(out, key), p.box(out, p.fork_base)
        j = p.box(out, next(s.key for s in p.steps if key in s.inputs))
        feeder = next(a for a in out.arrows if a.target == base.name)
        if base.name == p.name(p.keys_b[-1]):  # the gate opens the half: fed from the left,
            x0, bus = feeder.points[-1][0] - 6, base.bottom + 9  # its side off that line, below
            points = [(x0, feeder.points[-1][1]), (x0, bus), (side.cx, bus), (side.cx, side.bottom)]
        else:  # fed from below: the side off the line that comes up, under the gate's row
            bus = base.bottom + (fh - 4) / 2 + 1
            points = [(feeder.points[0][0], bus), (side.cx, bus), (side.cx, side.bottom)]
        out.arrows.append(Arrow(feeder.source, side.name, points))
        label = (side.cx + 5, (side.top + j.bottom) / 2 - fh / 2)
        if side.cx <= j.right - 8:
            points = [(side.cx, side.top), (side.cx, j.bottom)]
        else:  # past the join's right edge: up beside it, then in from its right
            points = [(side.cx, side.top), (side.cx, j.cy), (j.right, j.cy)]
        out.arrows.append(Arrow(side.name, j.name, points, label))


def _shortcuts(out: Layout, p: _Plan, inp: Box, m: Metrics) -> None:
    """Each shortcut forks from the arrow leaving its source, runs in its lane and enters
    its add from the left."""
    sources = shortcut_sources(order_of(p.cfg))
    for add_key in residual_branches(order_of(p.cfg)):
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


def _step(steps, key: str) -> Node:
    return next(s for s in steps if s.key == key)


def _node_key_in(nodes, key: str, parent: str) -> bool:
    return any(nd.key == key and nd.parent == parent for nd in nodes)


