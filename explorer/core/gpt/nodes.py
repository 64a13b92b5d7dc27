"""The canonical node table: every node of the block graph, in forward order.

Forward order is the order in which the nodes' outputs are produced, so a node inside
another (the attention pattern inside attention, the feed-forward internals inside the
feed-forward block) comes before the node that contains it.

One table for the whole application. The block graph, the inspector, the capture code
and the tests read it; nobody else lists node names. A node's hook name is the module
path inside ``GPTModel`` (``trf_blocks.{layer}.{key}`` for block nodes).
"""

from __future__ import annotations

import fnmatch
from dataclasses import dataclass, replace
from enum import Enum

from .config import GPTConfig


class Kind(str, Enum):
    """What a node computes. A new kind is handled in each of these places, and
    tests/core/test_nodes.py names the one it is missing from: its fixed histogram range
    (``_HIST_BY_KIND`` below), what it does and the common mistake about it
    (lessons/explain.py ``WHAT``, ``MISTAKE``), its Learn questions (lessons/quiz.py
    ``_BY_KIND``) and its worked formula (lessons/formulas.py ``FORMULA_KINDS``)."""

    EMBEDDING = "embedding"
    NORM = "norm"
    ATTENTION = "attention"
    PATTERN = "pattern"
    DROPOUT = "dropout"
    ADD = "add"
    LINEAR = "linear"
    GELU = "gelu"
    FFN = "ffn"
    LOGITS = "logits"

    __str__ = str.__str__  # the word itself wherever it is written or formatted
    __format__ = str.__format__


@dataclass(frozen=True)
class HistRange:
    lo: float
    hi: float
    bins: int

    @property
    def width(self) -> float:
        return (self.hi - self.lo) / self.bins

    def edges(self) -> list[float]:
        return [self.lo + i * self.width for i in range(self.bins + 1)]


# Zero is a bin edge in every range that spans it, so "negative" is a whole number of bins.
_HIST_BY_KIND = {
    "embedding": HistRange(-1.0, 1.0, 100),
    "norm": HistRange(-10.0, 10.0, 100),
    "attention": HistRange(-10.0, 10.0, 100),
    "pattern": HistRange(0.0, 1.0, 100),
    "dropout": HistRange(-10.0, 10.0, 100),
    "add": HistRange(-50.0, 50.0, 100),
    "linear": HistRange(-10.0, 10.0, 100),
    "gelu": HistRange(-1.0, 9.0, 100),
    "ffn": HistRange(-20.0, 20.0, 100),
    "logits": HistRange(-200.0, 50.0, 125),
}
_HIST_BY_KEY = {"ff.layers.2": HistRange(-20.0, 20.0, 100), "drop2": HistRange(-20.0, 20.0, 100), "emb_add": HistRange(-1.0, 1.0, 100),
                "drop_emb": HistRange(-1.0, 1.0, 100)}


@dataclass(frozen=True)
class Node:
    key: str  # module path relative to its parent (block or model)
    label: str  # short text on the graph
    description: str  # one line for tooltips and the inspector
    kind: Kind  # given as its word ("norm"); compares equal to it
    width: str  # last dimension: "emb", "hidden" (4 x emb), "vocab", "ctx" (attention keys)
    parent: str | None = None  # "ff" or "att" for nodes inside those (expandable in the graph)
    # In eval mode this node outputs the very tensor of another node (dropout is the
    # identity; ff returns its last Linear's output), so capture can reuse that one.
    same_in_eval: str | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "kind", Kind(self.kind))  # an unknown kind fails here

    @property
    def in_ffn(self) -> bool:
        return self.parent == "ff"

    @property
    def hist(self) -> "HistRange":
        """Fixed histogram bins for this node, the same for every layer, prompt and step,
        so histograms of one node can be compared; values outside are counted apart."""
        return _HIST_BY_KEY.get(self.key) or _HIST_BY_KIND[self.kind]

    @property
    def batched(self) -> bool:
        """False for the position embedding: one vector per position, no batch axis."""
        return self.key != "pos_emb"

    def shape(self, cfg: GPTConfig, batch: int, tokens: int) -> tuple[int, ...]:
        """The tensor shape this node produces for a (batch, tokens) input."""
        if self.kind == "pattern":
            return (batch, cfg.n_heads, tokens, tokens)
        if not self.batched:
            return (tokens, cfg.emb_dim)
        last = {"emb": cfg.emb_dim, "hidden": cfg.hidden_dim, "vocab": cfg.vocab_size}[self.width]
        return (batch, tokens, last)


