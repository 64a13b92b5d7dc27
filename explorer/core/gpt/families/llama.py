"""The Llama / Qwen block as the book's bonus chapters build it from GPT-2's (Llama 2,
Llama 3.2, Qwen3; Qwen2.5 by its switches), as one family record: RMSNorm for
LayerNorm, rotary positions inside attention for learned ones, a SwiGLU feed-forward for
GELU's, grouped-query attention, no dropout, no biases. Every node in forward order,
attention opened, and its roles; hook names are module paths inside ``LlamaModel``
(core/gpt/llama.py), with the book's names; how its parameters are counted, its config's
own fields and their checks, the files it is read from (weights/llama_keys.py) and its
words where its block differs from GPT-2's."""

from __future__ import annotations

from .. import placements
from ..counts import ParameterCounts, Row
from ..family import (PARENT_INPUT, AttentionFormulas, BlockFamily, Classes, Counting, Files,
                      ModelCode, NormPosition, QKSpan, Role, Switch, Words)
from ..mutations import SHORTCUTS, Mutation
from ..node_types import HistRange, Kind, Node
from ..rope_scaling import RopeScaling

_WIDE = HistRange(-20.0, 20.0, 100)


def _att(key: str, label: str, description: str, kind: str, width: str, *inputs: str,
         needs: Switch | None = None) -> Node:
    return Node(key, label, description, kind, width, parent="att", inputs=inputs, needs=needs)


def _ff(key: str, label: str, description: str, kind: str, width: str, *inputs: str,
        hist_range: HistRange | None = None) -> Node:
    return Node(key, label, description, kind, width, parent="ff", inputs=inputs,
                hist_range=hist_range)


_NORM1 = Node("norm1", "RMSNorm 1", "Root-mean-square normalisation of the block's input, "
              "before attention: each token vector divided by √(mean(x²) + eps), then times "
              "a learned weight; no mean subtracted, no shift.", "rmsnorm", "emb")
_NORM2 = Node("norm2", "RMSNorm 2", "Root-mean-square normalisation of the first add's "
              "output, before the feed-forward block.", "rmsnorm", "emb")
_PATTERN = Node("att.attn_weights", "Attention pattern", "attn_weights = softmax(masked "
                "scores / √head_dim): per head, row = query token, column = key token; rows "
                "sum to 1 (no dropout).", "pattern", "ctx", parent="att",
                inputs=("att.masked_scores",))
_ATT = Node("att", "Attention (GQA)", "Grouped-query attention: causal self-attention on RMSNorm 1's output, "
            "positions given by rotating queries and keys (RoPE); groups of query heads share "
            "one key/value head; then out_proj.", "attention", "emb")

