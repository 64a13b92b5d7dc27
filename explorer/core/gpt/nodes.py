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
from dataclasses import replace

from .config import GPTConfig
from .node_types import _HIST_BY_KIND, HistRange, Kind, Node  # noqa: F401 (the table's types)

_WIDE = HistRange(-20.0, 20.0, 100)  # Linear 2's output and what carries it on
_SMALL = HistRange(-1.0, 1.0, 100)  # the embeddings' sum and its dropout


_NORM1 = Node("norm1", "LayerNorm 1", "Layer normalisation of the block's input, before "
              "attention (Pre-LN): each token vector rescaled to mean 0, variance 1, then "
              "scale and shift.", "norm", "emb")
_NORM2 = Node("norm2", "LayerNorm 2", "Layer normalisation of the first add's output, before "
              "the feed-forward block (Pre-LN).", "norm", "emb")
_ATT = Node("att", "Multi-head attention", "Causal self-attention on LayerNorm 1's output: "
            "each token mixes in value vectors of earlier tokens, weighted per head, then "
            "out_proj.", "attention", "emb")
_PATTERN = Node("att.attn_weights", "Attention pattern", "attn_weights = softmax(masked "
                "scores / √head_dim), then dropout: per head, row = query token, column = "
                "key token; rows sum to 1.",
                "pattern", "ctx", parent="att", inputs=("att.masked_scores",))


def _in_att(key: str, label: str, description: str, kind: str, width: str,
            *inputs: str) -> Node:
    return Node(key, label, description, kind, width, parent="att", inputs=inputs)


# Attention opened, in the order the book's MultiHeadAttention.forward computes it. No
# inputs: the node reads the attention's input (LayerNorm 1's output in Pre-LN).
ATTENTION_INSIDE = (
    _in_att("att.W_key", "W_key", "keys = W_key(x): each token's input times the key "
            "matrix, (b, T, d_out): what the token offers to the queries that look for it.",
            "linear", "emb"),
    _in_att("att.W_query", "W_query", "queries = W_query(x): each token's input times the "
            "query matrix, (b, T, d_out): what the token looks for in earlier tokens.",
            "linear", "emb"),
    _in_att("att.W_value", "W_value", "values = W_value(x): each token's input times the "
            "value matrix, (b, T, d_out): what the token passes on to those that attend to it.",
            "linear", "emb"),
    _in_att("att.keys", "Keys per head", "The keys split into heads: view (b, T, n_heads, "
            "head_dim), then transpose(1, 2) to (b, n_heads, T, head_dim).", "heads", "head",
            "att.W_key"),
    _in_att("att.queries", "Queries per head", "The queries split into heads: (b, n_heads, T, "
            "head_dim); each head compares its own head_dim values.", "heads", "head",
            "att.W_query"),
    _in_att("att.values", "Values per head", "The values split into heads: (b, n_heads, T, "
            "head_dim).", "heads", "head", "att.W_value"),
    _in_att("att.attn_scores", "Scores Q·Kᵀ", "attn_scores = queries @ keys.transpose(2, 3): "
            "one dot product per query token (row) and key token (column), per head.",
            "scores", "ctx", "att.queries", "att.keys"),
    _in_att("att.masked_scores", "Causal mask", "attn_scores.masked_fill(mask_bool, -inf): "
            "every key after its query set to −inf, so that softmax gives it weight 0.",
            "mask", "ctx", "att.attn_scores"),
    _PATTERN,
    _in_att("att.context", "Weights · V", "attn_weights @ values: each query's mix of the "
            "values of the keys it sees, weighted, per head: (b, n_heads, T, head_dim).",
            "context", "head", "att.attn_weights", "att.values"),
    _in_att("att.context_vec", "Heads joined", "context_vec: the heads side by side again, "
            "transpose(1, 2) then view: (b, T, d_out).", "heads", "emb", "att.context"),
    _in_att("att.out_proj", "out_proj", "The output projection, Linear d_out → emb_dim: "
            "mixes what the heads found; its output is the attention's output.", "linear",
            "emb", "att.context_vec"),
)


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
            "4 x emb_dim to emb_dim values.", "linear", "emb", parent="ff",
            hist_range=_WIDE)
_FF = Node("ff", "Feed-forward", "Position-wise MLP: Linear, GELU, Linear; the embedding "
           "size comes out unchanged.", "ffn", "emb", same_in_eval="ff.layers.2")
_DROP2 = Node("drop2", "Dropout", "drop_shortcut, the second of its two uses: dropout on "
              "the feed-forward output.", "dropout", "emb", same_in_eval="ff",
              hist_range=_WIDE)
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
         "embedding", "emb", batched=False),
    Node("emb_add", "Embedding sum", "Token embedding + position embedding.", "add", "emb",
         hist_range=_SMALL),
    Node("drop_emb", "Embedding dropout", "Dropout on the embeddings (identity in eval "
         "mode): the residual stream entering block 1.", "dropout", "emb",
         same_in_eval="emb_add", hist_range=_SMALL),
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
# Attention's own steps (ATTENTION_INSIDE) that others name by role: the projections
# (attribution reads them too), the Linear that mixes the heads, the steps between.
QUERIES, KEYS, VALUES, HEADS_MIX = "att.W_query", "att.W_key", "att.W_value", "att.out_proj"
HEAD_QUERIES, HEAD_KEYS, HEAD_VALUES = "att.queries", "att.keys", "att.values"
SCORES, MASKED_SCORES = "att.attn_scores", "att.masked_scores"
CONTEXT, CONTEXT_JOINED = "att.context", "att.context_vec"


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
        if not any(n.key == parts[2] for n in _BLOCK_ORDER["pre"] + ATTENTION_INSIDE):
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
    if node.parent == ATTENTION and node.kind != "pattern":  # attention opened
        if node.inputs:
            return block_hook_name(layer, node.inputs[0])
        return input_node(block_hook_name(layer, ATTENTION), norm_position)
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


def all_hook_names(cfg: GPTConfig, include_pattern: bool = True,
                   inside: bool = False) -> list[str]:
    """Every node of the whole model in forward order, as hook names; ``inside`` adds
    the nodes inside attention (``ATTENTION_INSIDE``, the pattern among them)."""
    names = [n.key for n in MODEL_NODES_BEFORE]
    for layer in range(cfg.n_layers):
        for n in block_nodes(cfg.norm_position):
            if inside and n.kind == "pattern":
                names += [block_hook_name(layer, m.key) for m in ATTENTION_INSIDE]
            elif include_pattern or n.kind != "pattern":
                names.append(block_hook_name(layer, n.key))
    names += [n.key for n in MODEL_NODES_AFTER]
    return names


def inside_attention(hook_name: str) -> bool:
    """Whether a node is one of attention's own steps other than the pattern (a node
    captured only when asked for: ``all_hook_names(..., inside=True)``)."""
    node = node_for_hook(hook_name)
    return node.parent == ATTENTION and node.kind != "pattern"


def select_hook_names(cfg: GPTConfig, pattern: str | list[str] | None = None,
                      layer: int | None = None, include_pattern: bool = False,
                      inside: bool = False) -> list[str]:
    """Hook names matching a glob (``trf_blocks.*.add2``), a list of names, or one layer,
    in forward order; the nodes inside attention only with ``inside``. An unknown
    explicit name raises ``KeyError``."""
    names = all_hook_names(cfg, include_pattern=True, inside=inside)
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
        for node in block_nodes(norm_position) + ATTENTION_INSIDE:
            if node.key == parts[2]:
                return node
    raise KeyError(f"unknown node {hook_name!r}")
