"""GPT-2's block as the book's chapter 4 builds it, as one family record: every node of
its graph in forward order for each norm position (Pre-LN, GPT-2's; Post-LN, the 2017
Transformer's), the steps of attention opened and its roles; and its model (core/gpt/
model.py), how its parameters are counted, the files it is read from (weights/keymaps.py)
and its words. Forward order is the order in which the nodes' outputs are produced, so a
node inside another (the attention pattern inside attention, the feed-forward's layers
inside it) comes before the node that contains it. A node's hook name is its module path
inside ``GPTModel`` (``trf_blocks.{layer}.{key}`` for block nodes)."""

from __future__ import annotations

from dataclasses import replace

from .. import placements
from ..counts import ParameterCounts, Row
from ..family import (BlockFamily, Classes, Counting, Files, ModelCode, NormPosition, Role,
                      Words)
from ..node_types import HistRange, Kind, Node

_WIDE = HistRange(-20.0, 20.0, 100)  # Linear 2's output and what carries it on
_SMALL = HistRange(-1.0, 1.0, 100)  # the embeddings' sum and its dropout


_NORM1 = Node("norm1", "LayerNorm 1", "Layer normalisation of the block's input, before "
              "attention (Pre-LN): each token vector rescaled to mean 0, variance 1, then "
              "scale and shift.", "norm", "emb")
_NORM2 = Node("norm2", "LayerNorm 2", "Layer normalisation of the first add's output, before "
              "the feed-forward block (Pre-LN).", "norm", "emb")
_ATT = Node("att", "Multi-head attention", "Causal self-attention on LayerNorm 1's output: "
            "each token mixes in value vectors of earlier tokens, weighted per head, then "
            "out_proj.", "attention", "emb")
_PATTERN = Node("att.attn_weights", "Attention pattern", "attn_weights = softmax(masked "
                "scores / √head_dim), then dropout: per head, row = query token, column = "
                "key token; rows sum to 1.",
                "pattern", "ctx", parent="att", inputs=("att.masked_scores",))


def _in_att(key: str, label: str, description: str, kind: str, width: str,
            *inputs: str) -> Node:
    return Node(key, label, description, kind, width, parent="att", inputs=inputs)


# Attention opened, in the order the book's MultiHeadAttention.forward computes it. No
# inputs: the node reads the attention's input (LayerNorm 1's output in Pre-LN).
ATTENTION_INSIDE = (
    _in_att("att.W_key", "W_key", "keys = W_key(x): each token's input times the key "
            "matrix, (b, T, d_out): what the token offers to the queries that look for it.",
            "linear", "emb"),
    _in_att("att.W_query", "W_query", "queries = W_query(x): each token's input times the "
            "query matrix, (b, T, d_out): what the token looks for in earlier tokens.",
            "linear", "emb"),
    _in_att("att.W_value", "W_value", "values = W_value(x): each token's input times the "
            "value matrix, (b, T, d_out): what the token passes on to those that attend to it.",
            "linear", "emb"),
    _in_att("att.keys", "Keys per head", "The keys split into heads: view (b, T, n_heads, "
            "head_dim), then transpose(1, 2) to (b, n_heads, T, head_dim).", "heads", "head",
            "att.W_key"),
    _in_att("att.queries", "Queries per head", "The queries split into heads: (b, n_heads, T, "
            "head_dim); each head compares its own head_dim values.", "heads", "head",
            "att.W_query"),
    _in_att("att.values", "Values per head", "The values split into heads: (b, n_heads, T, "
            "head_dim).", "heads", "head", "att.W_value"),
    _in_att("att.attn_scores", "Scores Q·Kᵀ", "attn_scores = queries @ keys.transpose(2, 3): "
            "one dot product per query token (row) and key token (column), per head.",
            "scores", "ctx", "att.queries", "att.keys"),
    _in_att("att.masked_scores", "Causal mask", "attn_scores.masked_fill(mask_bool, -inf): "
            "every key after its query set to −inf, so that softmax gives it weight 0.",
            "mask", "ctx", "att.attn_scores"),
    _PATTERN,
    _in_att("att.context", "Weights · V", "attn_weights @ values: each query's mix of the "
            "values of the keys it sees, weighted, per head: (b, n_heads, T, head_dim).",
            "context", "head", "att.attn_weights", "att.values"),
    _in_att("att.context_vec", "Heads joined", "context_vec: the heads side by side again, "
            "transpose(1, 2) then view: (b, T, d_out).", "heads", "emb", "att.context"),
    _in_att("att.out_proj", "out_proj", "The output projection, Linear d_out → emb_dim: "
            "mixes what the heads found; its output is the attention's output.", "linear",
            "emb", "att.context_vec"),
)