# Attention opened, in the order the book's GroupedQueryAttention.forward computes it.
ATTENTION_INSIDE = (
    _att("att.W_query", "W_query", "queries = W_query(x): (b, T, n_heads · head_dim): what "
         "each token looks for in earlier tokens.", "linear", "q"),
    _att("att.W_key", "W_key", "keys = W_key(x): (b, T, n_kv_groups · head_dim), fewer "
         "values than the queries when key/value heads are shared.", "linear", "kv"),
    _att("att.W_value", "W_value", "values = W_value(x): (b, T, n_kv_groups · head_dim): what "
         "each token passes on.", "linear", "kv"),
    _att("att.queries", "Queries per head", "The queries split into heads: view then "
         "transpose to (b, n_heads, T, head_dim).", "heads", "head", "att.W_query"),
    _att("att.keys", "Keys per head", "The keys split into their heads: (b, n_kv_groups, T, "
         "head_dim).", "heads", "kv_head", "att.W_key"),
    _att("att.values", "Values per head", "The values split into their heads: (b, "
         "n_kv_groups, T, head_dim).", "heads", "kv_head", "att.W_value"),
    _att("att.q_norm", "q_norm", "Qwen3: each query head's head_dim values RMS-normalised, "
         "with a learned weight, before the rotation.", "rmsnorm", "head", "att.queries",
         needs=Switch.QK_NORM),
    _att("att.k_norm", "k_norm", "Qwen3: each key head's head_dim values RMS-normalised, "
         "with a learned weight, before the rotation.", "rmsnorm", "kv_head", "att.keys",
         needs=Switch.QK_NORM),
    _att("att.queries_rope", "RoPE queries", "apply_rope(queries, cos, sin): each pair of "
         "values (i, i + head_dim/2) rotated by the angle position · θᵢ; no position is "
         "added anywhere else.", "rope", "head", "att.q_norm"),
    _att("att.keys_rope", "RoPE keys", "apply_rope(keys, cos, sin): the keys rotated by "
         "their own positions, so a score depends on how far apart two tokens are.", "rope",
         "kv_head", "att.k_norm"),
    _att("att.keys_repeated", "Keys shared", "keys.repeat_interleave(group_size, dim=1): "
         "each key head repeated for the query heads of its group: (b, n_heads, T, head_dim).",
         "heads", "head", "att.keys_rope"),
    _att("att.values_repeated", "Values shared", "values.repeat_interleave(group_size, "
         "dim=1): each value head repeated for its group's query heads.", "heads", "head",
         "att.values"),
    _att("att.attn_scores", "Scores Q·Kᵀ", "attn_scores = queries @ keys.transpose(2, 3): "
         "one dot product per query token (row) and key token (column), per head.",
         "scores", "ctx", "att.queries_rope", "att.keys_repeated"),
    _att("att.masked_scores", "Causal mask", "attn_scores.masked_fill(mask, -inf): every key "
         "after its query set to −inf, so that softmax gives it weight 0.", "mask", "ctx",
         "att.attn_scores"),
    _PATTERN,
    _att("att.context", "Weights · V", "attn_weights @ values: each query's mix of the values "
         "of the keys it sees, per head: (b, n_heads, T, head_dim).", "context", "head",
         "att.attn_weights", "att.values_repeated"),
    _att("att.context_vec", "Heads joined", "context_vec: the heads side by side again, "
         "transpose(1, 2) then reshape: (b, T, n_heads · head_dim).", "heads", "q",
         "att.context"),
    _att("att.out_proj", "out_proj", "The output projection, Linear n_heads · head_dim → "
         "emb_dim (no bias): mixes what the heads found; the attention's output.", "linear",
         "emb", "att.context_vec"),
)

_BLOCK = (
    _NORM1, _PATTERN, _ATT,
    Node("add1", "Add (shortcut)", "Residual add: attention's output + the shortcut, the "
         "block's input (no dropout).", "add", "emb"),
    _NORM2,
    _ff("ff.fc1", "fc1 (gate)", "fc1 = Linear emb_dim → hidden_dim, no bias: the gate, "
        "which SiLU reads.", "linear", "hidden"),
    _ff("ff.fc2", "fc2 (up)", "fc2 = Linear emb_dim → hidden_dim, no bias, on the same "
        "input as fc1: the values the gate lets through.", "linear", "hidden", PARENT_INPUT),
    _ff("ff.silu", "SiLU", "silu(fc1) = fc1 · σ(fc1): smooth, near 0 for negative gates, "
        "near the identity for positive ones.", "silu", "hidden", "ff.fc1"),
    _ff("ff.product", "SiLU(fc1) ⊙ fc2", "The gated product, value by value: SiLU of the gate "
        "times fc2's values (the GLU in SwiGLU).", "product", "hidden", "ff.silu", "ff.fc2"),
    _ff("ff.fc3", "fc3 (down)", "fc3 = Linear hidden_dim → emb_dim, no bias: back to the "
        "embedding size; the feed-forward's output.", "linear", "emb", "ff.product",
        hist_range=_WIDE),
    Node("ff", "SwiGLU feed-forward", "fc3(silu(fc1(x)) ⊙ fc2(x)): three matrices, the width "
         "inside set by the config (not 4 × emb_dim).", "ffn", "emb", same_in_eval="ff.fc3",
         hist_range=_WIDE),
    Node("add2", "Add (shortcut)", "Residual add: the feed-forward's output + the shortcut, "
         "the first add's output (add1): the block's output.", "add", "emb"),
)


