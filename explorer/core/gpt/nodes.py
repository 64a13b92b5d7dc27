"""The node table of every block family, and the one way the rest of the app asks it.

A model's block is a value (``family.BlockFamily``), one file of families/ for each
family, registered there once. A config names its family; ``order_of(cfg)`` gives its
block order (a norm position of that family, with the switches its nodes need), which
every function here takes where a norm position went: ``block_nodes(order_of(cfg))``. A
bare "pre" or "post" means the default family's block (GPT-2's). A node's hook name is
its module path inside the model (``trf_blocks.{layer}.{key}`` for block nodes).

The graph, the inspector, capture and the tests read this table; nobody else lists node
names.
"""

from __future__ import annotations

from .config import GPTConfig
from .families import FAMILIES, default
from .family import (ATTENTION, BLOCK_INPUT, BLOCKS, PARENT_INPUT, BlockFamily,  # noqa: F401
                     BlockOrder, NormPosition, Role, block_hook_name, switches_of)
from .node_types import _HIST_BY_KIND, HistRange, Kind, Node, Width  # noqa: F401 (the table's types)


def family_of(cfg: GPTConfig) -> BlockFamily:
    """The block family a config describes."""
    return cfg.family


def order_of(cfg: GPTConfig) -> BlockOrder:
    """The config's block order: its norm position, carrying its family and its switches."""
    return cfg.family.order(cfg.norm_position, switches_of(cfg))


def order_at(cfg: GPTConfig, position: str) -> BlockOrder | None:
    """The config's family's block in another norm position (None where the family has
    no such block: OLMo's and Gemma's have one placement only)."""
    family = cfg.family
    return family.order(position, switches_of(cfg)) if position in family.orders else None


def as_order(order: str | BlockOrder | GPTConfig = NormPosition.PRE) -> BlockOrder:
    """A block order from what a caller has: a config, an order, or a bare norm
    position (the default family's block)."""
    if isinstance(order, BlockOrder):
        return order
    if isinstance(order, GPTConfig):
        return order_of(order)
    return default().order(order)


def _common(role: Role) -> str:
    """The key that plays ``role`` in every family that has such a node (they agree)."""
    keys = {f.role(role) for f in FAMILIES.values()} - {None}
    if len(keys) != 1:
        raise ValueError(f"the families disagree on {role}: {sorted(keys)}")
    return keys.pop()


# Nodes that other parts of the app look for by their role, named here only (a test
# checks that no other module writes a node's name). These keys are the same in every
# family that has the node; a role whose node differs between families is asked with
# ``role(order, Role.…)``.
TOKEN_EMBEDDING = "tok_emb"
FIRST_NORM, SECOND_NORM = "norm1", "norm2"
PATTERN = "att.attn_weights"  # inside attention; drawn beside it
FIRST_ADD, SECOND_ADD = "add1", "add2"
FEED_FORWARD = "ff"
FINAL_NORM = "final_norm"
LOGITS = "out_head"
FIRST_BLOCK_NODE = FIRST_NORM
# Attention's own steps that others name by role: the projections (attribution reads
# them too), the Linear that mixes the heads, the steps between.
QUERIES, KEYS, VALUES, HEADS_MIX = "att.W_query", "att.W_key", "att.W_value", "att.out_proj"
SPLIT_QUERIES, SPLIT_KEYS, SPLIT_VALUES = "att.queries", "att.keys", "att.values"
SCORES, MASKED_SCORES = "att.attn_scores", "att.masked_scores"
CONTEXT, CONTEXT_JOINED = "att.context", "att.context_vec"
# steps only some families have, the same key wherever they are
Q_NORM, K_NORM = _common(Role.Q_NORM), _common(Role.K_NORM)
QUERIES_ROPE, KEYS_ROPE = _common(Role.QUERIES_ROPE), _common(Role.KEYS_ROPE)
KEYS_SHARED, VALUES_SHARED = _common(Role.KEYS_SHARED), _common(Role.VALUES_SHARED)
FF_UP = _common(Role.UP)  # a gated feed-forward's: the values the gate lets through
POSITION_EMBEDDING = _common(Role.POSITION_EMBEDDING)
EMBEDDING_SUM = _common(Role.EMBEDDING_SUM)
EMBEDDING_SCALED = _common(Role.EMBEDDING_SCALE)
FIRST_DROPOUT = _common(Role.FIRST_DROPOUT)


