"""GPT-2's block beside the Llama / Qwen block (the book's bonus chapters, one change at a
time): the role each part plays in both, said with each model's own numbers; the
parameters each spends per part; and the keys and values each keeps per token in its
KV cache, which is what grouped-query attention saves. Every figure is read from the two
models themselves — their parameters and the shapes of their key and value projections
— not from a table. Qt-free."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from ..gpt.config import preset
from ..gpt.build import build_model
from ..gpt.nodes import (ATTENTION, FEED_FORWARD, FINAL_NORM, FIRST_NORM, HEADS_MIX, KEYS, LOGITS,
                         POSITION_EMBEDDING, QUERIES, TOKEN_EMBEDDING, VALUES, Kind,
                         block_hook_name, inside_attention, node_for_hook, order_of, role)
from ..gpt.nodes import Role as NodeRole
from ..run.capture import Capture

PARTS = ("token embedding", "position embedding", "attention matrices", "attention biases",
         "query and key norms", "feed-forward matrices", "feed-forward biases", "norms",
         "output head")
PROJECTIONS = (QUERIES, KEYS, VALUES, HEADS_MIX)


def _part(name: str, order) -> str:
    """The part a parameter (``trf_blocks.0.att.W_query.weight``) belongs to."""
    module, _, leaf = name.rpartition(".")
    whole = {TOKEN_EMBEDDING: "token embedding", POSITION_EMBEDDING: "position embedding",
             LOGITS: "output head", FINAL_NORM: "norms"}
    if module in whole:
        return whole[module]
    node = None
    while node is None:  # an expert's Linear (ff.fc1.3) is no node: the node it is inside
        try:
            node = node_for_hook(module, order)
        except KeyError:
            module = module.rpartition(".")[0]
            if not module:
                raise
    bias = leaf == "bias"
    if node.key in PROJECTIONS:
        return "attention biases" if bias else "attention matrices"
    if node.kind in (Kind.NORM, Kind.RMSNORM):
        return "query and key norms" if node.parent == ATTENTION else "norms"
    if FEED_FORWARD in (node.parent, node.key):  # its layers, or a mixture's experts
        return "feed-forward biases" if bias else "feed-forward matrices"
    raise KeyError(f"no part for the parameter {name!r}")


def parameter_parts(model: torch.nn.Module) -> dict[str, int]:
    """The model's parameters counted per part (PARTS), each counted once: a head tied
    to the token embedding is that matrix, so its own count is 0."""
    order = order_of(model.cfg)
    counts = dict.fromkeys(PARTS, 0)
    for name, parameter in model.named_parameters():  # a shared tensor is listed once
        counts[_part(name, order)] += parameter.numel()
    return counts


def tied(model: torch.nn.Module) -> bool:
    return model.get_submodule(LOGITS).weight is model.get_submodule(TOKEN_EMBEDDING).weight


@dataclass(frozen=True)
class CacheCost:
    """What a model's KV cache keeps per token, read from its key and value projections."""

    layers: int
    query_heads: int
    kv_heads: int
    head_dim: int
    values_per_layer: int  # keys and values: 2 × kv_heads × head_dim
    bytes_per_value: int

    @property
    def per_token(self) -> int:
        """Bytes a token adds to the cache, every layer."""
        return self.layers * self.values_per_layer * self.bytes_per_value

    @property
    def as_multi_head(self) -> int:
        """Bytes a token would add with a key and a value head for every query head."""
        return self.layers * 2 * self.query_heads * self.head_dim * self.bytes_per_value

    @property
    def saved(self) -> float:
        """How many times less than multi-head attention it keeps (1: none saved)."""
        return self.as_multi_head / self.per_token


def cache_cost(model: torch.nn.Module, dtype: torch.dtype | None = None) -> CacheCost:
    """The KV cache per token of ``model`` (in ``dtype``, else its own weights' dtype):
    each layer keeps what its W_key and W_value make of the token."""
    cfg = model.cfg
    keys = model.get_submodule(block_hook_name(0, KEYS))
    values = model.get_submodule(block_hook_name(0, VALUES))
    head_dim = cfg.head_dim
    width = keys.out_features + values.out_features
    size = torch.tensor([], dtype=dtype or keys.weight.dtype).element_size()
    return CacheCost(cfg.n_layers, cfg.n_heads, keys.out_features // head_dim, head_dim,
                     width, size)


@dataclass(frozen=True)
class Role:
    """One job of the block, done each model's way."""

    name: str
    ways: tuple[str, str]  # the first model's, the second's
    nodes: tuple[str | None, str | None]  # a node of each block that does it (block 0)


def _attention_way(cfg) -> str:
    if cfg.kv_heads == cfg.n_heads:
        words = f"multi-head: {cfg.n_heads} query heads, each with its own key and value head"
    else:
        words = (f"grouped-query: {cfg.n_heads} query heads share {cfg.kv_heads} key/value "
                 f"heads ({cfg.n_heads // cfg.kv_heads} each)")
    words += f", {cfg.head_dim} values a head"
    return words + ("; RMSNorm on each query and key head (Qwen3)" if cfg.qk_norm else "")


def _way(job: str):
    """The words for one job, each config's family's own (``Words.ways``)."""
    return lambda cfg: cfg.family.words.ways[job](cfg)


