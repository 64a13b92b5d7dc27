"""What a block family is: one kind of transformer block (GPT-2's, Llama's …) as a record
that describes both its graph and its model, so that no other module needs to ask which
family a model is. The graph: the node table per norm position, attention's steps, the
roles nodes play, the residual wiring. The model: how it is built and initialised, how
its parameters are counted, the norm's kind, the files it is read from, the tokenizer it
expects, its words for the lessons, which lessons and experiments apply, the classes the
Code view shows.

The families themselves are files of ``families/`` (one a family) and are registered
there once; ``BlockOrder`` is a norm position of one family, as a model's config gives
it. Nothing here imports torch or a family."""

from __future__ import annotations

import fnmatch
from dataclasses import dataclass, field, replace
from enum import StrEnum
from typing import TYPE_CHECKING, Any, Callable

from .node_types import Kind, Node
from .norm_position import NormPosition  # noqa: F401 (the families' orders are keyed by it)
from .family_parts import Classes, Counting, Files, ModelCode, Words  # noqa: F401 (its parts)
from .variant import Gate, QKSpan, Variant  # noqa: F401 (a family's record names them)

if TYPE_CHECKING:
    from .config import GPTConfig

NORM_KINDS = frozenset({Kind.NORM, Kind.RMSNORM, Kind.DYT})  # a norm, or DyT in its place
BLOCKS = "trf_blocks"  # the module list of the transformer blocks, in every family
BLOCK_INPUT = "input"  # the residual stream entering a block (the previous node's output)
PARENT_INPUT = "<parent input>"  # in ``Node.inputs``: what the node's parent reads
ATTENTION = "att"


class Role(StrEnum):
    """What other modules look for in a block, whatever the node that does it is called
    in a family. ``BlockFamily.role`` answers with the node's key, or None where the
    family has no such node; a misspelt role is no member, so it fails where written."""
    ACTIVATION = "activation"  # the non-linearity (GELU, SiLU)
    ACTIVATION_INPUT = "activation_input"  # what the non-linearity reads
    ACTIVATION_OUTPUT = "activation_output"  # what the last Linear reads
    LAST_LINEAR = "last_linear"  # the feed-forward's last Linear
    UP = "up"  # a gated feed-forward's second Linear: the values the gate lets through
    ROUTER = "router"  # a mixture of experts' router: its logits, one per expert
    ROUTING = "routing"  # each token's weight on each expert (0 where it is not routed)
    POSITION_EMBEDDING = "position_embedding"  # learned positions added to the stream
    EMBEDDING_SUM = "embedding_sum"  # token + position embedding
    EMBEDDING_SCALE = "embedding_scale"  # token embeddings × √emb_dim (Gemma)
    FIRST_DROPOUT = "first_dropout"  # dropout on attention's output
    HEAD_QUERIES = "head_queries"  # queries per head as the scores read them
    HEAD_KEYS = "head_keys"  # keys per head as the scores read them
    HEAD_VALUES = "head_values"  # values per head as the pattern mixes them
    QUERIES_ROPE = "queries_rope"  # queries rotated by their positions
    KEYS_ROPE = "keys_rope"  # keys rotated by their positions
    KEYS_SHARED = "keys_shared"  # key heads repeated for their groups of query heads
    VALUES_SHARED = "values_shared"
    Q_NORM = "q_norm"  # queries normalised per head
    K_NORM = "k_norm"
    # what the scores are made of, as the fast path leaves it to hooks: the queries and
    # keys (split into heads where the node has no heads axis), the values mixed
    SCORED_QUERIES = "scored_queries"
    SCORED_KEYS = "scored_keys"
    MIXED_VALUES = "mixed_values"


class Switch(StrEnum):
    """Config switches that some family's nodes need (``Node.needs``)."""
    QK_NORM = "qk_norm"


SWITCHES = tuple(Switch)


class AttentionFormulas(StrEnum):
    """How Explain works attention's steps out: each by its kind's formula (GPT-2), or
    all recomputed from attention's input (a rotary block: every step after the
    projections depends on the rotation)."""
    BY_KIND = "by kind"
    FROM_INPUT = "from input"