def role(order: str | BlockOrder | GPTConfig, name: Role) -> str | None:
    """The key that plays ``name`` in this order's family (``Role.ACTIVATION_INPUT``:
    GPT-2's Linear 1 output, Llama's gate fc1), or None when the family has no such
    node. A role is a ``Role``: anything else raises ``TypeError``."""
    return as_order(order).family.role(name)


def activation_label(key: str) -> str:
    """The name of the non-linearity whose node key this is, in whichever family has it
    ("GELU", "SiLU"); "activation" for a key that is none."""
    for family in FAMILIES.values():
        if family.role(Role.ACTIVATION) == key:
            return next(n.label for nodes in family.orders.values() for n in nodes if n.key == key)
    return "activation"


def embeddings(order: str | BlockOrder | GPTConfig = NormPosition.PRE) -> str:
    """The node whose output enters block 0 (GPT-2: the embeddings' dropout; Llama: the
    token embedding itself)."""
    return as_order(order).family.embeddings


def model_nodes(order: str | BlockOrder | GPTConfig = NormPosition.PRE
                ) -> tuple[tuple[Node, ...], tuple[Node, ...]]:
    """The nodes before block 0 and after the last block."""
    order = as_order(order)
    return order.family.before, order.family.after_nodes(order.position)


def attention_inside(order: str | BlockOrder | GPTConfig = NormPosition.PRE) -> tuple[Node, ...]:
    """Attention opened, in the order its forward computes it (the model's own steps:
    Qwen3's q_norm and k_norm only with its switch)."""
    order = as_order(order)
    return order.family.steps(order.switches)


def block_nodes(norm_position: str | BlockOrder = NormPosition.PRE) -> tuple[Node, ...]:
    """Nodes of one transformer block in forward order."""
    order = as_order(norm_position)
    return order.family.block_nodes(order.position)


def block_steps(norm_position: str | BlockOrder = NormPosition.PRE) -> tuple[Node, ...]:
    """The block's own steps in the order they run (nodes inside another left out):
    norm1, att, drop1, add1, ... in GPT-2's Pre-LN."""
    return tuple(n for n in block_nodes(norm_position) if n.parent is None)


def shortcut_sources(norm_position: str | BlockOrder = NormPosition.PRE) -> dict[str, str]:
    """For each residual add of a block, the node whose output the shortcut carries:
    the block input for add1; add1 (Pre-LN) or norm1 (Post-LN) for add2."""
    order = as_order(norm_position)
    return order.family.shortcut_sources(order.position)


def residual_branches(norm_position: str | BlockOrder = NormPosition.PRE) -> dict[str, str]:
    """For each residual add, the node that carries the branch being added: add =
    branch + shortcut (GPT-2: the dropouts; Llama: attention and the feed-forward)."""
    order = as_order(norm_position)
    return dict(order.family.branches[order.position])


def block_title(layer: int, n_layers: int) -> str:
    """The one name of a block on screen: 'Block 2 of 4' for ``layer`` 2 of four, the last
    'Block 3 of 4'. Blocks and heads are numbered from 0 everywhere, as in their modules
    (``trf_blocks.2``), the tensors' indices and the command line."""
    return f"Block {layer} of {n_layers}"


def head_label(layer: int, head: int) -> str:
    """A compact name of one head: 'B2 H5' is head 5 of ``trf_blocks.2``."""
    return f"B{layer} H{head}"


