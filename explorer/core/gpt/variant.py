"""Where a family built with the Llama / Qwen block's classes (core/gpt/llama.py) computes
otherwise, as records the family file states (``ModelCode.variant``): the gate of its
feed-forward, what its query/key norms span, its norms' stored gain, the embedding scale;
and the checks of the config fields of its sliding-window layers. No torch."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

MAX_WINDOW = 1 << 17  # a sliding window beyond it: a damaged file


class Gate(StrEnum):
    """The non-linearity of a gated feed-forward: SiLU (SwiGLU: Llama, Qwen, OLMo) or GELU
    with the tanh approximation (GeGLU: Gemma). Its value is the module's name in the
    feed-forward, so the node's key says which it is (``ff.silu``, ``ff.gelu``)."""
    SILU = "silu"
    GELU_TANH = "gelu"


class QKSpan(StrEnum):
    """What a query/key norm normalises: each head's values (Qwen3, Gemma 3) or the
    whole projection at once, before it is split into heads (OLMo 2 and 3)."""
    HEAD = "head"
    PROJECTION = "projection"


@dataclass(frozen=True)
class Variant:
    """Where a family built with the Llama / Qwen block's classes computes otherwise:
    its norms' gain stored around 0 and used as 1 + w (``gain_offset``: Gemma's),
    the token embeddings multiplied by √emb_dim (Gemma), the feed-forward's gate, and
    what the query/key norms span. The defaults are the Llama / Qwen block's."""

    gain_offset: bool = False  # True: norms' gain stored around 0, used as 1 + w (Gemma)
    embedding_scale: bool = False
    gate: Gate = Gate.SILU
    qk_span: QKSpan = QKSpan.HEAD


def sliding_problems(cfg) -> list[str]:
    """What a config's sliding layers, their θ and the attention scale get wrong (the
    fields of the families with sliding-window layers: Gemma 3, OLMo 3)."""
    problems = []
    window, layers = cfg.sliding_window, cfg.sliding_layers
    if window is not None and (isinstance(window, bool) or not isinstance(window, int)
                               or not 0 < window <= MAX_WINDOW):
        problems.append(f"sliding_window must be a whole number from 1 to {MAX_WINDOW:,}, "
                        f"got {window!r}")
    if not isinstance(layers, tuple) or any(
            isinstance(i, bool) or not isinstance(i, int) for i in layers):
        problems.append(f"sliding_layers must be a list of block numbers, got {layers!r}")
    elif list(layers) != sorted(set(layers)) or any(not 0 <= i < cfg.n_layers for i in layers):
        problems.append(f"sliding_layers must name blocks 0..{cfg.n_layers - 1} in order, each "
                        f"once, got {list(layers)}")
    elif layers and window is None:
        problems.append("sliding layers need a sliding_window")
    for name in ("rope_local_base", "attn_scalar"):
        value = getattr(cfg, name)
        if value is not None and (isinstance(value, bool) or not isinstance(value, (int, float))
                                  or not 0 < value < 1e12):
            problems.append(f"{name} must be a positive number, got {value!r}")
    return problems
