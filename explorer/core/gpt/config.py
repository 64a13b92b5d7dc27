"""GPTConfig and the model presets.

Owns the numbers that define a GPT-2-architecture model; builds nothing itself.
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

class NormPosition(StrEnum):
    """Where a block's norms sit: before attention and the feed-forward (GPT-2's Pre-LN),
    or after each add (the 2017 Transformer's Post-LN)."""
    PRE = "pre"
    POST = "post"


NORM_POSITIONS = tuple(NormPosition)
FAMILY_NAMES = ("gpt2", "llama")  # GPT-2's block; Llama's and Qwen's (nodes.FAMILIES)
GPT2_VOCAB = 50257  # the tokenizer's ids: a model needs at least these rows
# Bounds far above any model the explorer opens (GPT-2 1.5B: 48 layers, 1600 wide; Llama
# 3.2: a 131,072-token context): a config beyond them is a damaged or hostile file,
# refused before anything is built.
LIMITS = {"vocab_size": 1 << 22, "context_length": 1 << 17, "emb_dim": 1 << 15,
          "n_heads": 1 << 10, "n_layers": 1 << 10}


@dataclass(frozen=True)
class RopeScaling:
    """Llama 3's rotary frequency scaling (the book's ``rope_freq``, Hugging Face's
    ``rope_scaling`` of type "llama3"): long wavelengths divided by ``factor``, short ones
    kept, those between smoothly blended."""

    factor: float = 8.0
    low_freq_factor: float = 1.0
    high_freq_factor: float = 4.0
    original_context_length: int = 8192

    def __post_init__(self) -> None:
        for name in ("factor", "low_freq_factor", "high_freq_factor"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value < 1e6:
                raise ValueError(f"rope scaling's {name} must be a positive number, got {value!r}")
        if self.high_freq_factor <= self.low_freq_factor:
            raise ValueError("rope scaling's high_freq_factor must be above its low_freq_factor")
        n = self.original_context_length
        if isinstance(n, bool) or not isinstance(n, int) or not 0 < n <= 1 << 24:
            raise ValueError(f"rope scaling's original_context_length must be a positive "
                             f"whole number, got {n!r}")


# The fields only a Llama-family block has, with their values for GPT-2's.
_LLAMA_FIELDS = {"n_kv_groups": None, "head_size": None, "ff_dim": None, "rope_base": 10000.0,
                 "rope_scaling": None, "qk_norm": False, "norm_eps": 1e-5}


@dataclass(frozen=True)
class GPTConfig:
    """Sizes and switches of a model (the book's GPT_CONFIG dict, typed): GPT-2's block
    (``family`` "gpt2", chapter 4) or Llama's and Qwen's ("llama", the bonus chapters:
    RMSNorm, rotary positions, a SwiGLU feed-forward, grouped-query attention)."""

    vocab_size: int = 50257
    context_length: int = 1024
    emb_dim: int = 768
    n_heads: int = 12
    n_layers: int = 12
    drop_rate: float = 0.1
    qkv_bias: bool = True
    norm_position: str = "pre"  # "pre" (GPT-2) or "post" (the 2017 Transformer)
    tie_weights: bool = True  # out_head shares tok_emb's weight, as in GPT-2
    family: str = "gpt2"  # which block: "gpt2" or "llama" (Llama 2/3, Qwen2/2.5/3)
    # the Llama family's own (GPT-2's values otherwise):
    n_kv_groups: int | None = None  # key/value heads (grouped-query attention); None: n_heads
    head_size: int | None = None  # values per head when not emb_dim / n_heads (Qwen3)
    ff_dim: int | None = None  # the feed-forward's inner width; None: 4 x emb_dim
    rope_base: float = 10000.0  # θ of the rotary position embedding
    rope_scaling: RopeScaling | None = None  # Llama 3's frequency scaling
    qk_norm: bool = False  # RMSNorm of queries and keys per head (Qwen3)
    norm_eps: float = 1e-5  # the RMSNorms' epsilon

    def __post_init__(self) -> None:
        problems = []
        for name, limit in LIMITS.items():
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
                problems.append(f"{name} must be a positive integer, got {value!r}")
            elif value > limit:
                problems.append(f"{name} must be at most {limit:,}, got {value:,}")
        if self.family not in FAMILY_NAMES:
            problems.append(f"family must be one of {', '.join(FAMILY_NAMES)}, got {self.family!r}")
        elif self.family == "gpt2":
            odd = [k for k, v in _LLAMA_FIELDS.items() if getattr(self, k) != v]
            if odd:
                problems.append(f"{', '.join(odd)} belong to the llama family, not GPT-2's block")
        else:
            problems += self._llama_problems()
        if not problems and self.head_size is None and self.emb_dim % self.n_heads:
            problems.append(
                f"emb_dim ({self.emb_dim}) must be divisible by n_heads ({self.n_heads})"
            )
        rate = self.drop_rate
        if isinstance(rate, bool) or not isinstance(rate, (int, float)) or not 0.0 <= rate < 1.0:
            problems.append(f"drop_rate must be a number in [0, 1), got {rate!r}")
        for name in ("qkv_bias", "tie_weights"):
            if not isinstance(getattr(self, name), bool):
                problems.append(f"{name} must be true or false, got {getattr(self, name)!r}")
        if self.norm_position not in NORM_POSITIONS:
            problems.append(
                f"norm_position must be 'pre' or 'post', got {self.norm_position!r}"
            )
        if problems:
            raise ValueError("invalid GPTConfig: " + "; ".join(problems))

    def _llama_problems(self) -> list[str]:
        problems = []
        if self.norm_position != NormPosition.PRE:
            problems.append("a llama-family block puts its norms before attention and the "
                            "feed-forward (norm_position 'pre')")
        for name in ("n_kv_groups", "head_size", "ff_dim"):
            value = getattr(self, name)
            if value is not None and (isinstance(value, bool) or not isinstance(value, int)
                                      or not 0 < value <= LIMITS["emb_dim"] * 4):
                problems.append(f"{name} must be a positive integer, got {value!r}")
        kv = self.n_kv_groups
        if isinstance(kv, int) and not isinstance(kv, bool) and kv > 0 and isinstance(self.n_heads, int) \
                and self.n_heads > 0 and self.n_heads % kv:
            problems.append(f"n_heads ({self.n_heads}) must be a multiple of n_kv_groups ({kv})")
        for name, low, high in (("rope_base", 1.0, 1e12), ("norm_eps", 0.0, 1.0)):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not low < value < high:
                problems.append(f"{name} must be a number in ({low:g}, {high:g}), got {value!r}")
        if self.rope_scaling is not None and not isinstance(self.rope_scaling, RopeScaling):
            problems.append(f"rope_scaling must be a RopeScaling, got {self.rope_scaling!r}")
        if not isinstance(self.qk_norm, bool):
            problems.append(f"qk_norm must be true or false, got {self.qk_norm!r}")
        if self.drop_rate:
            problems.append("a llama-family block has no dropout (drop_rate 0)")
        return problems

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
        in a Llama-family block)."""
        return self.ff_dim or 4 * self.emb_dim

    @property
    def llama(self) -> bool:
        return self.family == "llama"

    def replace(self, **changes: Any) -> "GPTConfig":
        return dataclasses.replace(self, **changes)

    def to_dict(self) -> dict[str, Any]:
        """The fields as JSON values; GPT-2's block leaves out the Llama family's (its
        files read as they always have)."""
        data = dataclasses.asdict(self)
        if self.family == "gpt2":
            for key in (*_LLAMA_FIELDS, "family"):
                data.pop(key)
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


def _llama(**fields: Any) -> GPTConfig:
    """A Llama-family config: no dropout, no query/key/value bias unless given."""
    return GPTConfig(family="llama", drop_rate=0.0, qkv_bias=fields.pop("qkv_bias", False),
                     **fields)


PRESETS: dict[str, GPTConfig] = {
    "gpt2-small": GPTConfig(emb_dim=768, n_layers=12, n_heads=12),  # 124M
    "gpt2-medium": GPTConfig(emb_dim=1024, n_layers=24, n_heads=16),  # 355M
    "gpt2-large": GPTConfig(emb_dim=1280, n_layers=36, n_heads=20),  # 774M
    "gpt2-xl": GPTConfig(emb_dim=1600, n_layers=48, n_heads=25),  # 1558M
    # For training on a CPU in minutes (about 11.5M parameters, most in the embedding).
    "mini": GPTConfig(context_length=128, emb_dim=192, n_heads=6, n_layers=4),
    # About 1.7M parameters: for tests and quick experiments.
    "tiny": GPTConfig(context_length=64, emb_dim=32, n_heads=4, n_layers=2),
    # The Llama / Qwen block (random weights) shaped like the models people run; a preset
    # uses GPT-2's tokenizer, so its vocabulary has at least GPT-2's 50,257 rows.
    "llama-tiny": _llama(context_length=64, emb_dim=32, n_heads=4, n_kv_groups=2, n_layers=2,
                         ff_dim=64),
    # mini's Llama-family twin, to train here on the same text: the same width, blocks and
    # heads (6 query heads sharing 2 key/value heads), SwiGLU at 8/3 × emb_dim
    "llama-mini": _llama(context_length=128, emb_dim=192, n_heads=6, n_kv_groups=2, n_layers=4,
                         ff_dim=512),
    "qwen3-tiny": _llama(context_length=64, emb_dim=32, n_heads=4, n_kv_groups=2, n_layers=2,
                         ff_dim=64, head_size=16, qk_norm=True, norm_eps=1e-6, rope_base=1e6),
    # SmolLM2-135M's shape (its own vocabulary has 49,152 tokens)
    "smollm2-135m": _llama(context_length=8192, emb_dim=576, n_heads=9, n_kv_groups=3,
                           n_layers=30, ff_dim=1536, rope_base=100000.0),
    "llama3.2-1b": _llama(vocab_size=128256, context_length=131072, emb_dim=2048, n_heads=32,
                          n_kv_groups=8, n_layers=16, ff_dim=8192, rope_base=500000.0,
                          rope_scaling=RopeScaling(32.0, 1.0, 4.0, 8192)),
    "qwen2.5-0.5b": _llama(vocab_size=151936, context_length=32768, emb_dim=896, n_heads=14,
                           n_kv_groups=2, n_layers=24, ff_dim=4864, rope_base=1e6,
                           qkv_bias=True, norm_eps=1e-6),
    "qwen3-0.6b": _llama(vocab_size=151936, context_length=40960, emb_dim=1024, n_heads=16,
                         n_kv_groups=8, head_size=128, n_layers=28, ff_dim=3072, rope_base=1e6,
                         qk_norm=True, norm_eps=1e-6),
}

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


def preset_for_emb_dim(emb_dim: int) -> str | None:
    """The GPT-2 preset with this embedding width, if any."""
    for name, cfg in PRESETS.items():
        if name.startswith("gpt2") and cfg.emb_dim == emb_dim:
            return name
    return None
