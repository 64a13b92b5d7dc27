"""Where the norm sits, as node tables: a family's block in each norm position it has,
made from its Pre-LN block's parts (``Parts``) by the placement's own rule, with the
residual wiring that follows (which node each add's shortcut carries, which node its
branch is, the stream after each half). GPT-2's and the Llama / Qwen block's Pre-LN
(and GPT-2's Post-LN) are written out in their family files; the others are made here,
so that a norm's words say where it really is. No torch, no family."""

from __future__ import annotations

from dataclasses import dataclass, replace

from .family import BLOCK_INPUT, NormPosition
from .node_types import Kind, Node

P = NormPosition


@dataclass(frozen=True)
class Parts:
    """A family's block, in the pieces a placement rearranges: its norm's word and kind
    ("LayerNorm", "norm"), the pattern and attention, each dropout (None in a block
    without), the adds, the feed-forward's layers and the feed-forward itself."""

    word: str  # "LayerNorm", "RMSNorm"
    kind: Kind  # the norm's kind
    pattern: Node
    att: Node
    drop1: Node | None
    add1: Node
    ff_layers: tuple[Node, ...]
    ff: Node
    drop2: Node | None
    add2: Node


def _norm(parts: Parts, key: str, label: str, description: str, dyt: bool = False) -> Node:
    return Node(key, label, description, Kind.DYT if dyt else parts.kind, "emb")


def _half(parts: Parts, first: bool) -> tuple[Node, Node | None, Node]:
    return (parts.att, parts.drop1, parts.add1) if first else (parts.ff, parts.drop2, parts.add2)


def _dropped(drop: Node | None, source: str) -> tuple[Node, ...]:
    """A dropout (when the block has one) that is, in eval mode, ``source``'s tensor."""
    return () if drop is None else (replace(drop, same_in_eval=source),)


def _on_input(parts: Parts, where: str) -> Node:
    """Attention reading the block's input itself, its norm ``where``."""
    said = f"on {parts.word} 1's output"
    assert said in parts.att.description, parts.att.description  # the Pre-LN words it changes
    return replace(parts.att, description=parts.att.description.replace(
        said, f"on the block's input itself ({where})"))


def post_ln(parts: Parts) -> tuple[Node, ...]:
    """norm(x + f(x)): each norm after its add, on the stream itself (the 2017 Transformer)."""
    w = parts.word
    norm1 = _norm(parts, "norm1", f"{w} 1", f"{w} of the first add's output, after attention "
                  "(Post-LN): the stream itself is normalised.")
    norm2 = _norm(parts, "norm2", f"{w} 2", f"{w} of the second add's output (Post-LN): the "
                  "block's output.")
    add2 = replace(parts.add2, description=f"Residual add: the feed-forward's output + the "
                   f"shortcut, {w} 1's output (norm1), not the first add's (Post-LN).")
    return (parts.pattern, _on_input(parts, "Post-LN: no norm before it"),
            *(() if parts.drop1 is None else (parts.drop1,)), parts.add1, norm1,
            *parts.ff_layers, parts.ff, *(() if parts.drop2 is None else (parts.drop2,)), add2,
            norm2)


def branch(parts: Parts) -> tuple[Node, ...]:
    """x + norm(f(x)): each half's norm inside its branch, after its sublayer (OLMo)."""
    w = parts.word
    norm1 = _norm(parts, "norm1", f"{w} 1", f"{w} of attention's output, inside its branch "
                  "(the norm after the sublayer, as OLMo places it): the block's input itself "
                  "is never normalised; what is added to the stream is.")
    norm2 = _norm(parts, "norm2", f"{w} 2", f"{w} of the feed-forward's output, inside its "
                  "branch, before the second add (OLMo's place).")
    att = _on_input(parts, "its norm comes after it, in the branch")
    return (parts.pattern, att, norm1, *_dropped(parts.drop1, "norm1"), parts.add1,
            *parts.ff_layers, parts.ff, norm2, *_dropped(parts.drop2, "norm2"), parts.add2)


