"""The Llama / Qwen block as the book's bonus chapters build it from GPT-2's (Llama 2,
Llama 3.2, Qwen3; Qwen2.5 by its switches): RMSNorm for LayerNorm, rotary positions
inside attention for learned ones, a SwiGLU feed-forward for GELU's, grouped-query
attention, no dropout, no biases. Every node in forward order, attention opened, and its
roles; hook names are module paths inside ``LlamaModel`` (llama.py), with the book's
names. The rest of the app asks nodes.py, which holds every family."""

from __future__ import annotations

from .family import PARENT_INPUT, BlockFamily
from .node_types import HistRange, Node

_WIDE = HistRange(-20.0, 20.0, 100)


def _att(key: str, label: str, description: str, kind: str, width: str, *inputs: str,
         needs: str | None = None) -> Node:
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
         needs="qk_norm"),
    _att("att.k_norm", "k_norm", "Qwen3: each key head's head_dim values RMS-normalised, "
         "with a learned weight, before the rotation.", "rmsnorm", "kv_head", "att.keys",
         needs="qk_norm"),
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

LLAMA = BlockFamily(
    name="llama", title="Llama / Qwen", orders={"pre": _BLOCK},
    attention_inside=ATTENTION_INSIDE, before=MODEL_NODES_BEFORE, after=MODEL_NODES_AFTER,
    embeddings="tok_emb",
    shortcuts={"pre": {"add1": "input", "add2": "add1"}},
    branches={"add1": "att", "add2": "ff"},
    residuals={"pre": ("add1", "add2")},
    roles={"activation_input": "ff.fc1", "activation_output": "ff.product",
           "activation": "ff.silu",
           "last_linear": "ff.fc3", "up": "ff.fc2", "head_queries": "att.queries_rope",
           "head_keys": "att.keys_repeated", "head_values": "att.values_repeated",
           "keys_rope": "att.keys_rope", "q_norm": "att.q_norm", "k_norm": "att.k_norm"},
)