_DROP1 = Node("drop1", "Dropout", "drop_shortcut, the first of its two uses: dropout on the "
              "attention output (identity in eval mode; zeroes a share drop_rate and "
              "rescales the rest in training).", "dropout", "emb", same_in_eval="att")
_ADD1 = Node("add1", "Add (shortcut)", "Residual add: attention branch + the shortcut, the "
             "block's input.", "add", "emb")
_FF0 = Node("ff.layers.0", "Linear 1", "First feed-forward Linear: widens each "
            "token from emb_dim to 4 x emb_dim values.", "linear", "hidden", parent="ff")
_GELU = Node("ff.layers.1", "GELU", "GELU non-linearity (tanh approximation): smooth, "
             "passes positives, squashes negatives towards a small dip.", "gelu", "hidden",
             parent="ff")
_FF2 = Node("ff.layers.2", "Linear 2", "Second feed-forward Linear: back from "
            "4 x emb_dim to emb_dim values.", "linear", "emb", parent="ff",
            hist_range=_WIDE)
_FF = Node("ff", "Feed-forward", "Position-wise MLP: Linear, GELU, Linear; the embedding "
           "size comes out unchanged.", "ffn", "emb", same_in_eval="ff.layers.2")
_DROP2 = Node("drop2", "Dropout", "drop_shortcut, the second of its two uses: dropout on "
              "the feed-forward output.", "dropout", "emb", same_in_eval="ff",
              hist_range=_WIDE)
_ADD2 = Node("add2", "Add (shortcut)", "Residual add: feed-forward branch + the shortcut, the "
             "first add's output (add1): the block's output (Pre-LN).", "add", "emb")
_POST = {  # Post-LN words: the norms come after the adds, so the neighbours differ
    "norm1": Node("norm1", "LayerNorm 1", "Layer normalisation of the first add's output, "
                  "after attention (Post-LN).", "norm", "emb"),
    "norm2": Node("norm2", "LayerNorm 2", "Layer normalisation of the second add's output "
                  "(Post-LN): the block's output.", "norm", "emb"),
    "att": replace(_ATT, description="Causal self-attention on the block's input (Post-LN: "
                   "no norm before it): each token mixes in value vectors of earlier tokens, "
                   "weighted per head, then out_proj."),
    "add2": replace(_ADD2, description="Residual add: feed-forward branch + the shortcut, "
                    "LayerNorm 1's output (norm1), not the first add's (Post-LN)."),
}

_PRE = (_NORM1, _PATTERN, _ATT, _DROP1, _ADD1, _NORM2, _FF0, _GELU, _FF2, _FF, _DROP2, _ADD2)
_POST_ORDER = (_PATTERN, _POST["att"], _DROP1, _ADD1, _POST["norm1"], _FF0, _GELU, _FF2, _FF,
               _DROP2, _POST["add2"], _POST["norm2"])
# every other norm position made from Pre-LN's parts (core/gpt/placements.py)
_BLOCK_ORDER = placements.orders(_PRE, placements.Parts(
    "LayerNorm", Kind.NORM, _PATTERN, _ATT, _DROP1, _ADD1, (_FF0, _GELU, _FF2), _FF, _DROP2,
    _ADD2), post=_POST_ORDER)

