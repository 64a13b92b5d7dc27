"""Gemma 3's text block (Google's open models; the book's ch05/12_gemma3), as one family
record: the Llama / Qwen block's classes (core/gpt/llama.py) with a norm on both sides of
each sublayer (Peri-LN: Hugging Face's ``input_layernorm``, ``post_attention_layernorm``,
``pre_feedforward_layernorm``, ``post_feedforward_layernorm``), every RMSNorm's gain
stored around 0 and used as 1 + w, the token embeddings multiplied by √emb_dim, a GeGLU
feed-forward (GELU with the tanh approximation as the gate), query and key norms per
head, the scores scaled by 1/√query_pre_attn_scalar, and five sliding-window layers in
every six, each kind with its own RoPE base. Every node in forward order, attention
opened, the files it is read from (weights/gemma_keys.py) and its words."""

from __future__ import annotations

from dataclasses import replace

from .. import placements
from ..family import Files, Gate, NormPosition, Role, Variant
from ..mutations import SHORTCUTS
from ..node_types import Kind, Node
from ..variant import sliding_problems
from . import llama

PERI = NormPosition.PERI
GAIN = " Its weight is stored around 0 and used as 1 + w (a stored 0 means × 1)."

_FF = {n.key: n for n in llama.PARTS.ff_layers}
_FF_LAYERS = (
    replace(_FF["ff.fc1"], description=_FF["ff.fc1"].description.replace("SiLU", "GELU (tanh)")),
    _FF["ff.fc2"],
    Node("ff.gelu", "GELU (tanh)", "gelu(fc1, approximate=\"tanh\") = 0.5 · x · (1 + tanh("
         "√(2/π) · (x + 0.044715 · x³))): the gate, smooth, near 0 for negative inputs.",
         Kind.GELU, "hidden", parent="ff", inputs=("ff.fc1",)),
    replace(_FF["ff.product"], label="GELU(fc1) ⊙ fc2", inputs=("ff.gelu", "ff.fc2"),
            description="The gated product, value by value: GELU of the gate times fc2's "
                        "values (the GLU in GeGLU)."),
    _FF["ff.fc3"],
)
_FF_NODE = replace(llama.PARTS.ff, label="GeGLU feed-forward",
                   description="fc3(gelu(fc1(x)) ⊙ fc2(x)): SwiGLU's three matrices with GELU "
                               "(tanh approximation) as the gate.")


def _gain(node: Node) -> Node:
    """A norm's words with Gemma's 1 + w."""
    return replace(node, description=node.description + GAIN) if node.kind == Kind.RMSNORM else node


_ORDERS = {PERI: tuple(_gain(n) for n in placements.peri(replace(
    llama.PARTS, ff_layers=_FF_LAYERS, ff=_FF_NODE)))}

_ATTENTION = {
    "att.q_norm": dict(description="Gemma 3: each query head's head_dim values RMS-normalised, "
                       "with a learned weight, before the rotation." + GAIN),
    "att.k_norm": dict(description="Gemma 3: each key head's head_dim values RMS-normalised, "
                       "with a learned weight, before the rotation." + GAIN),
    "att.masked_scores": dict(description="attn_scores.masked_fill(mask, -inf): every key after "
                              "its query set to −inf; in a sliding layer (five in every six) "
                              "also every key sliding_window or more positions back."),
    "att.attn_weights": dict(description="attn_weights = softmax(masked scores / "
                             "√query_pre_attn_scalar): per head, row = query token, column = "
                             "key token; rows sum to 1."),
}
ATTENTION_INSIDE = tuple(replace(n, **_ATTENTION.get(n.key, {})) for n in llama.ATTENTION_INSIDE)

BEFORE = (
    replace(llama.MODEL_NODES_BEFORE[0], description="Looks up one emb_dim vector per token "
            "id; no position is added (RoPE rotates queries and keys inside attention)."),
    Node("emb_scaled", "× √emb_dim", "The token embeddings multiplied by √emb_dim (in the "
         "weights' dtype), as Gemma scales them before the first block.", Kind.SCALE, "emb"),
)
AFTER = (_gain(llama.MODEL_NODES_AFTER[0]), llama.MODEL_NODES_AFTER[1])


def _classes():
    """The Llama / Qwen block's classes with Gemma's feed-forward; Peri-LN's forward."""
    from ..gated import GeGLUFeedForward
    return replace(llama.LLAMA.model.classes(), feed_forward=GeGLUFeedForward,
                   block_forwards={PERI: "forward_peri"})