_NORM1 = Node("norm1", "LayerNorm 1", "Layer normalisation of the block's input, before "
              "attention (Pre-LN): each token vector rescaled to mean 0, variance 1, then "
              "scale and shift.", "norm", "emb")
_NORM2 = Node("norm2", "LayerNorm 2", "Layer normalisation of the first add's output, before "
              "the feed-forward block (Pre-LN).", "norm", "emb")
_ATT = Node("att", "Multi-head attention", "Causal self-attention on LayerNorm 1's output: "
            "each token mixes in value vectors of earlier tokens, weighted per head, then "
            "out_proj.", "attention", "emb")
_PATTERN = Node("att.attn_weights", "Attention pattern", "Softmax attention weights per "
                "head: row = query token, column = key token; rows sum to 1.",
                "pattern", "ctx", parent="att")
_DROP1 = Node("drop1", "Dropout", "drop_shortcut, the first of its two uses: dropout on the "
              "attention output (identity in eval mode; zeroes a share drop_rate and "
              "rescales the rest in training).", "dropout", "emb", same_in_eval="att")
_ADD1 = Node("add1", "Add (shortcut)", "Residual add: attention branch + the shortcut, the "
             "block's input.", "add", "emb")
_FF0 = Node("ff.layers.0", "Linear 1", "First feed-forward Linear: widens each "
            "token from emb_dim to 4 x emb_dim values.", "linear", "hidden", parent="ff")
_GELU = Node("ff.layers.1", "GELU", "GELU non-linearity (tanh approximation): smooth, "
             "passes positives, squashes negatives towards a small dip.", "gelu", "hidden",
             parent="ff")
_FF2 = Node("ff.layers.2", "Linear 2", "Second feed-forward Linear: back from "
            "4 x emb_dim to emb_dim values.", "linear", "emb", parent="ff")
_FF = Node("ff", "Feed-forward", "Position-wise MLP: Linear, GELU, Linear; the embedding "
           "size comes out unchanged.", "ffn", "emb", same_in_eval="ff.layers.2")
_DROP2 = Node("drop2", "Dropout", "drop_shortcut, the second of its two uses: dropout on "
              "the feed-forward output.", "dropout", "emb", same_in_eval="ff")
_ADD2 = Node("add2", "Add (shortcut)", "Residual add: feed-forward branch + the shortcut, the "
             "first add's output (add1): the block's output (Pre-LN).", "add", "emb")
_POST = {  # Post-LN words: the norms come after the adds, so the neighbours differ
    "norm1": Node("norm1", "LayerNorm 1", "Layer normalisation of the first add's output, "
                  "after attention (Post-LN).", "norm", "emb"),
    "norm2": Node("norm2", "LayerNorm 2", "Layer normalisation of the second add's output "
                  "(Post-LN): the block's output.", "norm", "emb"),
    "att": replace(_ATT, description="Causal self-attention on the block's input (Post-LN: "
                   "no norm before it): each token mixes in value vectors of earlier tokens, "
                   "weighted per head, then out_proj."),
    "add2": replace(_ADD2, description="Residual add: feed-forward branch + the shortcut, "
                    "LayerNorm 1's output (norm1), not the first add's (Post-LN)."),
}

_BLOCK_ORDER = {
    "pre": (_NORM1, _PATTERN, _ATT, _DROP1, _ADD1, _NORM2, _FF0, _GELU, _FF2, _FF, _DROP2, _ADD2),
    "post": (_PATTERN, _POST["att"], _DROP1, _ADD1, _POST["norm1"], _FF0, _GELU, _FF2, _FF,
             _DROP2, _POST["add2"], _POST["norm2"]),
}

MODEL_NODES_BEFORE = (
    Node("tok_emb", "Token embedding", "Looks up one emb_dim vector per token id.",
         "embedding", "emb"),
    Node("pos_emb", "Position embedding", "One learned emb_dim vector per position 0..T-1.",
         "embedding", "emb"),
    Node("emb_add", "Embedding sum", "Token embedding + position embedding.", "add", "emb"),
    Node("drop_emb", "Embedding dropout", "Dropout on the embeddings (identity in eval "
         "mode): the residual stream entering block 1.", "dropout", "emb",
         same_in_eval="emb_add"),
)
MODEL_NODES_AFTER = (
    Node("final_norm", "Final LayerNorm", "Layer normalisation after the last block.",
         "norm", "emb"),
    Node("out_head", "Output head", "Linear emb_dim -> vocabulary: one logit per token "
         "of the vocabulary.", "logits", "vocab"),
)


def block_nodes(norm_position: str = "pre") -> tuple[Node, ...]:
    """Nodes of one transformer block in forward order."""
    try:
        return _BLOCK_ORDER[norm_position]
    except KeyError:
        raise ValueError(f"norm_position must be 'pre' or 'post', got {norm_position!r}") from None