MODEL_NODES_BEFORE = (
    Node("tok_emb", "Token embedding", "Looks up one emb_dim vector per token id.",
         "embedding", "emb"),
    Node("pos_emb", "Position embedding", "One learned emb_dim vector per position 0..T-1.",
         "embedding", "emb", batched=False),
    Node("emb_add", "Embedding sum", "Token embedding + position embedding.", "add", "emb",
         hist_range=_SMALL),
    Node("drop_emb", "Embedding dropout", "Dropout on the embeddings (identity in eval "
         "mode): the residual stream entering block 1.", "dropout", "emb",
         same_in_eval="emb_add", hist_range=_SMALL),
)
MODEL_NODES_AFTER = (
    Node("final_norm", "Final LayerNorm", "Layer normalisation after the last block.",
         "norm", "emb"),
    Node("out_head", "Output head", "Linear emb_dim -> vocabulary: one logit per token "
         "of the vocabulary.", "logits", "vocab"),
)


# ---------------------------------------------------------------------- the model

def _new(cfg):
    from ..model import GPTModel
    return GPTModel(cfg)


def _initialise(model, seed: int = 0, should_stop=None):
    from ..model import init_weights
    return init_weights(model, seed, should_stop)


def _classes() -> Classes:
    from ..layers import FeedForward, MultiHeadAttention
    from ..model import FORWARDS, GPTModel, TransformerBlock
    return Classes(GPTModel, TransformerBlock, MultiHeadAttention, FeedForward, FORWARDS,
                   attention_forward="book_forward")


def _count(cfg) -> ParameterCounts:
    c, v, L = cfg.emb_dim, cfg.vocab_size, cfg.n_layers
    return ParameterCounts(
        embeddings=v * c + cfg.context_length * c,
        attention=L * (3 * (c * c + (c if cfg.qkv_bias else 0)) + c * c + c),
        feed_forward=L * (c * cfg.hidden_dim + cfg.hidden_dim + cfg.hidden_dim * c + c),
        # each norm a scale and a shift (a DyT also its α); Peri-LN has four, parallel one
        norms=(len(cfg.family.norm_keys(cfg.norm_position)) * L + 1)
        * (2 * c + (cfg.norm_position == NormPosition.DYT)),
        head=0 if cfg.tie_weights else v * c,
        names=("embeddings (tok_emb + pos_emb)", "attention (W_query/W_key/W_value/out_proj)",
               "feed-forward (ff.layers.0/2)",
               f"{_norms_word(cfg)} ({'/'.join(cfg.family.norm_keys(cfg.norm_position))}"
               "/final_norm)"),
    )


def _norms_word(cfg) -> str:
    return "DyTs" if cfg.norm_position == NormPosition.DYT else "layer norms"


