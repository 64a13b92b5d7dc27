"""The code beside the graph: for a node, the source of the class that produces it (the
explorer's own modules, with the book's names) — its ``__init__``, which builds the
modules, and the ``forward`` that runs, which alone sets their order — with the line
that built the node's module and the line that produced the node. Pre-LN and Post-LN
blocks each have their own ``forward``. Read with ``inspect`` from the running code, so
it can never disagree with what runs. Qt-free."""

from __future__ import annotations

import inspect
import re
import textwrap
from dataclasses import dataclass
from functools import lru_cache

from ..gpt import llama
from ..gpt.layers import GELU, FeedForward, LayerNorm, MultiHeadAttention
from ..gpt.model import GPTModel, TransformerBlock
from ..gpt.nodes import (ATTENTION, FEED_FORWARD, PATTERN, Kind, block_nodes, block_steps,
                         node_for_hook, parse_hook)
from .kinds import KIND_LESSONS
from ..gpt.config import NormPosition


@dataclass(frozen=True)
class Listing:
    title: str  # "TransformerBlock (Pre-LN)"
    init: tuple[str, ...]  # the lines of __init__
    forward: tuple[str, ...]  # the lines of the forward that runs
    forward_name: str
    init_line: int | None  # index into ``init`` of the line that built the node's module
    forward_line: int | None  # index into ``forward`` of the line that produced the node
    note: str


@lru_cache(maxsize=None)
def _source(cls: type, method: str) -> tuple[str, ...]:
    return tuple(textwrap.dedent(inspect.getsource(getattr(cls, method))).rstrip().splitlines())


def _find(lines: tuple[str, ...], pattern: str) -> int | None:
    return next((i for i, line in enumerate(lines) if re.search(pattern, line)), None)


def built_order(lines: tuple[str, ...]) -> list[str]:
    """The attributes ``__init__`` assigns a module to, in its order."""
    return [m.group(1) for line in lines
            if (m := re.match(r"\s*self\.(\w+) = (?!cfg|.*==)[\w.]+\(", line))]


def listing(name: str, norm_position: str = "pre") -> Listing:
    """Where ``name`` (a hook name) comes from in the source; a LayerNorm or the GELU
    shows its own class (what it computes), saying where the block calls it. A Llama
    block's node: its place in the bonus chapters' classes (llama.py)."""
    layer, key = parse_hook(name)
    if getattr(norm_position, "family", None) is not None and norm_position.family.name == "llama":
        return llama_listing(name, key, layer, node_for_hook(name, norm_position))
    own = KIND_LESSONS[node_for_hook(name, norm_position).kind].own_class
    if own is not None:
        return _own_class(name, key, own, layer, norm_position)
    if layer is None:
        init, forward = _source(GPTModel, "__init__"), _source(GPTModel, "forward")
        return Listing("GPTModel", init, forward, "forward", _find(init, rf"self\.{key} = "),
                       _find(forward, rf"self\.{key}\("),
                       f"{key} is built once in GPTModel.__init__ and used in GPTModel.forward, "
                       "around the loop over the transformer blocks.")
    if node_for_hook(name, norm_position).parent == ATTENTION:
        attr = key[len(ATTENTION) + 1:]  # its attribute of MultiHeadAttention
        init = _source(MultiHeadAttention, "__init__")
        forward = _source(MultiHeadAttention, "book_forward")
        what = ("The pattern is softmax(queries keysᵀ / √head_dim) with the causal mask, as "
                "the book computes it; the attn_weights hook point names it." if key == PATTERN
                else f"{attr} is a step of MultiHeadAttention.forward as the book writes it; "
                "a HookPoint computes nothing, it names the tensor." if attr[0].islower()
                else f"{attr} is one of the four Linear layers of MultiHeadAttention.")
        return Listing("MultiHeadAttention", init, forward, "book_forward",
                       _find(init, rf"self\.(\w+, )*{attr}\b.*="),
                       _find(forward, rf"self\.{attr}\("),
                       what + " Long prompts and generation get the same numbers from "
                       "fast_forward (the KV cache, the fused kernel when nothing inside is "
                       "watched).")
    children = [n.key for n in block_nodes(norm_position) if n.parent == FEED_FORWARD]
    if key in children:  # the Sequential's layers, in the node table's order
        index = children.index(key)
        init, forward = _source(FeedForward, "__init__"), _source(FeedForward, "forward")
        start = _find(init, r"nn\.Sequential\(")
        return Listing("FeedForward", init, forward, "forward",
                       None if start is None else start + 1 + index, _find(forward, r"self\.layers\("),
                       f"{key} is element {index} of the nn.Sequential: the "
                       "Sequential runs its layers in the order they are listed.")
    method = "forward_post_ln" if norm_position == NormPosition.POST else "forward_pre_ln"
    init, forward = _source(TransformerBlock, "__init__"), _source(TransformerBlock, method)
    kinds = {n.key: n.kind for n in block_nodes(norm_position)}
    module = "drop_shortcut" if kinds[key] == Kind.DROPOUT else key  # the book's one module
    built = [m for m in built_order(init) if kinds.get(m) not in (Kind.DROPOUT, Kind.ADD)]
    runs = [n.key for n in block_steps(norm_position)]
    kind = "Pre-LN" if norm_position == NormPosition.PRE else "Post-LN"
    note = (f"__init__ builds {', '.join(built)} in that order; {method} alone sets the order "
            f"they run: {' → '.join(runs)}.")
    line = _find(forward, rf"self\.{key}\(")
    if kinds[key] == Kind.ADD:
        note += (f" {key} is the book's x = x + shortcut; the HookPoint on the next line "
                 "computes nothing, it names the sum.")
    elif module == "drop_shortcut":
        note += (f" {key} is the book's x = self.drop_shortcut(x), one of the two uses of the "
                 "single module; the HookPoint on the next line names this use.")
    if kinds[key] in (Kind.ADD, Kind.DROPOUT) and line:
        line -= 1  # the book's own line, just above its hook point
    return Listing(f"TransformerBlock ({kind})", init, forward, method,
                   _find(init, rf"self\.{module} = "), line, note)