def peri(parts: Parts) -> tuple[Node, ...]:
    """x + norm_out(f(norm_in(x))): a norm on both sides of each sublayer (Gemma)."""
    w = parts.word
    nodes = []
    for i, first in ((1, True), (2, False)):
        sub, drop, add = _half(parts, first)
        what = "attention" if first else "the feed-forward"
        read = "the block's input" if first else "the first add's output"
        before = _norm(parts, f"norm{i}", f"{w} {i}", f"{w} of {read}, before {what} (Peri-LN's "
                       "first norm of this half, as in Pre-LN).")
        after = _norm(parts, f"post_norm{i}", f"{w} {i} after", f"{w} of {what}'s output, "
                      "inside its branch before the add (Peri-LN's second norm of this half, "
                      f"Gemma's post_{'attention' if first else 'feedforward'}_layernorm).")
        layers = (parts.pattern,) if first else parts.ff_layers
        nodes += [before, *layers, sub, after, *_dropped(drop, f"post_norm{i}"), add]
    return tuple(nodes)


def parallel(parts: Parts) -> tuple[Node, ...]:
    """x + att(norm(x)) + ff(norm(x)): one norm, its output read by both sublayers."""
    w = parts.word
    norm1 = _norm(parts, "norm1", f"{w} 1", f"{w} of the block's input, read by attention "
                  "and by the feed-forward alike (the parallel block's only norm).")
    ff = replace(parts.ff, inputs=("norm1",),
                 description=parts.ff.description + " Here it reads LayerNorm 1's output, as "
                 "attention does, not the first add's.".replace("LayerNorm", w))
    return (norm1, parts.pattern, parts.att, *(() if parts.drop1 is None else (parts.drop1,)),
            parts.add1, *parts.ff_layers, ff, *(() if parts.drop2 is None else (parts.drop2,)),
            parts.add2)


def dyt(pre: tuple[Node, ...], parts: Parts) -> tuple[Node, ...]:
    """Pre-LN's block with each norm a DyT: γ · tanh(α · x) + β, value by value."""
    words = {"norm1": ("DyT 1", "Dynamic Tanh of the block's input, before attention, where "
                       "Pre-LN has its first norm: γ · tanh(α · x) + β value by value, no mean "
                       "or spread of the token taken."),
             "norm2": ("DyT 2", "Dynamic Tanh of the first add's output, before the "
                       "feed-forward block, where Pre-LN has its second norm.")}
    return tuple(_norm(parts, n.key, *words[n.key], dyt=True) if n.key in words else n
                 for n in pre)


def final_dyt(final: Node) -> Node:
    """The final norm of a block without norms: a DyT too."""
    return replace(final, label="Final DyT", kind=Kind.DYT,
                   description="Dynamic Tanh after the last block, where the final norm was: "
                               "γ · tanh(α · x) + β value by value.")


def orders(pre: tuple[Node, ...], parts: Parts, post: tuple[Node, ...] | None = None
           ) -> dict[NormPosition, tuple[Node, ...]]:
    """Every norm position's block, from Pre-LN's (and Post-LN's, written by the family)."""
    made = {P.PRE: pre, P.POST: post or post_ln(parts), P.BRANCH: branch(parts),
            P.PERI: peri(parts), P.PARALLEL: parallel(parts), P.DYT: dyt(pre, parts)}
    return {p: made[p] for p in P}


def shortcuts(positions) -> dict[NormPosition, dict[str, str]]:
    """For each add, the node whose output its shortcut carries: the block's input, then
    the first add's output (Post-LN: the first norm's, which comes after that add)."""
    return {p: {"add1": BLOCK_INPUT, "add2": "norm1" if p == P.POST else "add1"}
            for p in positions}


def residuals(positions) -> dict[NormPosition, tuple[str, str]]:
    """The stream after each half of the block."""
    return {p: ("norm1", "norm2") if p == P.POST else ("add1", "add2") for p in positions}


def branches(table: dict[NormPosition, tuple[Node, ...]]) -> dict[NormPosition, dict[str, str]]:
    """For each add, the node carrying the branch it adds: the block's step before it."""
    out = {}
    for position, nodes in table.items():
        steps = [n.key for n in nodes if n.parent is None and n.kind != Kind.PATTERN]
        out[position] = {add: steps[steps.index(add) - 1] for add in ("add1", "add2")}
    return out
