"""The caps above a block in the graph: what runs before it (the embeddings, the blocks
between) and what runs after it (the blocks after, the final norm, the output head),
folded to one line or open (pure geometry, no widgets)."""

from __future__ import annotations

from ...core.gpt.nodes import POSITION_EMBEDDING, Node, block_input, model_nodes, order_of
from .layout_types import Arrow, Box, Layout, Metrics, Text, TextKind, _box


def _before(out: Layout, cfg, layer: int, inp: Box, open_: bool, m: Metrics, nh: float,
            gap: float, nw: float) -> float:
    """The cap above the block's input: folded, one line saying what ran before; open,
    the embeddings (and a note on the blocks between). Returns its top."""
    fh = m.line
    before, _ = model_nodes(order_of(cfg))
    between = "" if layer == 0 else ("block 0" if layer == 1 else f"blocks 0–{layer - 1}")
    if not any(n.key == POSITION_EMBEDDING for n in before):  # RoPE puts positions in attention
        return _before_chain(out, cfg, layer, inp, open_, m, nh, gap, nw, before, between)
    tok, pos, emb_add, drop = before
    if not open_:
        text = "▸ Token + position embeddings" + (f", {between}" if between else "")
        y = inp.top - gap - fh
        out.texts.append(Text(text, inp.left, y, TextKind.CAP_BEFORE))
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
                              d.bottom + 3, TextKind.NOTE))
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
    out.texts.append(Text("▾ Embeddings (click to fold)", t.left, y - fh + 2, TextKind.CAP_BEFORE))
    return y - fh + 2


def _before_chain(out: Layout, cfg, layer: int, inp: Box, open_: bool, m: Metrics,
                  nh: float, gap: float, nw: float, chain: tuple[Node, ...], between: str) -> float:
    """The cap of a block whose stream starts at the token embedding, with no position
    table (a Llama block; Gemma's scales it first): ``chain`` is what runs from the
    token ids to block 0's input, one node after another. Block 0's input is the chain's
    last node; a later block's cap unfolds to the whole chain and the blocks between.
    Returns its top."""
    fh = m.line
    shown = chain if layer else chain[:-1]  # block 0's input box is the chain's last node
    if not shown:  # no arrow: what comes in is token ids, not a node's tensor
        y = inp.top - 4 - fh
        out.texts.append(Text("from the token ids", inp.left, y, TextKind.NOTE))
        return y
    if not open_:
        text = "▸ " + " ".join(n.label for n in chain) + (f", {between}" if between else "")
        y = inp.top - gap - fh
        out.texts.append(Text(text, inp.left, y, TextKind.CAP_BEFORE))
        source = block_input(layer - 1, order_of(cfg)) if layer else shown[-1].key
        out.arrows.append(Arrow(source, inp.name, [(inp.cx, y + fh + 1), (inp.cx, inp.top)],
                                (inp.cx + 5, y + fh + 2)))
        return y
    cx = inp.cx
    below = inp
    for i, node in enumerate(reversed(shown)):  # upward from the block's input
        note = layer and i == 0  # the blocks between run after the chain's last node
        y = below.top - gap - (fh + 4 if note else 0) - nh
        box = _box(out, node.key, node, node.label, cx, y + nh / 2, nw, nh)
        out.arrows.append(Arrow(box.name, below.name, [(cx, box.bottom), (cx, below.top)],
                                (cx + 5, below.top - 2 - fh)))
        if note:
            text = f"⋮ {between} run here"
            out.texts.append(Text(text, cx - 6 - m.width(text), box.bottom + 3, TextKind.NOTE))
        below = box
    y = below.top - gap + 2
    title = "Embedding" if len(chain) == 1 else "Embedding, scaled"
    out.texts.append(Text(f"▾ {title} (click to fold)", below.left, y - fh + 2, TextKind.CAP_BEFORE))
    return y - fh + 2


def _after(out: Layout, cfg, layer: int, last: Box, open_: bool, m: Metrics, nh: float,
           gap: float, nw: float, frame_top: float) -> float:
    """The cap above the block's output: folded, one line saying what runs after; open,
    the final norm and the output head. Returns its top."""
    fh = m.line
    n = cfg.n_layers
    final, head = model_nodes(order_of(cfg))[1]
    rest = ("" if layer == n - 1 else f"block {n - 1}" if layer == n - 2 else f"blocks {layer + 1}–{n - 1}")
    label_y = frame_top - 2 - fh  # the output's label just above the frame, below the cap
    if not open_:
        text = "▸ " + (f"{rest}, " if rest else "") + "final norm, output head"
        y = frame_top - gap - fh
        out.texts.append(Text(text, last.left, y, TextKind.CAP_AFTER))
        out.arrows.append(Arrow(last.name, "", [(last.cx, last.top), (last.cx, y + fh + 1)],
                                (last.cx + 5, label_y)))
        return y
    cx = last.cx
    y = frame_top - gap - (fh + 4 if rest else 0) - nh
    f = _box(out, final.key, final, final.label, cx, y + nh / 2, nw, nh)
    out.arrows.append(Arrow(last.name, f.name, [(cx, last.top), (cx, f.bottom)], (cx + 5, label_y)))
    if rest:
        note = f"⋮ {rest} run here"
        out.texts.append(Text(note, cx - 6 - m.width(note), f.bottom + 3, TextKind.NOTE))
    y = f.top - gap - nh
    h = _box(out, head.key, head, head.label, cx, y + nh / 2, nw, nh)
    out.arrows.append(Arrow(f.name, h.name, [(cx, f.top), (cx, h.bottom)], (cx + 5, (f.top + h.bottom) / 2 - fh / 2)))
    y = h.top - gap - fh
    out.arrows.append(Arrow(h.name, "", [(cx, h.top), (cx, y + fh + 1)], (cx + 5, (y + fh + h.top) / 2 - fh / 2)))
    out.texts.append(Text("▾ Final norm, head (click to fold)", h.left, y, TextKind.CAP_AFTER))
    return y