def block_hook_name(layer: int, key: str) -> str:
    return f"{BLOCKS}.{layer}.{key}"


def switches_of(cfg: "GPTConfig") -> frozenset[str]:
    """The switches of a config that are on."""
    return frozenset(name for name in SWITCHES if getattr(cfg, name, False))


@dataclass(frozen=True, eq=False)
class BlockFamily:
    """One kind of block: its nodes in forward order per norm position, attention's own
    steps, the model's nodes before and after the blocks, what plays each role, and the
    record of its model (``model``, ``counting``, ``files``, ``words`` and switches)."""

    name: str  # the config's ``family`` as written in files
    title: str  # "GPT-2", "Llama / Qwen"
    orders: dict[NormPosition, tuple[Node, ...]]  # norm position -> the block's nodes
    attention_inside: tuple[Node, ...]  # attention opened: its steps, the pattern among them
    before: tuple[Node, ...]  # the model's nodes before block 0
    after: tuple[Node, ...]  # after the last block: final norm, output head
    embeddings: str  # the node whose output enters block 0
    # norm position -> for each residual add, the node whose output its shortcut carries
    shortcuts: dict[NormPosition, dict[str, str]]
    # norm position -> for each residual add, the node carrying the branch it adds
    branches: dict[NormPosition, dict[str, str]]
    residuals: dict[NormPosition, tuple[str, str]]  # the stream after each half
    roles: dict[Role, str]
    model: ModelCode
    counting: Counting
    files: Files
    words: Words
    # the rows of attention's steps drawn opened, first that fits the model's steps wins
    attention_grids: tuple[tuple[tuple[str | None, ...], ...], ...]
    # the nodes after the blocks where a norm position has its own (DyT's final norm)
    after_by_position: dict[NormPosition, tuple[Node, ...]] = field(default_factory=dict)
    config_fields: frozenset[str] = frozenset()  # the optional GPTConfig fields it uses
    config_problems: Callable[[Any], list[str]] = lambda cfg: []
    centred_norm: bool = True  # LayerNorm (mean out, shift) or RMSNorm (neither)
    dropout: bool = True  # whether drop_rate means anything in this block
    quiz: bool = True  # whether every Learn question is written and checked for it
    mutations: tuple[str, ...] | None = None  # the divergence exercises it has (None: all)
    beside: tuple[str, ...] = ()  # presets to set beside it in the blocks' comparison
    presets: dict[str, dict[str, Any]] = field(default_factory=dict)  # name -> config fields
    attention_formulas: AttentionFormulas = AttentionFormulas.BY_KIND
    block_title: Callable[[NormPosition], str] | None = None  # else the family's title
    # a mixture of experts: one expert's steps, keyed as the dense feed-forward's
    # (``ff.fc1``); expert e's are ``ff.fc1.{e}``, its module path (``expert_nodes``)
    experts: tuple[Node, ...] = ()

    def __post_init__(self) -> None:
        for role in self.roles:
            Role(role)  # a misspelt role fails here
        for position in self.orders:
            NormPosition(position)

    def __repr__(self) -> str:
        return f"BlockFamily({self.name})"

    def order(self, position: str, switches: frozenset[str] = frozenset()) -> "BlockOrder":
        """Its order for a norm position; ``switches``: the config's switches that are on
        and that nodes need (``Node.needs``: Qwen3's "qk_norm")."""
        return BlockOrder(self, self._position(position), frozenset(switches))

    def _position(self, position: str) -> NormPosition:
        if position not in self.orders:
            known = ", ".join(repr(str(p)) for p in self.orders)
            raise ValueError(f"norm_position must be one of {known} for a {self.title} block, "
                             f"got {position!r}")
        return NormPosition(position)

    def title_of(self, position: str) -> str:
        """The block's kind in a word or two (its title, or its placement's)."""
        return self.block_title(NormPosition(position)) if self.block_title else self.title

    def display_name(self, cfg: "GPTConfig") -> str:
        """'GPT-2', 'Llama', 'Qwen3': the family as a model of this config is known."""
        return self.words.name(cfg) if self.words.name else self.title

    def steps(self, switches: frozenset[str] = frozenset()) -> tuple[Node, ...]:
        """Attention opened for a model with these switches: a node whose switch is off
        is left out, and a step that read it reads what it read (it was the identity)."""
        absent = {n.key: n.inputs for n in self.attention_inside
                  if n.needs is not None and n.needs not in switches}
        if not absent:
            return self.attention_inside

        def through(key: str) -> tuple[str, ...]:
            return tuple(k for i in absent[key] for k in through(i)) if key in absent else (key,)
        return tuple(replace(n, inputs=tuple(k for i in n.inputs for k in through(i)))
                     for n in self.attention_inside if n.key not in absent)

    # ------------------------------------------------------------------ the table
    def block_nodes(self, position: str) -> tuple[Node, ...]:
        return self.orders[self._position(position)]

    def norm_keys(self, position: str) -> list[str]:
        """The keys of a block's norms in this norm position, in forward order (a DyT
        standing in for a norm counts)."""
        return [n.key for n in self.block_nodes(position) if n.kind in NORM_KINDS]

    def block_keys(self) -> set[str]:
        """Every key of a block node, in any order, attention's steps included."""
        return {n.key for nodes in self.orders.values() for n in nodes} | {
            n.key for n in self.attention_inside}

    def expert_nodes(self, expert: int) -> tuple[Node, ...]:
        """Expert ``expert``'s steps, in the order they run (fc1, fc2, SiLU, the product,
        fc3): its tensors hold the tokens routed to it only, (1, tokens, width)."""
        keys = {n.key for n in self.experts}
        return tuple(replace(n, key=f"{n.key}.{expert}", label=f"E{expert} {n.label}",
                             description=f"Expert {expert}, on the tokens routed to it only "
                                         f"(in prompt order). {n.description}",
                             inputs=tuple(f"{i}.{expert}" if i in keys else i
                                          for i in n.inputs) or (PARENT_INPUT,))
                     for n in self.experts)

    def expert_of(self, key: str) -> tuple[Node, int] | None:
        """(template, expert) of an expert step's key (``ff.fc1.3``), or None."""
        head, _, tail = key.rpartition(".")
        if not (tail.isascii() and tail.isdigit()) or tail != str(int(tail)):
            return None
        template = next((n for n in self.experts if n.key == head), None)
        return None if template is None else (template, int(tail))

    def has_block_key(self, key: str) -> bool:
        """Whether ``key`` names a block node of this family (an expert's step included)."""
        return key in self.block_keys() or self.expert_of(key) is not None

    def model_keys(self) -> set[str]:
        afters = [self.after, *self.after_by_position.values()]
        return {n.key for n in self.before} | {n.key for nodes in afters for n in nodes}

    def after_nodes(self, position: str) -> tuple[Node, ...]:
        """The nodes after the last block in this norm position (final norm, head)."""
        return self.after_by_position.get(self._position(position), self.after)

    def node(self, hook_name: str, position: str) -> Node:
        """The table entry of a hook name in this family, with the words of that norm
        position's order. ``KeyError`` for a name the family does not have."""
        for node in self.before + self.after_nodes(position):
            if node.key == hook_name:
                return node
        parts = hook_name.split(".", 2)
        if len(parts) == 3 and parts[0] == BLOCKS and parts[1].isascii() and parts[1].isdigit():
            for node in self.block_nodes(position) + self.attention_inside:
                if node.key == parts[2]:
                    return node
            found = self.expert_of(parts[2])
            if found is not None:
                return self.expert_nodes(found[1])[self.experts.index(found[0])]
        raise KeyError(f"unknown node {hook_name!r}")

    def role(self, role: Role) -> str | None:
        """The key of the node that plays ``role`` here, or None (no such node)."""
        if not isinstance(role, Role):
            raise TypeError(f"a role is a Role, not {role!r}")
        return self.roles.get(role)

    # ------------------------------------------------------------------ wiring
    def shortcut_sources(self, position: str) -> dict[str, str]:
        return dict(self.shortcuts[self._position(position)])

    def residual_nodes(self, position: str) -> tuple[str, str]:
        return self.residuals[self._position(position)]

    def block_output(self, position: str) -> str:
        return self.residual_nodes(position)[1]

    def block_input(self, layer: int, position: str) -> str:
        return self.embeddings if layer == 0 else block_hook_name(layer - 1, self.block_output(position))

    def input_node(self, hook_name: str, position: str, layer: int,
                   switches: frozenset[str] = frozenset()) -> str:
        """The node whose output feeds this block node (see nodes.input_node)."""
        node = self.node(hook_name, position)
        if node.parent == ATTENTION and node.kind != Kind.PATTERN:  # its inputs for the model
            node = next((n for n in self.steps(switches) if n.key == node.key), node)
        if node.inputs and node.kind != Kind.PATTERN:  # reads named nodes (a parallel block's ff)
            if node.inputs[0] == PARENT_INPUT:
                return self.input_node(block_hook_name(layer, node.parent), position, layer,
                                       switches)
            return block_hook_name(layer, node.inputs[0])
        if node.parent == ATTENTION and node.kind != Kind.PATTERN:  # attention opened
            return self.input_node(block_hook_name(layer, ATTENTION), position, layer, switches)
        siblings = [n.key for n in self.block_nodes(position) if n.parent == node.parent]
        i = siblings.index(node.key)
        if i > 0:
            return block_hook_name(layer, siblings[i - 1])
        if node.parent is not None:
            return self.input_node(block_hook_name(layer, node.parent), position, layer, switches)
        return self.block_input(layer, position)

    def drawn_beside(self, position: str) -> dict[str, Node]:
        return {n.parent: n for n in self.block_nodes(position) if n.kind == Kind.PATTERN}

    def attention_grid(self, switches: frozenset[str]) -> tuple[tuple[str | None, ...], ...]:
        """The rows attention's steps are drawn in: the first grid whose every step the
        model has (Qwen3's with its q/k norms; without them, Llama's)."""
        have = {n.key for n in self.steps(switches)}
        return next(g for g in self.attention_grids
                    if all(k in have for row in g for k in row if k))

    # ------------------------------------------------------------------ whole models
    def hook_names(self, cfg: "GPTConfig", include_pattern: bool = True,
                   inside: bool = False, experts: bool = False) -> list[str]:
        names = [n.key for n in self.before]
        for layer in range(cfg.n_layers):
            for n in self.block_nodes(cfg.norm_position):
                if inside and n.kind == Kind.PATTERN:
                    names += [block_hook_name(layer, m.key) for m in self.steps(switches_of(cfg))]
                elif include_pattern or n.kind != Kind.PATTERN:
                    names.append(block_hook_name(layer, n.key))
                if experts and self.experts and n.key == self.roles.get(Role.ROUTING):
                    names += [block_hook_name(layer, m.key) for e in range(cfg.n_experts)
                              for m in self.expert_nodes(e)]
        names += [n.key for n in self.after_nodes(cfg.norm_position)]
        return names

    def select(self, cfg: "GPTConfig", pattern: str | list[str] | None, layer: int | None,
               include_pattern: bool, inside: bool, layer_of, experts: bool = False) -> list[str]:
        names = self.hook_names(cfg, include_pattern=True, inside=inside, experts=experts)
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


@dataclass(frozen=True)
class BlockOrder:
    """A norm position of one family, with the model's switches that nodes need: what a
    model's config makes of its block (``nodes.order_of``). It is not a string: compare
    its ``position`` with a ``NormPosition``, or its ``family`` with another order's."""

    family: BlockFamily
    position: NormPosition
    switches: frozenset[str] = frozenset()  # the model's switches nodes need (Qwen3's "qk_norm")

    def __eq__(self, other: object) -> bool:
        if isinstance(other, str):
            raise TypeError(f"an order is not a string: compare its position with {other!r}")
        if not isinstance(other, BlockOrder):
            return NotImplemented
        return (self.family is other.family and self.position == other.position
                and self.switches == other.switches)

    def __hash__(self) -> int:
        return hash((id(self.family), self.position, self.switches))

    @property
    def title(self) -> str:
        return self.family.title_of(self.position)