def _problems(cfg) -> list[str]:
    problems = llama.config_problems(cfg) + sliding_problems(cfg)
    if cfg.qk_norm is not True:
        problems.append("a Gemma 3 block normalises its queries and keys (qk_norm true)")
    return problems


WORDS = replace(
    llama.WORDS,
    what={**llama.WORDS.what,
          Kind.FFN: "The GeGLU feed-forward: fc1 and fc2 each widen every token from {c} to "
                    "{hidden} values, GELU (tanh approximation) of fc1's values gates fc2's, and "
                    "fc3 narrows the product back to {c}.",
          Kind.PRODUCT: "The gate at work: GELU(fc1·x) times fc2·x, value by value ({hidden} of "
                        "them); fc3 then brings them back to {c}.",
          Kind.RMSNORM: "Divides each token vector by its root mean square (√(mean(x²) + eps)), "
                        "then multiplies by (1 + w): Gemma stores the gain around 0. No mean "
                        "is subtracted and nothing is shifted."},
    mistake={**llama.WORDS.mistake,
             Kind.RMSNORM: "A stored weight of 0 is not a gain of 0: Gemma multiplies by "
                           "1 + w, so 0 means × 1."},
    feed_forward="ff(x) = fc3(gelu(fc1(x)) ⊙ fc2(x)): fc3's output",
    name=lambda cfg: "Gemma 3",
    size_note=lambda cfg: " · Gemma block, Peri-LN" + (
        f", sliding window {cfg.sliding_window:,}" if cfg.sliding_layers else ""),
    ways={**llama.WORDS.ways,
          "normalisation": lambda cfg: (
              f"RMSNorm before and after each sublayer (Peri-LN), x / √(mean(x²) + "
              f"{cfg.norm_eps:g}) × (1 + w); queries and keys normalised per head"),
          "feed-forward": lambda cfg: (f"GeGLU: fc3(GELU(fc1·x) ⊙ fc2·x), {cfg.emb_dim:,} → "
                                       f"{cfg.hidden_dim:,} → {cfg.emb_dim:,}, three matrices"),
          "non-linearity": lambda cfg: "GELU (tanh approximation), as a gate"},
)

_SLIDING_5_OF_6 = tuple(i for i in range(18) if i % 6 != 5)  # Gemma 3 270M's layers

GEMMA3 = replace(
    llama.LLAMA, name="gemma3", title="Gemma 3", orders=_ORDERS,
    attention_inside=ATTENTION_INSIDE, before=BEFORE, after=AFTER, embeddings="emb_scaled",
    shortcuts=placements.shortcuts(_ORDERS), branches=placements.branches(_ORDERS),
    residuals=placements.residuals(_ORDERS), after_by_position={},
    roles={**llama.LLAMA.roles, Role.ACTIVATION: "ff.gelu", Role.EMBEDDING_SCALE: "emb_scaled"},
    model=replace(llama.LLAMA.model, classes=_classes, variant=Variant(
        gain_offset=True, embedding_scale=True, gate=Gate.GELU_TANH)),
    files=Files(model_types=("gemma3_text",), key_maps="explorer.core.weights.gemma_keys",
                own_tokenizer=True, hf_name=lambda kind: "Gemma 3"),
    words=WORDS,
    config_fields=llama.CONFIG_FIELDS | {"sliding_window", "sliding_layers", "rope_local_base",
                                         "attn_scalar"},
    config_problems=_problems, mutations=SHORTCUTS,
    presets={name: dict(drop_rate=0.0, qkv_bias=False, qk_norm=True, norm_position=PERI,
                        norm_eps=1e-6, rope_base=1e6, rope_local_base=10000.0) | fields
             for name, fields in {
        # random weights in Gemma 3's shape; read with GPT-2's tokenizer, so at least its rows
        "gemma3-tiny": dict(context_length=64, emb_dim=32, n_heads=4, n_kv_groups=1,
                            head_size=16, n_layers=3, ff_dim=64, sliding_window=16,
                            sliding_layers=(0, 1), attn_scalar=16),
        # gemma-3-270m's shape (its own vocabulary has 262,144 tokens)
        "gemma3-270m": dict(vocab_size=262144, context_length=32768, emb_dim=640, n_heads=4,
                            n_kv_groups=1, head_size=256, n_layers=18, ff_dim=2048,
                            sliding_window=512, sliding_layers=_SLIDING_5_OF_6, attn_scalar=256),
    }.items()},
    beside=("llama-tiny", "tiny"),
    block_title=lambda p: "Gemma 3",
)
