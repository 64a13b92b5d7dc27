"""GPTConfig and the model presets.

Owns the numbers that define a GPT-2-architecture model; builds nothing itself.
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass
from typing import Any

NORM_POSITIONS = ("pre", "post")
GPT2_VOCAB = 50257  # the tokenizer's ids: a model needs at least these rows
# Bounds far above any GPT-2 (1.5B: 48 layers, 1600 wide): a config beyond them is a
# damaged or hostile file, refused before anything is built.
LIMITS = {"vocab_size": 1 << 22, "context_length": 1 << 16, "emb_dim": 1 << 15,
          "n_heads": 1 << 10, "n_layers": 1 << 10}


@dataclass(frozen=True)
class GPTConfig:
    """Sizes and switches of a GPT-2-architecture model (the book's GPT_CONFIG dict, typed)."""

    vocab_size: int = 50257
    context_length: int = 1024
    emb_dim: int = 768
    n_heads: int = 12
    n_layers: int = 12
    drop_rate: float = 0.1
    qkv_bias: bool = True
    norm_position: str = "pre"  # "pre" (GPT-2) or "post" (the 2017 Transformer)
    tie_weights: bool = True  # out_head shares tok_emb's weight, as in GPT-2

    def __post_init__(self) -> None:
        problems = []
        for name, limit in LIMITS.items():
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
                problems.append(f"{name} must be a positive integer, got {value!r}")
            elif value > limit:
                problems.append(f"{name} must be at most {limit:,}, got {value:,}")
        if not problems and self.emb_dim % self.n_heads:
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

    @property
    def head_dim(self) -> int:
        return self.emb_dim // self.n_heads

    @property
    def hidden_dim(self) -> int:
        """Width inside the feed-forward block (4 x emb_dim, as in GPT-2)."""
        return 4 * self.emb_dim

    def replace(self, **changes: Any) -> "GPTConfig":
        return dataclasses.replace(self, **changes)

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

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


PRESETS: dict[str, GPTConfig] = {
    "gpt2-small": GPTConfig(emb_dim=768, n_layers=12, n_heads=12),  # 124M
    "gpt2-medium": GPTConfig(emb_dim=1024, n_layers=24, n_heads=16),  # 355M
    "gpt2-large": GPTConfig(emb_dim=1280, n_layers=36, n_heads=20),  # 774M
    "gpt2-xl": GPTConfig(emb_dim=1600, n_layers=48, n_heads=25),  # 1558M
    # For training on a CPU in minutes (about 11.5M parameters, most in the embedding).
    "mini": GPTConfig(context_length=128, emb_dim=192, n_heads=6, n_layers=4),
    # About 1.7M parameters: for tests and quick experiments.
    "tiny": GPTConfig(context_length=64, emb_dim=32, n_heads=4, n_layers=2),
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