def _rows(cfg, counts: ParameterCounts) -> tuple[Row, ...]:
    L = cfg.n_layers
    return (
        Row("token embedding (tok_emb)", cfg.vocab_size * cfg.emb_dim, None),
        Row("position embedding (pos_emb)", cfg.context_length * cfg.emb_dim, None),
        Row("attention (W_query, W_key, W_value, out_proj)", counts.attention, counts.attention // L),
        Row("feed-forward (ff.layers.0, ff.layers.2)", counts.feed_forward, counts.feed_forward // L),
        Row(f"{_norms_word(cfg)} ({', '.join(cfg.family.norm_keys(cfg.norm_position))}, "
            "final_norm)", counts.norms,
            (counts.norms - counts.norms // (len(cfg.family.norm_keys(cfg.norm_position)) * L + 1))
            // L),
    )


# ---------------------------------------------------------------------- its words

def _norm_way(cfg) -> str:
    if cfg.norm_position == NormPosition.DYT:
        return (f"none: DyT, γ · tanh(α · x) + β value by value (2 × {cfg.emb_dim:,} + 1 "
                "weights), where Pre-LN has its norms")
    return (f"LayerNorm: (x − mean) / √(var + 1e-5) × scale + shift (2 × {cfg.emb_dim:,} "
            f"weights), {cfg.norm_position.explained}")


WAYS = {
    "normalisation": _norm_way,
    "positions": lambda cfg: (f"learned position embedding pos_emb ({cfg.context_length:,} × "
                              f"{cfg.emb_dim:,}), added to the token embedding once, before block 0"),
    "feed-forward": lambda cfg: (f"GELU MLP: layers.2(GELU(layers.0·x)), {cfg.emb_dim:,} → "
                                 f"{cfg.hidden_dim:,} → {cfg.emb_dim:,}, two matrices"),
    "non-linearity": lambda cfg: "GELU(x) ≈ x·Φ(x)",
    "dropout": lambda cfg: (f"rate {cfg.drop_rate:g} after attention, the feed-forward and the "
                            "embeddings (off when not training)"),
}

WORDS = Words(
    ways=WAYS,
    feed_forward="ff(x) = Linear 2(GELU(Linear 1(x))): Linear 2's output",
    code_notes={
        "model": "{key} is built once in GPTModel.__init__ and used in GPTModel.forward, "
                 "around the loop over the transformer blocks.",
        "attention step": "{attr} is a step of MultiHeadAttention.forward as the book writes "
                          "it; a HookPoint computes nothing, it names the tensor.",
        "attention": "Long prompts and generation get the same numbers from fast_forward (the "
                     "KV cache, the fused kernel when nothing inside is watched).",
        "feed-forward": "{key} is element {index} of the nn.Sequential: the Sequential runs "
                        "its layers in the order they are listed.",
    },
    size_note=lambda cfg: "" if cfg.norm_position == NormPosition.PRE else f" · {cfg.norm_position.title}",
)

GPT2 = BlockFamily(
    name="gpt2", title="GPT-2", orders=_BLOCK_ORDER, attention_inside=ATTENTION_INSIDE,
    before=MODEL_NODES_BEFORE, after=MODEL_NODES_AFTER, embeddings="drop_emb",
    shortcuts=placements.shortcuts(_BLOCK_ORDER), branches=placements.branches(_BLOCK_ORDER),
    residuals=placements.residuals(_BLOCK_ORDER),
    after_by_position={NormPosition.DYT: (placements.final_dyt(MODEL_NODES_AFTER[0]),
                                          *MODEL_NODES_AFTER[1:])},
    roles={Role.ACTIVATION_INPUT: "ff.layers.0", Role.ACTIVATION_OUTPUT: "ff.layers.1",
           Role.ACTIVATION: "ff.layers.1", Role.LAST_LINEAR: "ff.layers.2",
           Role.POSITION_EMBEDDING: "pos_emb", Role.EMBEDDING_SUM: "emb_add",
           Role.FIRST_DROPOUT: "drop1", Role.HEAD_QUERIES: "att.queries",
           Role.HEAD_KEYS: "att.keys", Role.HEAD_VALUES: "att.values",
           Role.SCORED_QUERIES: "att.W_query", Role.SCORED_KEYS: "att.W_key",
           Role.MIXED_VALUES: "att.W_value"},
    model=ModelCode(_new, _initialise, _classes),
    counting=Counting(_count, _rows, ff_matrices=2, ff_biases=True),
    files=Files(model_types=("gpt2",), key_maps="explorer.core.weights.keymaps",
                own_tokenizer=False, hf_name=lambda model_type: "GPT-2" if model_type else "GPT",
                hf_keys=("n_head",)),
    words=WORDS,
    attention_grids=((("att.W_query", "att.W_key", "att.W_value"),
                      ("att.queries", "att.keys", "att.values"),
                      ("att.attn_scores", "att.masked_scores", "att.attn_weights"),
                      ("att.out_proj", "att.context_vec", "att.context")),),
    presets={
        "gpt2-small": dict(emb_dim=768, n_layers=12, n_heads=12),  # 124M
        "gpt2-medium": dict(emb_dim=1024, n_layers=24, n_heads=16),  # 355M
        "gpt2-large": dict(emb_dim=1280, n_layers=36, n_heads=20),  # 774M
        "gpt2-xl": dict(emb_dim=1600, n_layers=48, n_heads=25),  # 1558M
        # for training on a CPU in minutes (about 11.5M parameters, most in the embedding)
        "mini": dict(context_length=128, emb_dim=192, n_heads=6, n_layers=4),
        # about 1.7M parameters: for tests and quick experiments
        "tiny": dict(context_length=64, emb_dim=32, n_heads=4, n_layers=2),
    },
    beside=("llama-tiny", "qwen3-tiny", "smollm2-135m", "qwen3-0.6b", "llama3.2-1b"),
    block_title=lambda position: position.title,
)