def block_module_name(layer: int) -> str:
    """The module path of a whole block (``trf_blocks.3``)."""
    return f"{BLOCKS}.{layer}"


def parse_hook(hook_name: str) -> tuple[int | None, str]:
    """(layer, key) of a hook name: ``trf_blocks.3.ff.layers.1`` -> (3, 'ff.layers.1');
    a node outside the blocks -> (None, its name). ``KeyError`` for a name no family has."""
    parts = hook_name.split(".", 2)
    if len(parts) == 3 and parts[0] == BLOCKS and parts[1].isascii() and parts[1].isdigit():
        if not any(f.has_block_key(parts[2]) for f in FAMILIES.values()):
            raise KeyError(f"unknown node {hook_name!r}")
        return int(parts[1]), parts[2]
    if any(hook_name in f.model_keys() for f in FAMILIES.values()):
        return None, hook_name
    raise KeyError(f"unknown node {hook_name!r}")


def layer_of(hook_name: str) -> int | None:
    """The block a node belongs to (None for the embeddings, final norm and head)."""
    return parse_hook(hook_name)[0]


def same_node_in_layer(hook_name: str, layer: int) -> str:
    """The same node of another block; nodes outside the blocks stay as they are."""
    block, key = parse_hook(hook_name)
    return hook_name if block is None else block_hook_name(layer, key)


def block_output(norm_position: str | BlockOrder = NormPosition.PRE) -> str:
    """The node whose output leaves a block: the second add (Pre-LN) or the second
    norm (Post-LN)."""
    return residual_nodes(norm_position)[1]


def residual_nodes(norm_position: str | BlockOrder = NormPosition.PRE) -> tuple[str, str]:
    """The residual stream after each half of a block: (add1, add2) in Pre-LN,
    (norm1, norm2) in Post-LN, where the norms come after the adds."""
    order = as_order(norm_position)
    return order.family.residual_nodes(order.position)


def input_node(hook_name: str, norm_position: str | BlockOrder = NormPosition.PRE) -> str | None:
    """The node whose output feeds this one: the previous node at the same level of the
    block; a step that reads named siblings, the first of them (Llama's fc2 reads what
    the feed-forward reads); for a first child (Linear 1, the attention pattern) what
    feeds its parent; for the block's first node the block's input (the previous block's
    last node, or the embeddings). None outside the blocks."""
    layer = layer_of(hook_name)
    if layer is None:
        return None
    order = as_order(norm_position)
    return order.family.input_node(hook_name, order.position, layer, order.switches)


def model_input_node(hook_name: str, norm_position: str | BlockOrder, n_layers: int) -> str | None:
    """What a node outside the blocks reads: None for a table lookup (the embeddings),
    the node before it otherwise (after lookups, the first of them: the embedding sum
    reads the token embedding); the final norm reads the last block's output."""
    order = as_order(norm_position)
    before, after = order.family.before, order.family.after_nodes(order.position)
    keys = [n.key for n in before]
    if hook_name in keys:
        i = keys.index(hook_name)
        if before[i].kind == Kind.EMBEDDING:
            return None
        return keys[0] if before[i - 1].kind == Kind.EMBEDDING else keys[i - 1]
    i = [n.key for n in after].index(hook_name)
    return after[i - 1].key if i else block_input(n_layers, order)


def block_input(layer: int, norm_position: str | BlockOrder = NormPosition.PRE) -> str:
    """The node whose output enters block ``layer``: the embeddings, or the previous
    block's output."""
    order = as_order(norm_position)
    return order.family.block_input(layer, order.position)


def drawn_beside(norm_position: str | BlockOrder = NormPosition.PRE) -> dict[str, Node]:
    """Nodes the block graph draws beside another instead of in the forward chain: the
    attention pattern beside attention. Key: the node it sits beside."""
    order = as_order(norm_position)
    return order.family.drawn_beside(order.position)


