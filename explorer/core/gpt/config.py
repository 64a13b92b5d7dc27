"""GPTConfig and the model presets.

Owns the numbers that define a model of any registered block family (families/); builds
nothing itself.
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass
from typing import Any

from . import families
from .family import BlockFamily, NormPosition
from .rope_scaling import RopeScaling

__all__ = ["GPTConfig", "NormPosition", "RopeScaling", "BlockFamily", "PRESETS", "preset"]

# The GPTConfig fields only some families use (``BlockFamily.config_fields``), with the
# values a config of any other family must leave them at.
OPTIONAL_FIELDS = {"n_kv_groups": None, "head_size": None, "ff_dim": None, "rope_base": 10000.0,
                   "rope_scaling": None, "qk_norm": False, "norm_eps": 1e-5,
                   "sliding_window": None, "sliding_layers": (), "rope_local_base": None,
                   "attn_scalar": None, "n_experts": None, "experts_per_token": None,
                   "norm_topk_prob": False}
GPT2_VOCAB = 50257  # GPT-2's tokenizer's ids: a model that reads with it needs these rows
# Bounds far above any model the explorer opens (GPT-2 1.5B: 48 layers, 1600 wide; Llama
# 3.2: a 131,072-token context): a config beyond them is a damaged or hostile file,
# refused before anything is built.
LIMITS = {"vocab_size": 1 << 22, "context_length": 1 << 17, "emb_dim": 1 << 15,
          "n_heads": 1 << 10, "n_layers": 1 << 10}
NORM_POSITIONS = tuple(NormPosition)


@dataclass(frozen=True)
class GPTConfig:
    """Sizes and switches of a model (the book's GPT_CONFIG dict, typed), and the block
    family it is a model of (``family``: a record of families/, given by its name or as
    the record; GPT-2's block, chapter 4's, when none is named). The fields after it are
    only some families' (``BlockFamily.config_fields``: Llama's and Qwen's grouped-query
    attention, rotary positions, SwiGLU width and RMSNorm); every other family leaves
    them at their defaults."""

    vocab_size: int = 50257
    context_length: int = 1024
    emb_dim: int = 768
    n_heads: int = 12
    n_layers: int = 12
    drop_rate: float = 0.1
    qkv_bias: bool = True
    # given as its word too ("pre", "post"); None: the family's own (Pre-LN, OLMo's branch)
    norm_position: NormPosition = None  # type: ignore[assignment]
    tie_weights: bool = True  # out_head shares tok_emb's weight, as in GPT-2
    family: BlockFamily = None  # type: ignore[assignment]  # None or a name: resolved
    n_kv_groups: int | None = None  # key/value heads (grouped-query attention); None: n_heads
    head_size: int | None = None  # values per head when not emb_dim / n_heads (Qwen3)
    ff_dim: int | None = None  # the feed-forward's inner width; None: 4 x emb_dim
    rope_base: float = 10000.0  # θ of the rotary position embedding
    rope_scaling: RopeScaling | None = None  # Llama 3's frequency scaling
    qk_norm: bool = False  # RMSNorm of queries and keys per head (Qwen3)
    norm_eps: float = 1e-5  # the RMSNorms' epsilon
    sliding_window: int | None = None  # keys a sliding layer's query sees, itself included
    sliding_layers: tuple[int, ...] = ()  # the blocks whose attention slides (Gemma 3, OLMo 3)
    rope_local_base: float | None = None  # θ of the sliding layers' RoPE; None: rope_base
    attn_scalar: float | None = None  # scores divided by √attn_scalar; None: √head_dim
    n_experts: int | None = None  # a mixture of experts' feed-forward: its experts
    experts_per_token: int | None = None  # the k experts each token is routed to
    norm_topk_prob: bool = False  # the k weights renormalised to sum to 1 (Qwen3-MoE's)

    def __post_init__(self) -> None:
        problems = []
        if isinstance(self.sliding_layers, list):  # as JSON gives it; a tuple keeps it hashable
            object.__setattr__(self, "sliding_layers", tuple(self.sliding_layers))
        for name, limit in LIMITS.items():
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
                problems.append(f"{name} must be a positive integer, got {value!r}")
            elif value > limit:
                problems.append(f"{name} must be at most {limit:,}, got {value:,}")
        family = self.family
        if family is None:
            family = families.default()
        elif not isinstance(family, BlockFamily):
            try:
                family = families.named(family)
            except ValueError as exc:
                raise ValueError(f"invalid GPTConfig: {exc}") from None
        object.__setattr__(self, "family", family)
        odd = [k for k, v in OPTIONAL_FIELDS.items()
               if k not in family.config_fields and getattr(self, k) != v]
        if odd:
            problems.append(f"{', '.join(odd)} belong to another family, not {family.title}'s block")
        problems += family.config_problems(self)
        if not problems and self.head_size is None and self.emb_dim % self.n_heads:
            problems.append(
                f"emb_dim ({self.emb_dim}) must be divisible by n_heads ({self.n_heads})"
            )
        rate = self.drop_rate
        if isinstance(rate, bool) or not isinstance(rate, (int, float)) or not 0.0 <= rate < 1.0:
            problems.append(f"drop_rate must be a number in [0, 1), got {rate!r}")
        elif rate and not family.dropout:
            problems.append(f"a {family.title} block has no dropout (drop_rate 0)")
        for name in ("qkv_bias", "tie_weights"):
            if not isinstance(getattr(self, name), bool):
                problems.append(f"{name} must be true or false, got {getattr(self, name)!r}")
        if self.norm_position is None:
            object.__setattr__(self, "norm_position", next(iter(family.orders)))
        if not isinstance(self.norm_position, str) or self.norm_position not in family.orders:
            places = ", ".join(f"'{p}'" for p in family.orders)
            got = str(self.norm_position) if isinstance(self.norm_position, str) else self.norm_position
            problems.append(f"norm_position must be one of {places} for a {family.title} block, "
                            f"got {got!r}")
        else:
            object.__setattr__(self, "norm_position", NormPosition(self.norm_position))
        if problems:
            raise ValueError("invalid GPTConfig: " + "; ".join(problems))

    @property
    def head_dim(self) -> int:
        """Values per head: emb_dim / n_heads, or the config's own (Qwen3)."""
        return self.head_size or self.emb_dim // self.n_heads

    @property
    def kv_heads(self) -> int:
        """Key and value heads: n_heads, or fewer shared by groups of query heads (GQA)."""
        return self.n_kv_groups or self.n_heads

    @property
    def hidden_dim(self) -> int:
        """Width inside the feed-forward block (4 x emb_dim, as in GPT-2; the config's own
        where the family has one)."""
        return self.ff_dim or 4 * self.emb_dim

    def window(self, layer: int) -> int | None:
        """How many keys (its own included) a query of block ``layer`` sees: the sliding
        window in a sliding layer, None (every earlier one) in any other."""
        return self.sliding_window if layer in self.sliding_layers else None

    def rope_base_of(self, layer: int) -> float:
        """θ of block ``layer``'s rotation: the sliding layers' own where they have one."""
        if layer in self.sliding_layers and self.rope_local_base is not None:
            return self.rope_local_base
        return self.rope_base

    def replace(self, **changes: Any) -> "GPTConfig":
        return dataclasses.replace(self, **changes)

    def to_dict(self) -> dict[str, Any]:
        """The fields as JSON values: the family by its name, left out with the fields it
        does not use when it is the default (GPT-2's files read as they always have)."""
        data = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}
        data["norm_position"] = str(self.norm_position)
        if self.rope_scaling is not None:
            data["rope_scaling"] = dataclasses.asdict(self.rope_scaling)
        for key in OPTIONAL_FIELDS:
            if key not in self.family.config_fields:
                data.pop(key)
        if self.family is families.default():
            data.pop("family")
        else:
            data["family"] = self.family.name
        return data

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), sort_keys=True)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "GPTConfig":
        """Build from our own dict or the book's GPT_CONFIG dict (unknown keys rejected)."""
        if not isinstance(data, dict):
            raise ValueError(f"a config must be a JSON object, not {type(data).__name__}")
        fields = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(map(str, set(data) - fields))
        if unknown:
            raise ValueError(f"unknown GPTConfig keys: {', '.join(unknown)}")
        if not isinstance(data.get("family", ""), str):
            raise ValueError(f"family must be a name, got {data['family']!r}")
        scaling = data.get("rope_scaling")
        if isinstance(scaling, dict):
            try:
                data = {**data, "rope_scaling": RopeScaling(**scaling)}
            except TypeError as exc:
                raise ValueError(f"rope_scaling: {exc}") from None
        return cls(**data)

    @classmethod
    def from_hf_dict(cls, data: dict[str, Any]) -> "GPTConfig":
        """Build from a Hugging Face GPT-2 ``config.json``."""
        from ..base.validate import real, whole

        if not isinstance(data, dict):
            raise ValueError(f"a config must be a JSON object, not {type(data).__name__}")
        try:
            tie = data.get("tie_word_embeddings", True)
            if not isinstance(tie, bool):
                raise ValueError(f"tie_word_embeddings must be true or false, got {tie!r}")
            return cls(
                vocab_size=whole(data["vocab_size"], "vocab_size"),
                context_length=whole(data.get("n_positions", data.get("n_ctx", 1024)), "n_positions"),
                emb_dim=whole(data["n_embd"], "n_embd"),
                n_heads=whole(data["n_head"], "n_head"),
                n_layers=whole(data["n_layer"], "n_layer"),
                drop_rate=real(data.get("resid_pdrop", 0.1), "resid_pdrop", 0.0, 0.999),
                qkv_bias=True,
                norm_position="pre",
                tie_weights=tie,
            )
        except KeyError as exc:
            raise ValueError(f"Hugging Face config.json lacks the key {exc.args[0]!r}") from None


# Every family's presets (``BlockFamily.presets``), in the families' order: GPT-2's sizes,
# then the Llama / Qwen block's shapes (random weights) of the models people run.
PRESETS: dict[str, GPTConfig] = {name: GPTConfig(family=family, **fields)
                                 for family in families.FAMILIES.values()
                                 for name, fields in family.presets.items()}

# The book's GPT_CONFIG_124M: no qkv bias, separate output head.
BOOK_GPT_CONFIG_124M = GPTConfig(qkv_bias=False, tie_weights=False)


def preset(name: str, **overrides: Any) -> GPTConfig:
    """Return a preset by name, optionally with fields replaced."""
    try:
        base = PRESETS[name]
    except KeyError:
        raise ValueError(
            f"unknown preset {name!r}; choose one of: {', '.join(PRESETS)}"
        ) from None
    return base.replace(**overrides) if overrides else base
