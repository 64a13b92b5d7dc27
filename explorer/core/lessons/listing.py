"""The code beside the graph: for a node, the source of the class that produces it (its
family's own modules, with the book's names: ``BlockFamily.model.classes()``) — its
``__init__``, which builds the modules, and the ``forward`` that runs, which alone sets
their order — with the line that built the node's module and the line that produced the
node. Each norm position of a block has its own ``forward``. Read with ``inspect`` from
the running code, so it can never disagree with what runs. Qt-free."""

from __future__ import annotations

import inspect
import re
import textwrap
from dataclasses import dataclass
from functools import lru_cache

from ..gpt.nodes import (ATTENTION, FEED_FORWARD, PATTERN, BlockOrder, Kind, Role, as_order,
                         block_nodes, block_steps, node_for_hook, parse_hook)
from .kinds import KIND_LESSONS


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


def listing(name: str, norm_position: str | BlockOrder = "pre") -> Listing:
    """Where ``name`` (a hook name) comes from in its family's source (``Classes``): a
    norm or a non-linearity shows its own class (what it computes), saying where the
    block calls it; a step of attention its line in the attention's forward; a layer of
    the feed-forward its line there; the rest the block's or the model's own line."""
    order = as_order(norm_position)
    classes = order.family.model.classes()
    notes = order.family.words.code_notes
    layer, key = parse_hook(name)
    node = node_for_hook(name, order)
    own = KIND_LESSONS[node.kind].own_class
    if own is not None:
        return _own_class(name, key, own, layer, node, order, classes)
    if layer is None:
        model = classes.model.__name__
        init, forward = _source(classes.model, "__init__"), _source(classes.model, "forward")
        return Listing(model, init, forward, "forward", _find(init, rf"self\.{key} = "),
                       _find(forward, rf"self\.{key}\("), notes["model"].format(key=key))
    attr = key[len(node.parent) + 1:] if node.parent else key  # its attribute in the parent
    if node.parent == ATTENTION:
        method = classes.attention_scored if classes.attention_scored and node.kind in (
            Kind.SCORES, Kind.MASK, Kind.PATTERN) else classes.attention_forward
        cls = classes.attention
        init, forward = _source(cls, "__init__"), _source(cls, method)
        if key == PATTERN and not classes.attention_scored:
            what = ("The pattern is softmax(queries keysᵀ / √head_dim) with the causal mask, as "
                    "the book computes it; the attn_weights hook point names it.")
        elif attr[0].isupper():
            what = f"{attr} is one of the four Linear layers of {cls.__name__}."
        else:
            what = notes["attention step"].format(attr=attr)
        what += " " + notes["attention"]
        return Listing(cls.__name__, init, forward, method,
                       _find(init, rf"self\.(\w+, )*{attr}\b.*="), _find(forward, rf"self\.{attr}\("),
                       what)
    if node.parent == FEED_FORWARD:
        return _feed_forward(key, attr, order, classes, notes)
    return _block(key, order, classes, notes)


def _feed_forward(key: str, attr: str, order: BlockOrder, classes, notes) -> Listing:
    """A layer of the feed-forward: an attribute of its class, or an element of its
    nn.Sequential (the node table's order is the Sequential's)."""
    cls = classes.feed_forward
    init, forward = _source(cls, "__init__"), _source(cls, "forward")
    title = cls.__name__ + (" (SwiGLU)" if order.family.role(Role.UP) else "")
    expert = order.family.expert_of(key)
    if expert is not None:  # expert e's step: element e of the ModuleList its forward indexes
        attr = expert[0].key[len(FEED_FORWARD) + 1:]
        return Listing(title, init, forward, "forward", _find(init, rf"self\.{attr} = "),
                       _find(forward, rf"self\.{attr}\[e\]\("),
                       f"{attr}[{expert[1]}] is expert {expert[1]}'s {attr}, element {expert[1]} "
                       f"of the nn.ModuleList {attr}: the forward runs it only on the "
                       "tokens routed to that expert, in their order.")
    built = _find(init, rf"self\.{attr} = ")
    if built is not None:
        return Listing(title, init, forward, "forward", built, _find(forward, rf"self\.{attr}\("),
                       notes["feed-forward"].format(attr=attr, key=key, index=0))
    children = [n.key for n in block_nodes(order) if n.parent == FEED_FORWARD]
    index = children.index(key)
    start = _find(init, r"nn\.Sequential\(")
    return Listing(title, init, forward, "forward",
                   None if start is None else start + 1 + index, _find(forward, r"self\.layers\("),
                   notes["feed-forward"].format(attr=attr, key=key, index=index))