def block_steps(norm_position: str = "pre") -> tuple[Node, ...]:
    """The block's own steps in the order they run (nodes inside another left out):
    norm1, att, drop1, add1, ... in Pre-LN."""
    return tuple(n for n in block_nodes(norm_position) if n.parent is None)


BLOCK_INPUT = "input"  # the residual stream entering a block (the previous node's output)


def shortcut_sources(norm_position: str = "pre") -> dict[str, str]:
    """For each residual add of a block, the node whose output the shortcut carries:
    the block input for add1; add1 (Pre-LN) or norm1 (Post-LN) for add2."""
    block_nodes(norm_position)  # validates
    return {"add1": BLOCK_INPUT, "add2": "add1" if norm_position == "pre" else "norm1"}


def residual_branches() -> dict[str, str]:
    """For each residual add, the node that carries the branch being added (in either
    norm position): add = branch + shortcut."""
    return {"add1": "drop1", "add2": "drop2"}


BLOCKS = "trf_blocks"  # the module list of the transformer blocks
# Nodes that other parts of the app look for by their role, named here only (a test
# checks that no other module writes a node's name).
TOKEN_EMBEDDING, POSITION_EMBEDDING, EMBEDDING_SUM = "tok_emb", "pos_emb", "emb_add"
EMBEDDINGS = "drop_emb"  # the residual stream entering block 0
FIRST_NORM, SECOND_NORM = "norm1", "norm2"
ATTENTION = "att"
PATTERN = "att.attn_weights"  # inside attention; drawn beside it
FIRST_DROPOUT = "drop1"
FIRST_ADD, SECOND_ADD = "add1", "add2"
FEED_FORWARD = "ff"
GELU_INPUT = "ff.layers.0"  # what the GELU receives: Linear 1's output
GELU_OUTPUT = "ff.layers.1"
LINEAR_2 = "ff.layers.2"
FINAL_NORM = "final_norm"
LOGITS = "out_head"
FIRST_BLOCK_NODE = FIRST_NORM
# Modules inside attention that are not nodes of the graph, read by attribution: the
# query and key projections, and the Linear that mixes the heads' context vectors.
QUERIES, KEYS, VALUES, HEADS_MIX = "att.W_query", "att.W_key", "att.W_value", "att.out_proj"


def block_hook_name(layer: int, key: str) -> str:
    return f"{BLOCKS}.{layer}.{key}"


def block_title(layer: int, n_layers: int) -> str:
    """The one name of a block on screen: 'Block 3 of 4' for ``layer`` 2 (its module is
    ``trf_blocks.2``)."""
    return f"Block {layer + 1} of {n_layers}"


def block_module_name(layer: int) -> str:
    """The module path of a whole block (``trf_blocks.3``)."""
    return f"{BLOCKS}.{layer}"


def parse_hook(hook_name: str) -> tuple[int | None, str]:
    """(layer, key) of a hook name: ``trf_blocks.3.ff.layers.1`` -> (3, 'ff.layers.1');
    a node outside the blocks -> (None, its name). ``KeyError`` for an unknown name."""
    parts = hook_name.split(".", 2)
    if len(parts) == 3 and parts[0] == BLOCKS and parts[1].isdigit():
        if not any(n.key == parts[2] for n in _BLOCK_ORDER["pre"]):
            raise KeyError(f"unknown node {hook_name!r}")
        return int(parts[1]), parts[2]
    if any(n.key == hook_name for n in MODEL_NODES_BEFORE + MODEL_NODES_AFTER):
        return None, hook_name
    raise KeyError(f"unknown node {hook_name!r}")


def layer_of(hook_name: str) -> int | None:
    """The block a node belongs to (None for the embeddings, final norm and head)."""
    return parse_hook(hook_name)[0]


def same_node_in_layer(hook_name: str, layer: int) -> str:
    """The same node of another block; nodes outside the blocks stay as they are."""
    block, key = parse_hook(hook_name)
    return hook_name if block is None else block_hook_name(layer, key)


def block_output(norm_position: str = "pre") -> str:
    """The node whose output leaves a block: the second add (Pre-LN) or the second
    norm (Post-LN)."""
    return residual_nodes(norm_position)[1]


def residual_nodes(norm_position: str = "pre") -> tuple[str, str]:
    """The residual stream after each half of a block: (add1, add2) in Pre-LN,
    (norm1, norm2) in Post-LN, where the norms come after the adds."""
    block_nodes(norm_position)  # validates
    return ("add1", "add2") if norm_position == "pre" else ("norm1", "norm2")