def short_label(hook_name: str) -> str:
    """A compact label: 'B3 add2' for a block node (``trf_blocks.3``), the name itself
    otherwise."""
    layer, key = parse_hook(hook_name)
    return key if layer is None else f"B{layer} {key}"


def is_pattern(hook_name: str) -> bool:
    return parse_hook(hook_name)[1] == PATTERN


def eval_source(hook_name: str, norm_position: str | BlockOrder = NormPosition.PRE) -> str:
    """The node whose tensor this node outputs in eval mode (itself if none)."""
    return eval_chain(hook_name, norm_position)[-1]


def eval_chain(hook_name: str, norm_position: str | BlockOrder = NormPosition.PRE) -> list[str]:
    """The node and every node whose very tensor it outputs in eval mode, in turn:
    ``drop2`` -> drop2, ff, ff.layers.2 (dropout is the identity; ff returns Linear 2's
    output; Llama's ff returns fc3's)."""
    chain = [hook_name]
    node = node_for_hook(hook_name, norm_position)
    while node.same_in_eval:
        prefix = hook_name[: len(hook_name) - len(node.key)]
        hook_name = prefix + node.same_in_eval
        chain.append(hook_name)
        node = node_for_hook(hook_name, norm_position)
    return chain


def all_hook_names(cfg: GPTConfig, include_pattern: bool = True,
                   inside: bool = False, experts: bool = False) -> list[str]:
    """Every node of the whole model in forward order, as hook names; ``inside`` adds
    the nodes inside attention (the pattern among them), ``experts`` every expert's
    steps of a mixture of experts (``ff.fc1.3``: expert 3's fc1)."""
    return family_of(cfg).hook_names(cfg, include_pattern, inside, experts)


def inside_attention(hook_name: str) -> bool:
    """Whether a node is one of attention's own steps other than the pattern (a node
    captured only when asked for: ``all_hook_names(..., inside=True)``)."""
    layer, key = parse_hook(hook_name)
    return layer is not None and key.startswith(ATTENTION + ".") and key != PATTERN


def select_hook_names(cfg: GPTConfig, pattern: str | list[str] | None = None,
                      layer: int | None = None, include_pattern: bool = False,
                      inside: bool = False, experts: bool = False) -> list[str]:
    """Hook names matching a glob (``trf_blocks.*.add2``), a list of names, or one layer,
    in forward order; the nodes inside attention only with ``inside``, the experts'
    steps only with ``experts``. An unknown explicit name raises ``KeyError``."""
    return family_of(cfg).select(cfg, pattern, layer, include_pattern, inside, layer_of,
                                 experts)


def expert_nodes(cfg: GPTConfig, expert: int) -> tuple[Node, ...]:
    """Expert ``expert``'s steps in a mixture of experts (none without experts)."""
    return family_of(cfg).expert_nodes(expert) if cfg.n_experts else ()


def expert_step_keys(cfg: GPTConfig) -> list[str]:
    """The keys an expert's steps take in a dense feed-forward (``ff.fc1`` …); expert E's
    are these with ``.E`` added."""
    return [n.key for n in family_of(cfg).experts] if cfg.n_experts else []


def expert_step(hook_name: str, cfg: GPTConfig) -> tuple[int, int, str] | None:
    """(layer, expert, the step's key in a dense feed-forward: ``ff.fc1``) of an
    expert's step, or None for any other node."""
    layer, key = parse_hook(hook_name)
    found = family_of(cfg).expert_of(key) if layer is not None else None
    return None if found is None else (layer, found[1], found[0].key)


def node_for_hook(hook_name: str, norm_position: str | BlockOrder = NormPosition.PRE) -> Node:
    """The table entry of a hook name, with the words of that order (a Post-LN norm1
    comes after the first add, not before attention; a Llama norm1 is an RMSNorm)."""
    order = as_order(norm_position)
    return order.family.node(hook_name, order.position)