_BY_KEY = {n.key: n for n in _BLOCK}
_FF_LAYERS = tuple(n for n in _BLOCK if n.parent == "ff")
# the block's parts, which the placements rearrange (and the families built with this
# block's classes, OLMo's and Gemma's, take)
PARTS = placements.Parts("RMSNorm", Kind.RMSNORM, _PATTERN, _ATT, None, _BY_KEY["add1"],
                         _FF_LAYERS, _BY_KEY["ff"], None, _BY_KEY["add2"])
# every norm position made from Pre-LN's parts (core/gpt/placements.py)
_ORDERS = placements.orders(_BLOCK, PARTS)

MODEL_NODES_BEFORE = (
    Node("tok_emb", "Token embedding", "Looks up one emb_dim vector per token id; no "
         "position is added here (RoPE rotates queries and keys inside attention).",
         "embedding", "emb"),
)
MODEL_NODES_AFTER = (
    Node("final_norm", "Final RMSNorm", "RMS normalisation after the last block.",
         "rmsnorm", "emb"),
    Node("out_head", "Output head", "Linear emb_dim -> vocabulary (no bias): one logit per "
         "token of the vocabulary.", "logits", "vocab"),
)


# ---------------------------------------------------------------------- the model

def _new(cfg):
    from ..llama import LlamaModel
    return LlamaModel(cfg)


def _initialise(model, seed: int = 0, should_stop=None):
    from ..llama import init_llama_weights
    return init_llama_weights(model, seed, should_stop)


def _classes() -> Classes:
    from .. import llama
    return Classes(llama.LlamaModel, llama.TransformerBlock, llama.GroupedQueryAttention,
                   llama.FeedForward, llama.FORWARDS, attention_forward="forward",
                   attention_scored="_scored")


CONFIG_FIELDS = frozenset(("n_kv_groups", "head_size", "ff_dim", "rope_base", "rope_scaling",
                           "qk_norm", "norm_eps"))
MAX_WIDTH = 1 << 17  # head_size, ff_dim and n_kv_groups beyond it: a damaged file


def config_problems(cfg) -> list[str]:
    """What a config's Llama fields get wrong, in words (the common fields are the
    config's own to check)."""
    problems = []
    for name in ("n_kv_groups", "head_size", "ff_dim"):
        value = getattr(cfg, name)
        if value is not None and (isinstance(value, bool) or not isinstance(value, int)
                                  or not 0 < value <= MAX_WIDTH):
            problems.append(f"{name} must be a positive integer, got {value!r}")
    kv, heads = cfg.n_kv_groups, cfg.n_heads
    if isinstance(kv, int) and not isinstance(kv, bool) and kv > 0 and isinstance(heads, int) \
            and heads > 0 and heads % kv:
        problems.append(f"n_heads ({heads}) must be a multiple of n_kv_groups ({kv})")
    for name, low, high in (("rope_base", 1.0, 1e12), ("norm_eps", 0.0, 1.0)):
        value = getattr(cfg, name)
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not low < value < high:
            problems.append(f"{name} must be a number in ({low:g}, {high:g}), got {value!r}")
    if cfg.rope_scaling is not None and not isinstance(cfg.rope_scaling, RopeScaling):
        problems.append(f"rope_scaling must be a RopeScaling, got {cfg.rope_scaling!r}")
    if not isinstance(cfg.qk_norm, bool):
        problems.append(f"qk_norm must be true or false, got {cfg.qk_norm!r}")
    return problems


def _count(cfg) -> ParameterCounts:
    c, v, L = cfg.emb_dim, cfg.vocab_size, cfg.n_layers
    q, kv = cfg.n_heads * cfg.head_dim, cfg.kv_heads * cfg.head_dim
    bias = (q + 2 * kv) if cfg.qkv_bias else 0
    whole = cfg.family.model.variant.qk_span == QKSpan.PROJECTION  # OLMo's span the projection
    qk_norms = ((q + kv) if whole else 2 * cfg.head_dim) if cfg.qk_norm else 0
    per_norm = 2 * c + 1 if cfg.norm_position == NormPosition.DYT else c  # DyT: γ, β and α
    return ParameterCounts(
        embeddings=v * c,
        attention=L * (c * q + 2 * c * kv + bias + q * c + qk_norms),
        feed_forward=L * 3 * c * cfg.hidden_dim,
        norms=(_block_norms(cfg) * L + 1) * per_norm,
        head=0 if cfg.tie_weights else v * c,
        names=("embeddings (tok_emb)", "attention (W_query/W_key/W_value/out_proj)",
               "feed-forward (ff.fc1/fc2/fc3)",
               f"{_norm_word(cfg)}s ({'/'.join(_norm_keys(cfg))}/final_norm)"),
    )