def _block(key: str, order: BlockOrder, classes, notes) -> Listing:
    """A node of the block itself: its line in the forward of the block's norm position."""
    method = classes.block_forwards[order.position]
    cls = classes.block
    init, forward = _source(cls, "__init__"), _source(cls, method)
    kinds = {n.key: n.kind for n in block_nodes(order)}
    module = "drop_shortcut" if kinds[key] == Kind.DROPOUT else key  # the book's one module
    line = _find(forward, rf"self\.{key}\(")
    if kinds[key] in (Kind.ADD, Kind.DROPOUT) and line:
        line -= 1  # the book's own line, just above its hook point
    runs = [n.key for n in block_steps(order)]
    if "block" in notes:
        return Listing(f"{cls.__name__} ({order.title})", init, forward, method,
                       _find(init, rf"self\.{key} = "), line,
                       notes["block"].format(method=method, runs=" → ".join(runs)))
    others = order.family.block_keys() - set(kinds)  # another norm position's own modules
    built = [m for m in built_order(init)
             if kinds.get(m) not in (Kind.DROPOUT, Kind.ADD) and m not in others]
    note = (f"__init__ builds {', '.join(built)} in that order; {method} alone sets the order "
            f"they run: {' → '.join(runs)}.")
    if kinds[key] == Kind.ADD:
        note += (f" {key} is the book's x = x + shortcut; the HookPoint on the next line "
                 "computes nothing, it names the sum.")
    elif module == "drop_shortcut":
        note += (f" {key} is the book's x = self.drop_shortcut(x), one of the two uses of the "
                 "single module; the HookPoint on the next line names this use.")
    return Listing(f"{cls.__name__} ({order.title})", init, forward, method,
                   _find(init, rf"self\.{module} = "), line, note)


def _own_class(name: str, key: str, cls: type, layer: int | None, node, order: BlockOrder,
               classes) -> Listing:
    """A norm's or a non-linearity's class: how it is built and its forward (the book's
    lines where what runs is one fused call), the line that computes its output
    highlighted; the note says which line of which forward calls it."""
    own_init = "__init__" in vars(cls)  # a norm builds its weights; GELU() has none
    init = _source(cls, "__init__") if own_init else _source(classes.feed_forward, "__init__")
    book = hasattr(cls, "book_forward")
    forward = _source(cls, "book_forward" if book else "forward")
    if layer is None:
        caller, method = f"{classes.model.__name__}.forward", _source(classes.model, "forward")
    elif node.parent == ATTENTION:
        caller = f"{classes.attention.__name__}.{classes.attention_forward}"
        method = _source(classes.attention, classes.attention_forward)
    elif node.parent == FEED_FORWARD:
        caller, method = f"{classes.feed_forward.__name__}.forward, as element 1 of its nn.Sequential", ()
    else:
        which = classes.block_forwards[order.position]
        caller, method = f"{classes.block.__name__}.{which}", _source(classes.block, which)
    attr = key[len(node.parent) + 1:] if node.parent else key  # its attribute in the parent
    call = next((line.strip() for line in method if f"self.{attr}(" in line), "")
    built = _find(init, r"self\.scale = ") if own_init else \
        next((i for i, line in enumerate(init) if f"{cls.__name__}()" in line), None)
    note = f"{key} is {'an' if cls.__name__.startswith('RMS') else 'a'} {cls.__name__}; {caller} calls it"
    note += f": {call}." if call else "."
    if book:
        note += (f" What runs is {_FUSED[cls.__name__]}: the same numbers in one fused call "
                 "(held equal to these lines by the tests).")
    return Listing(cls.__name__, init, forward, "forward (the book's, as written)" if book else "forward",
                   built, _find(forward, r"return "),
                   note + " " + " ".join((cls.__doc__ or "").replace("``", "").split()))


_FUSED = {"LayerNorm": "F.layer_norm", "GELU": "F.gelu(x, approximate=\"tanh\")"}