def _own_class(name: str, key: str, cls: type, layer: int | None, norm_position: str) -> Listing:
    """LayerNorm's or GELU's class: how it is built and its forward, the line that
    computes its output highlighted; the note says which line of which forward calls it."""
    init = _source(cls, "__init__") if cls is LayerNorm else _source(FeedForward, "__init__")
    forward = _source(cls, "book_forward")  # the book's lines; forward runs them fused
    if layer is None:
        caller, method = "GPTModel.forward", _source(GPTModel, "forward")
    elif cls is GELU:
        caller, method = "FeedForward.forward, as element 1 of its nn.Sequential", ()
    else:
        name_ = "forward_post_ln" if norm_position == NormPosition.POST else "forward_pre_ln"
        caller, method = f"TransformerBlock.{name_}", _source(TransformerBlock, name_)
    call = next((line.strip() for line in method if f"self.{key}(" in line), "")
    built = _find(init, r"self\.scale = ") if cls is LayerNorm else \
        next((i for i, line in enumerate(init) if "GELU()" in line), None)
    runs = "F.layer_norm" if cls is LayerNorm else "F.gelu(x, approximate=\"tanh\")"
    return Listing(cls.__name__, init, forward, "forward (the book's, as written)", built,
                   _find(forward, r"return "),
                   f"{key} is a {cls.__name__}; {caller} calls it" + (f": {call}" if call else "")
                   + f". What runs is {runs}: the same numbers in one fused call (held equal to "
                   "these lines by the tests). " + " ".join((cls.__doc__ or "").replace("``", "").split()))


def llama_listing(name: str, key: str, layer: int | None, node) -> Listing:
    """A Llama block's node in the bonus chapters' classes: an RMSNorm's own class; a
    step of grouped-query attention in its forward (the scores, the mask and the pattern
    in the book's steps); a SwiGLU layer in its FeedForward; the rest in the block or the
    model."""
    if KIND_LESSONS[node.kind].own_class is llama.RMSNorm:
        init, forward = _source(llama.RMSNorm, "__init__"), _source(llama.RMSNorm, "forward")
        caller = "LlamaModel.forward" if layer is None else (
            "GroupedQueryAttention.forward" if node.parent == ATTENTION else "TransformerBlock.forward")
        return Listing("RMSNorm", init, forward, "forward", _find(init, r"self\.scale = "),
                       _find(forward, r"return "), f"{key} is an RMSNorm; {caller} calls it. "
                       + " ".join((llama.RMSNorm.__doc__ or "").replace("``", "").split()))
    if layer is None:
        init, forward = _source(llama.LlamaModel, "__init__"), _source(llama.LlamaModel, "forward")
        return Listing("LlamaModel", init, forward, "forward", _find(init, rf"self\.{key} = "),
                       _find(forward, rf"self\.{key}\("),
                       f"{key} is built once in LlamaModel.__init__ and used in its forward, "
                       "around the loop over the blocks; no position embedding is added.")
    attr = key[len(node.parent) + 1:] if node.parent else key  # its attribute in the parent
    if node.parent == ATTENTION:
        method = "_scored" if node.kind in (Kind.SCORES, Kind.MASK, Kind.PATTERN) else "forward"
        init = _source(llama.GroupedQueryAttention, "__init__")
        forward = _source(llama.GroupedQueryAttention, method)
        return Listing("GroupedQueryAttention", init, forward, method,
                       _find(init, rf"self\.(\w+, )*{attr}\b.*="), _find(forward, rf"self\.{attr}\("),
                       f"{attr} is a step of GroupedQueryAttention as the bonus chapters write it; "
                       "a HookPoint computes nothing, it names the tensor. Without a hook on the "
                       "scores or the pattern the same numbers come from the fused kernel.")
    if node.parent == FEED_FORWARD:
        init, forward = _source(llama.FeedForward, "__init__"), _source(llama.FeedForward, "forward")
        return Listing("FeedForward (SwiGLU)", init, forward, "forward",
                       _find(init, rf"self\.{attr} = "), _find(forward, rf"self\.{attr}\("),
                       f"{attr}: fc1 and fc2 read the same input; SiLU gates fc1's values, the "
                       "product multiplies them into fc2's, fc3 brings them back.")
    init, forward = _source(llama.TransformerBlock, "__init__"), _source(llama.TransformerBlock, "forward")
    line = _find(forward, rf"self\.{key}\(")
    if node.kind == Kind.ADD and line:
        line -= 1  # the book's own line, just above its hook point
    return Listing("TransformerBlock (Llama)", init, forward, "forward",
                   _find(init, rf"self\.{key} = "), line,
                   "__init__ builds att, ff, norm1, norm2; forward runs norm1 → att → add1 → "
                   "norm2 → ff → add2, with no dropout.")