def _block_norms(cfg) -> int:
    """The norms in one block of the config's placement (Peri-LN four, parallel one)."""
    return len(_norm_keys(cfg))


def _rows(cfg, counts: ParameterCounts) -> tuple[Row, ...]:
    """No position embedding: RoPE rotates queries and keys inside attention."""
    L = cfg.n_layers
    return (
        Row("token embedding (tok_emb)", counts.embeddings, None),
        Row("attention (W_query, W_key, W_value, out_proj"
            + (", q_norm, k_norm)" if cfg.qk_norm else ")"), counts.attention, counts.attention // L),
        Row("feed-forward (ff.fc1, ff.fc2, ff.fc3)", counts.feed_forward, counts.feed_forward // L),
        Row(f"{_norm_word(cfg)}s ({', '.join(_norm_keys(cfg))}, final_norm)", counts.norms,
            (counts.norms - counts.norms // (_block_norms(cfg) * L + 1)) // L),
    )


def _norm_word(cfg) -> str:
    return "DyT" if cfg.norm_position == NormPosition.DYT else "RMSNorm"


def _norm_keys(cfg) -> list[str]:
    return cfg.family.norm_keys(cfg.norm_position)


# ---------------------------------------------------------------------- its words

WHAT = {
    Kind.FFN: "The SwiGLU feed-forward: fc1 and fc2 each widen every token from {c} to "
              "{hidden} values, SiLU of fc1's values gates fc2's, and fc3 narrows the product "
              "back to {c}. Three matrices instead of two, so {hidden} is about two thirds of "
              "what 4 × {c} would be for the same parameters.",
    Kind.ATTENTION: "Lets each token look at the tokens before it: queries meet keys (both "
                    "rotated by their positions) to give weights, and each token receives a "
                    "weighted mix of the values; {heads} query heads of {head_dim} values "
                    "share {kv_heads} key/value heads ({groups}). Each token so keeps "
                    "{kv_values} values a block in the KV cache, against {mha_values} with a "
                    "key and value head per query head. out_proj then combines the heads.",
    Kind.LINEAR: "A learned matrix multiplication applied to every token separately (no bias "
                 "here): each output value is a weighted score of all the token's input "
                 "values, one set of weights per output value.",
    Kind.EMBEDDING: "Turns each token id into a vector of {c} learned numbers: a table lookup "
                    "({vocab} rows). No position is added: RoPE rotates queries and keys "
                    "inside attention instead.",
}
MISTAKE = {
    Kind.FFN: "The inner width is not 4 × emb_dim: it is the config's hidden_dim ({hidden}), "
              "and the block has three matrices, not two. Its forward does nothing special "
              "to keep {c} values a token: the shapes come from the Linear layers' sizes.",
    Kind.ATTENTION: "Fewer key/value heads ({kv_heads}) than query heads ({heads}) does not "
                    "mean fewer query heads: each group of query heads shares one key and one "
                    "value head (grouped-query attention).",
    Kind.EMBEDDING: "There is no position embedding to add here: positions enter only "
                    "through RoPE, inside attention.",
    Kind.HEADS: "Keys and values may have fewer heads than queries: they are repeated "
                "(repeat_interleave) to the {heads} query heads, not copied from other tokens.",
}
WAYS = {
    "normalisation": lambda cfg: (f"RMSNorm: x / √(mean(x²) + {cfg.norm_eps:g}) × scale "
                                  f"({cfg.emb_dim:,} weights); no mean subtracted, no shift"),
    "positions": lambda cfg: (f"RoPE: queries and keys rotated by position × θᵢ, θᵢ = "
                              f"{cfg.rope_base:g}^(−2i/{cfg.head_dim})" +
                              (f" ({cfg.rope_scaling.words(cfg.rope_base, cfg.head_dim)})"
                               if cfg.rope_scaling is not None else "") +
                              "; no weights, a score depends on the distance only"),
    "feed-forward": lambda cfg: (f"SwiGLU: fc3(SiLU(fc1·x) ⊙ fc2·x), {cfg.emb_dim:,} → "
                                 f"{cfg.hidden_dim:,} → {cfg.emb_dim:,}, three matrices"),
    "non-linearity": lambda cfg: "SiLU(x) = x·σ(x), as a gate",
    "dropout": lambda cfg: "none",
}
def _lacks(mutation: str) -> str:
    """What this block lacks for one of GPT-2's exercises, in words."""
    if mutation in (Mutation.RELU, Mutation.NO_ACTIVATION):
        return "GELU (its SwiGLU gates with SiLU)"
    if mutation in (Mutation.UNBIASED_LN, Mutation.EPS, Mutation.NO_NORM2):
        return "LayerNorm (its norms are RMSNorms)"
    if mutation == Mutation.POST_LN:
        return "Post-LN twin (its norms come first)"
    if mutation == Mutation.DROPOUT_ON:
        return "dropout"
    return "Linear 1 / Linear 2 (its feed-forward is fc1, fc2, fc3)"


WORDS = Words(
    what=WHAT, mistake=MISTAKE, ways=WAYS,
    feed_forward="ff(x) = fc3(silu(fc1(x)) ⊙ fc2(x)): fc3's output",
    code_notes={
        "model": "{key} is built once in LlamaModel.__init__ and used in its forward, around "
                 "the loop over the blocks; no position embedding is added.",
        "attention step": "{attr} is a step of GroupedQueryAttention as the bonus chapters "
                          "write it; a HookPoint computes nothing, it names the tensor.",
        "attention": "Without a hook on the scores or the pattern the same numbers come from "
                     "the fused kernel.",
        "feed-forward": "{attr}: fc1 and fc2 read the same input; SiLU gates fc1's values, the "
                        "product multiplies them into fc2's, fc3 brings them back.",
        "block": "__init__ builds att, ff and the norms its norm position has; {method} runs "
                 "them: {runs}, with no dropout.",
    },
    lacks=_lacks,
    name=lambda cfg: "Qwen3" if cfg.qk_norm else "Qwen2" if cfg.qkv_bias else "Llama",
    size_note=lambda cfg: f" · {WORDS.name(cfg)} block" + (
        "" if cfg.norm_position == NormPosition.PRE else f" · {cfg.norm_position.title}"),
)
_QKV = ("att.W_query", "att.W_key", "att.W_value")
_SPLIT = ("att.queries", "att.keys", "att.values")
_SCORED = ("att.attn_scores", "att.masked_scores", "att.attn_weights")
_MIXED = ("att.out_proj", "att.context_vec", "att.context")

LLAMA = BlockFamily(
    name="llama", title="Llama / Qwen", orders=_ORDERS,
    attention_inside=ATTENTION_INSIDE, before=MODEL_NODES_BEFORE, after=MODEL_NODES_AFTER,
    embeddings="tok_emb",
    shortcuts=placements.shortcuts(_ORDERS), branches=placements.branches(_ORDERS),
    residuals=placements.residuals(_ORDERS),
    after_by_position={NormPosition.DYT: (placements.final_dyt(MODEL_NODES_AFTER[0]),
                                          *MODEL_NODES_AFTER[1:])},
    roles={Role.ACTIVATION_INPUT: "ff.fc1", Role.ACTIVATION_OUTPUT: "ff.product",
           Role.ACTIVATION: "ff.silu", Role.LAST_LINEAR: "ff.fc3", Role.UP: "ff.fc2",
           Role.HEAD_QUERIES: "att.queries_rope", Role.HEAD_KEYS: "att.keys_repeated",
           Role.HEAD_VALUES: "att.values_repeated", Role.KEYS_ROPE: "att.keys_rope",
           Role.QUERIES_ROPE: "att.queries_rope", Role.KEYS_SHARED: "att.keys_repeated",
           Role.VALUES_SHARED: "att.values_repeated",
           Role.Q_NORM: "att.q_norm", Role.K_NORM: "att.k_norm",
           Role.SCORED_QUERIES: "att.queries_rope", Role.SCORED_KEYS: "att.keys_repeated",
           Role.MIXED_VALUES: "att.values_repeated"},
    model=ModelCode(_new, _initialise, _classes),
    counting=Counting(_count, _rows, ff_matrices=3, ff_biases=False),
    files=Files(model_types=("llama", "qwen2", "qwen3"),
                key_maps="explorer.core.weights.llama_keys", own_tokenizer=True,
                hf_name=lambda kind: {"llama": "Llama", "qwen2": "Qwen2",
                                      "qwen3": "Qwen3"}.get(kind, "Llama-family")),
    words=WORDS,
    # Qwen3's norms share a row with the values shared per group, and its shared keys
    # then sit beside the rotated keys; without them, six rows of their own
    attention_grids=((_QKV, _SPLIT, ("att.q_norm", "att.k_norm", "att.values_repeated"),
                      ("att.queries_rope", "att.keys_rope", "att.keys_repeated"), _SCORED, _MIXED),
                     (_QKV, _SPLIT, ("att.queries_rope", "att.keys_rope", "att.values_repeated"),
                      (None, "att.keys_repeated", None), _SCORED, _MIXED)),
    config_fields=CONFIG_FIELDS, config_problems=config_problems,
    centred_norm=False, dropout=False, mutations=SHORTCUTS,
    presets={name: dict(drop_rate=0.0, qkv_bias=False) | fields for name, fields in {
        # random weights shaped like the models people run; a preset reads with GPT-2's
        # tokenizer, so its vocabulary has at least GPT-2's 50,257 rows
        "llama-tiny": dict(context_length=64, emb_dim=32, n_heads=4, n_kv_groups=2, n_layers=2,
                           ff_dim=64),
        # mini's twin, to train here on the same text: the same width, blocks and heads (6
        # query heads sharing 2 key/value heads), SwiGLU at 8/3 × emb_dim
        "llama-mini": dict(context_length=128, emb_dim=192, n_heads=6, n_kv_groups=2,
                           n_layers=4, ff_dim=512),
        "qwen3-tiny": dict(context_length=64, emb_dim=32, n_heads=4, n_kv_groups=2, n_layers=2,
                           ff_dim=64, head_size=16, qk_norm=True, norm_eps=1e-6, rope_base=1e6),
        # SmolLM2-135M's shape (its own vocabulary has 49,152 tokens)
        "smollm2-135m": dict(context_length=8192, emb_dim=576, n_heads=9, n_kv_groups=3,
                             n_layers=30, ff_dim=1536, rope_base=100000.0),
        "llama3.2-1b": dict(vocab_size=128256, context_length=131072, emb_dim=2048, n_heads=32,
                            n_kv_groups=8, n_layers=16, ff_dim=8192, rope_base=500000.0,
                            rope_scaling=RopeScaling(32.0, 1.0, 4.0, 8192)),
        "qwen2.5-0.5b": dict(vocab_size=151936, context_length=32768, emb_dim=896, n_heads=14,
                             n_kv_groups=2, n_layers=24, ff_dim=4864, rope_base=1e6,
                             qkv_bias=True, norm_eps=1e-6),
        "qwen3-0.6b": dict(vocab_size=151936, context_length=40960, emb_dim=1024, n_heads=16,
                           n_kv_groups=8, head_size=128, n_layers=28, ff_dim=3072,
                           rope_base=1e6, qk_norm=True, norm_eps=1e-6),
    }.items()},
    beside=("tiny", "mini", "gpt2-small", "gpt2-medium"),
    attention_formulas=AttentionFormulas.FROM_INPUT,
    block_title=lambda p: "Llama / Qwen" + ("" if p == NormPosition.PRE else f" · {p.title}"),
)