def input_node(hook_name: str, norm_position: str = "pre") -> str | None:
    """The node whose output feeds this one: the previous node at the same level of the
    block; for a first child (Linear 1, the attention pattern) what feeds its parent; for
    the block's first node the block's input (the previous block's last node, or the
    embeddings' dropout). None outside the blocks."""
    layer = layer_of(hook_name)
    if layer is None:
        return None
    node = node_for_hook(hook_name)
    siblings = [n.key for n in block_nodes(norm_position) if n.parent == node.parent]
    i = siblings.index(node.key)
    if i > 0:
        return block_hook_name(layer, siblings[i - 1])
    if node.parent is not None:
        return input_node(block_hook_name(layer, node.parent), norm_position)
    return block_input(layer, norm_position)


def block_input(layer: int, norm_position: str = "pre") -> str:
    """The node whose output enters block ``layer``: the embeddings' dropout, or the
    previous block's output."""
    return EMBEDDINGS if layer == 0 else block_hook_name(layer - 1, block_output(norm_position))


def drawn_beside(norm_position: str = "pre") -> dict[str, Node]:
    """Nodes the block graph draws beside another instead of in the forward chain: the
    attention pattern beside attention. Key: the node it sits beside."""
    return {n.parent: n for n in block_nodes(norm_position) if n.kind == "pattern"}


def short_label(hook_name: str) -> str:
    """A compact label: 'B4 add2' for a block node (block 4 of the window's count from
    1, ``trf_blocks.3``), the name itself otherwise."""
    layer, key = parse_hook(hook_name)
    return key if layer is None else f"B{layer + 1} {key}"


def is_pattern(hook_name: str) -> bool:
    return node_for_hook(hook_name).kind == "pattern"


def eval_source(hook_name: str) -> str:
    """The node whose tensor this node outputs in eval mode (itself if none)."""
    return eval_chain(hook_name)[-1]


def eval_chain(hook_name: str) -> list[str]:
    """The node and every node whose very tensor it outputs in eval mode, in turn:
    ``drop2`` -> drop2, ff, ff.layers.2 (dropout is the identity; ff returns Linear 2's
    output)."""
    chain = [hook_name]
    node = node_for_hook(hook_name)
    while node.same_in_eval:
        prefix = hook_name[: len(hook_name) - len(node.key)]
        hook_name = prefix + node.same_in_eval
        chain.append(hook_name)
        node = node_for_hook(hook_name)
    return chain


def all_hook_names(cfg: GPTConfig, include_pattern: bool = True) -> list[str]:
    """Every node of the whole model in forward order, as hook names."""
    names = [n.key for n in MODEL_NODES_BEFORE]
    for layer in range(cfg.n_layers):
        names += [block_hook_name(layer, n.key) for n in block_nodes(cfg.norm_position)
                  if include_pattern or n.kind != "pattern"]
    names += [n.key for n in MODEL_NODES_AFTER]
    return names


def select_hook_names(cfg: GPTConfig, pattern: str | list[str] | None = None,
                      layer: int | None = None, include_pattern: bool = False) -> list[str]:
    """Hook names matching a glob (``trf_blocks.*.add2``), a list of names, or one layer,
    in forward order. An unknown explicit name raises ``KeyError``."""
    names = all_hook_names(cfg, include_pattern=True)
    if layer is not None:
        if not 0 <= layer < cfg.n_layers:
            raise ValueError(f"layer {layer} out of range 0..{cfg.n_layers - 1}")
        names = [n for n in names if layer_of(n) == layer]
    if pattern is None:
        return [n for n in names if include_pattern or not n.endswith("attn_weights")]
    patterns = [pattern] if isinstance(pattern, str) else list(pattern)
    chosen = []
    for pat in patterns:
        hits = [n for n in names if fnmatch.fnmatchcase(n, pat)]
        if not hits:
            raise KeyError(f"no node matches {pat!r}")
        chosen += hits
    order = {n: i for i, n in enumerate(names)}
    return sorted(set(chosen), key=order.__getitem__)


def node_for_hook(hook_name: str, norm_position: str = "pre") -> Node:
    """The table entry of a hook name, with the words of that norm position's order (a
    Post-LN norm1 comes after the first add, not before attention)."""
    for node in MODEL_NODES_BEFORE + MODEL_NODES_AFTER:
        if node.key == hook_name:
            return node
    parts = hook_name.split(".", 2)
    if len(parts) == 3 and parts[0] == BLOCKS and parts[1].isdigit():
        for node in block_nodes(norm_position):
            if node.key == parts[2]:
                return node
    raise KeyError(f"unknown node {hook_name!r}")
