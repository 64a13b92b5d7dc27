"""OLMo 2 and OLMo 3's block (Ai2's fully open models; the book's ch05/13_olmo3), as one
family record: the Llama / Qwen block's classes (core/gpt/llama.py) with the norms inside
each branch, after the sublayer (``x + norm(f(x))``: Hugging Face's
``post_attention_layernorm`` and ``post_feedforward_layernorm``, no norm before attention
or the feed-forward), query and key norms over the whole projection before it is split
into heads, and in OLMo 3 three sliding-window layers in every four. Every node in
forward order, attention opened, the files it is read from (weights/olmo_keys.py) and its
words where it differs from the Llama / Qwen block."""

from __future__ import annotations

from dataclasses import replace

from .. import placements
from ..family import Files, NormPosition, QKSpan, Variant
from ..mutations import SHORTCUTS
from ..variant import sliding_problems
from . import llama

BRANCH = NormPosition.BRANCH

# OLMo normalises the whole query and key projections (one RMSNorm over all heads'
# values), then splits them into heads: the norms read the projections, the heads the norms
_NORMS = {
    "att.q_norm": dict(label="q_norm (all heads)", width="q", inputs=("att.W_query",),
                       description="OLMo: the whole query projection RMS-normalised at once "
                       "(all n_heads · head_dim values of a token, one weight each), before "
                       "it is split into heads and rotated."),
    "att.k_norm": dict(label="k_norm (all heads)", width="kv", inputs=("att.W_key",),
                       description="OLMo: the whole key projection RMS-normalised at once "
                       "(n_kv_groups · head_dim values), before the split and the rotation."),
    "att.queries": dict(inputs=("att.q_norm",), description="The normalised queries split "
                        "into heads: view then transpose to (b, n_heads, T, head_dim)."),
    "att.keys": dict(inputs=("att.k_norm",), description="The normalised keys split into "
                     "their heads: (b, n_kv_groups, T, head_dim)."),
    "att.queries_rope": dict(inputs=("att.queries",)),
    "att.keys_rope": dict(inputs=("att.keys",)),
    "att.masked_scores": dict(description="attn_scores."
                              "masked_fill(mask, -inf): every key after its query set to −inf; "
                              "in a sliding layer (OLMo 3: three in every four) also every key "
                              "sliding_window or more positions back, so a token sees only the "
                              "last sliding_window tokens, itself included."),
}
_ORDER = ("att.W_query", "att.W_key", "att.W_value", "att.q_norm", "att.k_norm")
_INSIDE = {n.key: replace(n, **_NORMS.get(n.key, {})) for n in llama.ATTENTION_INSIDE}
ATTENTION_INSIDE = tuple(_INSIDE[k] for k in _ORDER) + tuple(
    n for k, n in _INSIDE.items() if k not in _ORDER)

_ORDERS = {BRANCH: placements.branch(llama.PARTS)}


def _classes():
    """The Llama / Qwen block's classes, their forward the branch placement's."""
    return replace(llama.LLAMA.model.classes(), block_forwards={BRANCH: "forward_branch"})


def _problems(cfg) -> list[str]:
    """The Llama / Qwen block's checks, the sliding layers', and its q/k norms."""
    problems = llama.config_problems(cfg) + sliding_problems(cfg)
    if cfg.qk_norm is not True:
        problems.append("an OLMo 2 / 3 block normalises its queries and keys (qk_norm true)")
    return problems


WORDS = replace(
    llama.WORDS,
    name=lambda cfg: "OLMo 3" if cfg.sliding_layers else "OLMo 2",
    size_note=lambda cfg: " · OLMo block, norms inside the branches" + (
        f", sliding window {cfg.sliding_window:,}" if cfg.sliding_layers else ""),
    ways={**llama.WORDS.ways,
          "normalisation": lambda cfg: (
              f"RMSNorm after each sublayer, inside its branch (x + norm(f(x))), none "
              f"before it: x / √(mean(x²) + {cfg.norm_eps:g}) × scale; queries and keys "
              "normalised over the whole projection")},
)

OLMO = replace(
    llama.LLAMA, name="olmo", title="OLMo 2 / 3", orders=_ORDERS, attention_inside=ATTENTION_INSIDE,
    shortcuts=placements.shortcuts(_ORDERS), branches=placements.branches(_ORDERS),
    residuals=placements.residuals(_ORDERS), after_by_position={},
    model=replace(llama.LLAMA.model, classes=_classes, variant=Variant(qk_span=QKSpan.PROJECTION)),
    files=Files(model_types=("olmo2", "olmo3"), key_maps="explorer.core.weights.olmo_keys",
                own_tokenizer=True,
                hf_name=lambda kind: {"olmo2": "OLMo 2", "olmo3": "OLMo 3"}.get(kind, "OLMo")),
    words=WORDS,
    attention_grids=((("att.W_query", "att.W_key", "att.W_value"),
                      ("att.q_norm", "att.k_norm", None),
                      ("att.queries", "att.keys", "att.values"),
                      ("att.queries_rope", "att.keys_rope", "att.values_repeated"),
                      (None, "att.keys_repeated", None),
                      ("att.attn_scores", "att.masked_scores", "att.attn_weights"),
                      ("att.out_proj", "att.context_vec", "att.context")),),
    config_fields=llama.CONFIG_FIELDS | {"sliding_window", "sliding_layers", "rope_local_base"},
    config_problems=_problems,
    mutations=SHORTCUTS,
    presets={name: dict(drop_rate=0.0, qkv_bias=False, qk_norm=True, norm_position=BRANCH,
                        tie_weights=False) | fields for name, fields in {
        # random weights in OLMo's shape; read with GPT-2's tokenizer, so at least its rows
        "olmo2-tiny": dict(context_length=64, emb_dim=32, n_heads=4, n_layers=2, ff_dim=64,
                           norm_eps=1e-6, rope_base=500000.0),
        "olmo3-tiny": dict(context_length=64, emb_dim=32, n_heads=4, n_kv_groups=2, n_layers=4,
                           ff_dim=64, norm_eps=1e-6, rope_base=500000.0, sliding_window=16,
                           sliding_layers=(0, 1, 2)),
        # OLMo-2-0425-1B's shape (its own vocabulary has 100,352 tokens)
        "olmo2-1b": dict(vocab_size=100352, context_length=4096, emb_dim=2048, n_heads=16,
                         n_layers=16, ff_dim=8192, norm_eps=1e-6, rope_base=500000.0),
    }.items()},
    beside=("llama-tiny", "tiny"),
    block_title=lambda p: "OLMo",
)