def roles(first: torch.nn.Module, second: torch.nn.Module) -> list[Role]:
    """The block's jobs, each done by both models their way, with the node that does it
    in block 0 of each (None: this block has no node for it)."""
    pair = (first.cfg, second.cfg)

    def nodes(key_of) -> tuple[str | None, str | None]:
        keys = [key_of(cfg) for cfg in pair]
        return tuple(None if k is None else (k if k in (TOKEN_EMBEDDING, POSITION_EMBEDDING)
                                             else block_hook_name(0, k)) for k in keys)

    out = [
        Role("normalisation", tuple(map(_way("normalisation"), pair)), nodes(lambda c: FIRST_NORM)),
        Role("positions", tuple(map(_way("positions"), pair)),
             nodes(lambda c: role(c, NodeRole.KEYS_ROPE) or role(c, NodeRole.POSITION_EMBEDDING))),
        Role("attention", tuple(_attention_way(c) for c in pair), nodes(lambda c: ATTENTION)),
        Role("feed-forward", tuple(map(_way("feed-forward"), pair)), nodes(lambda c: FEED_FORWARD)),
        Role("non-linearity", tuple(map(_way("non-linearity"), pair)),
             nodes(lambda c: role(c, NodeRole.ACTIVATION))),
        Role("dropout", tuple(map(_way("dropout"), pair)),
             nodes(lambda c: role(c, NodeRole.FIRST_DROPOUT))),
        Role("biases", tuple(_bias_way(m) for m in (first, second)), (None, None)),
    ]
    return out


def _bias_way(model: torch.nn.Module) -> str:
    parts = parameter_parts(model)
    count = parts["attention biases"] + parts["feed-forward biases"]
    if not count:
        return "none: every Linear is a plain matrix"
    where = {"attention biases": "attention's", "feed-forward biases": "the feed-forward's"}
    return f"{count:,}, in {' and '.join(w for p, w in where.items() if parts[p])} Linears"


# ---------------------------------------------------------------------- for the view

def others_for(cfg) -> tuple[str, ...]:
    """The presets to set beside a model (its family's ``beside``: another family's),
    the one closest in width first."""
    return tuple(sorted(cfg.family.beside, key=lambda n: abs(preset(n).emb_dim - cfg.emb_dim)))


@dataclass(frozen=True)
class Comparison:
    """Everything the view shows of two blocks but their values on a prompt."""

    labels: tuple[str, str]
    families: tuple[str, str]  # "GPT-2", "Llama"
    roles: list[Role]
    parts: tuple[dict[str, int], dict[str, int]]
    blocks: tuple[int, int]  # blocks of each
    caches: tuple[CacheCost, CacheCost]
    heads: tuple[tuple[bool, int], tuple[bool, int]]  # tied?, a head of its own's weights
    widths: tuple[tuple[int, int, int], tuple[int, int, int]]  # emb, hidden, matrices

    def notes(self) -> list[str]:
        """The head tied or untied, and the feed-forward's matrices at each width."""
        lines = []
        for label, (is_tied, own), (c, hidden, n) in zip(self.labels, self.heads, self.widths):
            head = (f"the output head is tok_emb's matrix (tied): untied, it would add "
                    f"{own:,}" if is_tied else f"the output head is a matrix of its own "
                    f"({own:,}): tied, the model would have that many fewer")
            lines.append(f"{label}: {head}; its feed-forward holds {n} matrices of {c:,} × "
                         f"{hidden:,} = {n * c * hidden:,} weights a block — with "
                         f"{5 - n} it would hold {(5 - n) * c * hidden:,} at the same width")
        return lines


def compare(first: torch.nn.Module, second: torch.nn.Module,
            labels: tuple[str, str]) -> Comparison:
    pair = (first, second)
    return Comparison(labels, tuple(family_name(m.cfg) for m in pair), roles(first, second),
                      tuple(parameter_parts(m) for m in pair),
                      tuple(m.cfg.n_layers for m in pair),
                      tuple(cache_cost(m, torch.bfloat16) for m in pair),
                      tuple((tied(m), m.get_submodule(LOGITS).weight.numel()) for m in pair),
                      tuple(_ff_width(m) for m in pair))


def _ff_width(model: torch.nn.Module) -> tuple[int, int, int]:
    """(emb_dim, hidden width, matrices) of block 0's feed-forward, from its Linears (a
    mixture of experts': one expert's)."""
    cfg = model.cfg
    up = role(order_of(cfg), NodeRole.ACTIVATION_INPUT)
    if up is None:  # experts: the config's width, each expert's three matrices
        return cfg.emb_dim, cfg.hidden_dim, cfg.family.counting.ff_matrices
    linear = model.get_submodule(block_hook_name(0, up))
    return linear.in_features, linear.out_features, cfg.family.counting.ff_matrices


def family_name(cfg) -> str:
    return cfg.family.display_name(cfg)


def shape_only(name: str) -> torch.nn.Module:
    """A preset's model on the meta device: its shapes, no memory, no values."""
    return build_model(preset(name), device="meta", seed=None)


def prompt_values(model: torch.nn.Module, ids: list[int], nodes: list[str]) -> dict:
    """The nodes' values (NodeViews, numpy) on the prompt, attention's steps of block 0
    opened when one is asked for."""
    inside = 0 if any(inside_attention(n) for n in nodes) else False
    device = next(model.parameters()).device
    with torch.no_grad(), Capture(model, nodes=nodes, tensors=True, inside=inside) as cap:
        model(torch.tensor([ids], device=device))
    return cap.views()
