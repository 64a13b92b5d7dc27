"""What a node of the block graph is: its kind, its fixed histogram bins and the
``Node`` record. The tables of nodes themselves, with every name, are the families'
(families/), asked through nodes.py."""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .config import GPTConfig


class Kind(str, Enum):
    """What a node computes. A new kind is its fixed histogram range (``_HIST_BY_KIND``
    below: capture bins by it) and one record of lessons/kinds.py ``KIND_LESSONS`` (what it
    does, the common mistake, its Learn questions, its worked formula, the class the Code
    view shows); tests/core/gpt/test_nodes.py names what a new kind lacks."""

    EMBEDDING = "embedding"
    NORM = "norm"
    ATTENTION = "attention"
    HEADS = "heads"  # a (B, T, d_out) tensor split into heads, or heads joined again
    SCORES = "scores"  # queries · keysᵀ
    MASK = "mask"  # the scores with later keys set to −inf
    PATTERN = "pattern"
    CONTEXT = "context"  # attention weights · values, per head
    DROPOUT = "dropout"
    ADD = "add"
    LINEAR = "linear"
    GELU = "gelu"
    FFN = "ffn"
    LOGITS = "logits"
    # the Llama family's (the book's bonus chapters)
    RMSNORM = "rmsnorm"  # x / √(mean(x²) + eps) · weight: no mean taken out, no shift
    ROPE = "rope"  # queries or keys rotated by their position (rotary embedding)
    SILU = "silu"  # x · σ(x), the gate's non-linearity
    PRODUCT = "product"  # SiLU(fc1 · x) ⊙ (fc2 · x): the gated product SwiGLU feeds fc3
    DYT = "dyt"  # γ · tanh(α · x) + β: Dynamic Tanh, where a norm would be
    SCALE = "scale"  # every value times one constant (Gemma's √emb_dim on its embeddings)
    ROUTING = "routing"  # each token's weight on each expert: k of them not 0 (mixture of experts)

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
    Kind.EMBEDDING: HistRange(-1.0, 1.0, 100),
    Kind.NORM: HistRange(-10.0, 10.0, 100),
    Kind.ATTENTION: HistRange(-10.0, 10.0, 100),
    Kind.HEADS: HistRange(-10.0, 10.0, 100),
    Kind.SCORES: HistRange(-100.0, 100.0, 100),
    Kind.MASK: HistRange(-100.0, 100.0, 100),  # the −inf of masked keys fall below, apart
    Kind.PATTERN: HistRange(0.0, 1.0, 100),
    Kind.CONTEXT: HistRange(-10.0, 10.0, 100),
    Kind.DROPOUT: HistRange(-10.0, 10.0, 100),
    Kind.ADD: HistRange(-50.0, 50.0, 100),
    Kind.LINEAR: HistRange(-10.0, 10.0, 100),
    Kind.GELU: HistRange(-1.0, 9.0, 100),
    Kind.FFN: HistRange(-20.0, 20.0, 100),
    Kind.LOGITS: HistRange(-200.0, 50.0, 125),
    Kind.RMSNORM: HistRange(-10.0, 10.0, 100),
    Kind.ROPE: HistRange(-10.0, 10.0, 100),
    Kind.SILU: HistRange(-1.0, 9.0, 100),
    Kind.PRODUCT: HistRange(-10.0, 10.0, 100),
    Kind.DYT: HistRange(-10.0, 10.0, 100),
    Kind.SCALE: HistRange(-10.0, 10.0, 100),
    Kind.ROUTING: HistRange(0.0, 1.0, 100),
}

class Width(str, Enum):
    """A node's last dimension (see ``Node.shape``)."""

    EMB = "emb"
    HIDDEN = "hidden"  # the feed-forward's inside
    VOCAB = "vocab"
    CTX = "ctx"  # one per key: (B, H, T, T)
    HEAD = "head"  # head_dim values per head: (B, H, T, head_dim)
    Q = "q"  # every query head's values side by side: (B, T, H·head_dim)
    KV = "kv"  # every key/value head's: (B, T, KV·head_dim)
    KV_HEAD = "kv_head"  # per key/value head: (B, KV, T, head_dim)
    EXPERTS = "experts"  # one per expert of a mixture: (B, T, n_experts)

    __str__ = str.__str__
    __format__ = str.__format__


PER_HEAD = (Width.CTX, Width.HEAD, Width.KV_HEAD)  # the widths with a heads axis


@dataclass(frozen=True)
class Node:
    key: str  # module path relative to its parent (block or model)
    label: str  # short text on the graph
    description: str  # one line for tooltips and the inspector
    kind: Kind  # given as its word ("norm"); compares equal to it
    width: Width  # given as its word ("emb") too
    parent: str | None = None  # the node it is inside (expandable in the graph), if any
    # In eval mode this node outputs the very tensor of another node (dropout is the
    # identity; ff returns its last Linear's output), so capture can reuse that one.
    same_in_eval: str | None = None
    inputs: tuple[str, ...] = ()  # inside attention: the sibling nodes it is computed from
    hist_range: HistRange | None = None  # bins of its own instead of its kind's
    batched: bool = True  # False for the position embedding: one vector per position
    needs: str | None = None  # a config switch it exists with (Qwen3's q_norm: "qk_norm")

    def __post_init__(self) -> None:
        object.__setattr__(self, "kind", Kind(self.kind))  # an unknown kind fails here
        try:
            object.__setattr__(self, "width", Width(self.width))
        except ValueError:
            raise ValueError(f"unknown width {self.width!r}") from None

    @property
    def hist(self) -> HistRange:
        """Fixed histogram bins for this node, the same for every layer, prompt and step,
        so histograms of one node can be compared; values outside are counted apart."""
        return self.hist_range or _HIST_BY_KIND[self.kind]

    @property
    def per_head(self) -> bool:
        """Whether its tensor has a heads axis: (B, H, T, head_dim) or (B, H, T, T)."""
        return self.width in PER_HEAD

    def heads(self, cfg: GPTConfig) -> int:
        """How many heads its heads axis has: the query heads, or the key/value heads."""
        return cfg.kv_heads if self.width == Width.KV_HEAD else cfg.n_heads

    def shape(self, cfg: GPTConfig, batch: int, tokens: int) -> tuple[int, ...]:
        """The tensor shape this node produces for a (batch, tokens) input."""
        if self.width == Width.CTX:
            return (batch, cfg.n_heads, tokens, tokens)
        if self.width in (Width.HEAD, Width.KV_HEAD):
            return (batch, self.heads(cfg), tokens, cfg.head_dim)
        if not self.batched:
            return (tokens, cfg.emb_dim)
        last = {Width.EMB: cfg.emb_dim, Width.HIDDEN: cfg.hidden_dim, Width.VOCAB: cfg.vocab_size,
                Width.Q: cfg.n_heads * cfg.head_dim,
                Width.KV: cfg.kv_heads * cfg.head_dim,
                Width.EXPERTS: cfg.n_experts or 0}[self.width]
        return (batch, tokens, last)
