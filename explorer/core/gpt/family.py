"""A block family as a value: the node table of one kind of transformer block (GPT-2's,
Llama's), per norm position, with its roles and residual wiring, and the questions every
other module asks of it. ``BlockOrder`` is a norm position of one family: the string
"pre" or "post" that carries its family along, so a model's order answers for its own
block wherever a norm position went before.

The families themselves are in gpt2_nodes.py and llama_nodes.py; nodes.py holds the
registry and the functions the rest of the app calls."""

from __future__ import annotations

import fnmatch
from dataclasses import dataclass, field, replace

from .config import GPTConfig
from .node_types import Kind, Node

BLOCKS = "trf_blocks"  # the module list of the transformer blocks, in every family
BLOCK_INPUT = "input"  # the residual stream entering a block (the previous node's output)
PARENT_INPUT = "<parent input>"  # in ``Node.inputs``: what the node's parent reads
ATTENTION = "att"


SWITCHES = ("qk_norm",)  # config switches that some family's nodes need (Node.needs)


def block_hook_name(layer: int, key: str) -> str:
    return f"{BLOCKS}.{layer}.{key}"


def switches_of(cfg: GPTConfig) -> frozenset[str]:
    """The switches of a config that are on."""
    return frozenset(name for name in SWITCHES if getattr(cfg, name, False))


@dataclass(frozen=True, eq=False)
class BlockFamily:
    """One kind of block: its nodes in forward order per norm position, attention's own
    steps, the model's nodes before and after the blocks, and what plays each role."""

    name: str  # "gpt2", "llama": a config's ``family``
    title: str  # "GPT-2", "Llama / Qwen"
    orders: dict[str, tuple[Node, ...]]  # norm position -> the block's nodes
    attention_inside: tuple[Node, ...]  # attention opened: its steps, the pattern among them
    before: tuple[Node, ...]  # the model's nodes before block 0
    after: tuple[Node, ...]  # after the last block: final norm, output head
    embeddings: str  # the node whose output enters block 0
    # norm position -> for each residual add, the node whose output its shortcut carries
    shortcuts: dict[str, dict[str, str]]
    branches: dict[str, str]  # residual add -> the node carrying the branch it adds
    residuals: dict[str, tuple[str, str]]  # norm position -> the stream after each half
    # what other modules look for by role: "activation_input" (what the non-linearity
    # reads), "activation_output" (what the last Linear reads), "last_linear", "norm"
    roles: dict[str, str] = field(default_factory=dict)

    def __repr__(self) -> str:
        return f"BlockFamily({self.name})"

    def order(self, position: str, switches: frozenset[str] = frozenset()) -> "BlockOrder":
        """Its order for a norm position; ``switches``: the config's switches that are on
        and that nodes need (``Node.needs``: Qwen3's "qk_norm")."""
        if position not in self.orders:
            raise ValueError(f"norm_position must be one of {', '.join(map(repr, self.orders))} "
                             f"for a {self.title} block, got {position!r}")
        return BlockOrder(position, self, frozenset(switches))

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
        try:
            return self.orders[position]
        except KeyError:
            raise ValueError(f"norm_position must be one of {', '.join(map(repr, self.orders))} "
                             f"for a {self.title} block, got {position!r}") from None

    def block_keys(self) -> set[str]:
        """Every key of a block node, in any order, attention's steps included."""
        return {n.key for nodes in self.orders.values() for n in nodes} | {
            n.key for n in self.attention_inside}

    def model_keys(self) -> set[str]:
        return {n.key for n in self.before + self.after}

    def node(self, hook_name: str, position: str) -> Node:
        """The table entry of a hook name in this family, with the words of that norm
        position's order. ``KeyError`` for a name the family does not have."""
        for node in self.before + self.after:
            if node.key == hook_name:
                return node
        parts = hook_name.split(".", 2)
        if len(parts) == 3 and parts[0] == BLOCKS and parts[1].isascii() and parts[1].isdigit():
            for node in self.block_nodes(position) + self.attention_inside:
                if node.key == parts[2]:
                    return node
        raise KeyError(f"unknown node {hook_name!r}")

    def has(self, hook_name: str) -> bool:
        parts = hook_name.split(".", 2)
        if len(parts) == 3 and parts[0] == BLOCKS and parts[1].isascii() and parts[1].isdigit():
            return parts[2] in self.block_keys()
        return hook_name in self.model_keys()

    def role(self, role: str) -> str | None:
        return self.roles.get(role)

    # ------------------------------------------------------------------ wiring
    def shortcut_sources(self, position: str) -> dict[str, str]:
        self.block_nodes(position)  # validates
        return dict(self.shortcuts[position])

    def residual_branches(self) -> dict[str, str]:
        return dict(self.branches)

    def residual_nodes(self, position: str) -> tuple[str, str]:
        self.block_nodes(position)
        return self.residuals[position]

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
        if node.parent is not None and node.inputs and node.kind != Kind.PATTERN:  # reads named nodes
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

    # ------------------------------------------------------------------ whole models
    def hook_names(self, cfg: GPTConfig, include_pattern: bool = True,
                   inside: bool = False) -> list[str]:
        names = [n.key for n in self.before]
        for layer in range(cfg.n_layers):
            for n in self.block_nodes(cfg.norm_position):
                if inside and n.kind == Kind.PATTERN:
                    names += [block_hook_name(layer, m.key) for m in self.steps(switches_of(cfg))]
                elif include_pattern or n.kind != Kind.PATTERN:
                    names.append(block_hook_name(layer, n.key))
        names += [n.key for n in self.after]
        return names

    def select(self, cfg: GPTConfig, pattern: str | list[str] | None, layer: int | None,
               include_pattern: bool, inside: bool, layer_of) -> list[str]:
        names = self.hook_names(cfg, include_pattern=True, inside=inside)
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


class BlockOrder(str):
    """A norm position ("pre" or "post") of one family: equal to the plain string, so it
    goes wherever a norm position went, and its ``family`` answers for the block."""

    family: BlockFamily
    switches: frozenset[str]  # the model's switches that nodes need (Qwen3's "qk_norm")

    def __new__(cls, position: str, family: BlockFamily,
                switches: frozenset[str] = frozenset()) -> "BlockOrder":
        order = super().__new__(cls, position)
        order.family = family
        order.switches = switches
        return order

    @property
    def position(self) -> str:
        return str.__str__(self)
