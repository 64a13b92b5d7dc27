"""Explanations with live numbers: for a node of a captured pass, what the node does in
plain words, what it did here (with the numbers of this prompt), and the common mistake
about it. Works on numpy views only; owns no tensors and no UI."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..gpt.nodes import (CONTEXT_JOINED, EMBEDDING_SUM, Kind, input_node, node_for_hook,
                         residual_branches)
from ..gpt.tokenizer import gpt2_tokenizer

# Texts with {names}: filled in from the loaded config (``numbers``), never fixed.
WHAT = {
    "embedding": "Turns each token id (or each position) into a vector of {c} learned numbers. "
                 "Nothing is computed yet: it is a table lookup ({vocab} token rows, {ctx} "
                 "position rows).",
    "norm": "Rescales every token's vector on its own: subtract its mean, divide by its "
            "standard deviation, then apply a learned scale and shift per dimension. Like "
            "marks from subjects graded on different scales, put on one scale before they "
            "are compared: no feature can drown out the others by its size alone.",
    "attention": "Lets each token look at the tokens before it: queries meet keys to give "
                 "weights, and each token receives a weighted mix of the values, one mix per "
                 "head ({heads} heads of {head_dim} values); out_proj then combines the heads.",
    "heads": "Splits each token's {c} values into {heads} heads of {head_dim} (view, then "
             "transpose(1, 2)), so that each head compares tokens on its own {head_dim} "
             "values; no number changes, only where it sits.",
    "scores": "The dot product of every query with every key, per head: how well token "
              "(row) and token (column) match. Large means a strong match; the scores are "
              "raw numbers, not yet weights.",
    "mask": "The causal mask: every score of a key after its query becomes −inf, so that "
            "softmax gives it weight 0 and no token can read the tokens that follow it.",
    "context": "Each query's weighted mix of the value vectors, per head: the attention "
               "weights of its row times the values of the keys ({head_dim} values per head).",
    "pattern": "The attention weights themselves: for every head, how much each token (row) "
               "takes from each earlier token (column). Each row sums to 1.",
    "dropout": "During training, zeroes a random share ({drop}) of the values and scales the "
               "rest up so the expected value stays the same. It keeps the model from leaning "
               "on a few values, against overfitting; when the model is used (eval mode) it "
               "does nothing (the Divergence tab's dropout-on change shows the difference).",
    "add": "The residual connection: adds the block's branch to the shortcut — the vector "
           "that skipped the branch — so information and gradients can pass around it.",
    "linear": "A learned matrix multiplication applied to every token separately: each output "
              "value is a weighted score of all the token's input values (plus a bias), one "
              "set of weights per output value.",
    "gelu": "A smooth non-linearity: passes positive values almost unchanged, squashes "
            "negative ones towards zero with a small dip near -0.75. Without it the two "
            "Linear layers around it would collapse into one linear map (the Divergence "
            "tab's no-activation change shows it with this model's weights).",
    "ffn": "The feed-forward block: widen each token from {c} to {hidden} values, apply GELU, "
           "and narrow it back to {c}. It works on each token on its own.",
    "logits": "Scores every token of the vocabulary ({vocab} of them) as the next token; "
              "softmax turns the scores into probabilities.",
    "rmsnorm": "Rescales every token's vector on its own by its root mean square: divide by "
               "√(mean(x²) + eps), then multiply by a learned weight per dimension. Unlike "
               "LayerNorm it subtracts no mean and adds no shift: cheaper, and the direction "
               "of the vector is kept.",
    "rope": "Rotary position embedding: each pair of a head's values (i and i + {half}) is "
            "rotated by the angle position · θᵢ, θᵢ = base^(−2i/{head_dim}). Queries and keys "
            "are rotated by their own positions, so the score of two tokens depends on how far "
            "apart they are, not on where they stand; nothing is added to the embeddings.",
    "silu": "SiLU (also called swish): x · σ(x). Like GELU it passes positive values almost "
            "unchanged and squashes negative ones towards 0 with a small dip (−0.28 at −1.28); "
            "here it turns fc1's values into a gate.",
    "product": "The gate at work: SiLU(fc1·x) times fc2·x, value by value ({hidden} of them). "
               "Where the gate is near 0 the value is shut off, where it is large the value "
               "passes; fc3 then brings the {hidden} values back to {c}.",
}

# Nodes whose kind's text does not fit them: the embedding sum is an add without a
# branch or a shortcut.
WHAT_BY_KEY = {
    CONTEXT_JOINED: "Joins the heads again: each token's {heads} context vectors of "
                    "{head_dim} values side by side ({c} values), ready for out_proj.",
    EMBEDDING_SUM: "Adds each token's embedding and its position's embedding, value by value "
               "({c} values each): the residual stream starts here. There is no branch and "
               "no shortcut yet; the blocks add theirs to this sum.",
}
MISTAKE_BY_KEY = {
    CONTEXT_JOINED: "Joining is not mixing: each head's values sit in their own slice; "
                    "out_proj, the next step, is what mixes the heads.",
    EMBEDDING_SUM: "The two embeddings are added, not concatenated: the width stays {c}; the "
               "position embedding is the same for every prompt at that position.",
}

MISTAKE = {
    "embedding": "The position embedding is added, not concatenated: the width stays {c}.",
    "norm": "LayerNorm normalises each token over its own {c} features, not over the batch "
            "(that is BatchNorm); it uses the biased variance (divide by n).",
    "attention": "The causal mask makes later tokens invisible to earlier ones; the output "
                 "has the same shape as the input ({c} values per token).",
    "heads": "Heads are not separate copies of the token: the {c} values are divided "
             "among them ({heads} × {head_dim} = {c}), each head gets its own slice.",
    "scores": "The scores are divided by √head_dim (√{head_dim}) only inside the softmax, "
              "after the mask: what is stored here is the plain dot product.",
    "mask": "The mask sets later keys to −inf, not 0: a score of 0 would still get a share "
            "of the weight after softmax.",
    "context": "The mix is over keys (earlier tokens), per head; it is not yet the "
               "attention's output: the heads are joined and go through out_proj first.",
    "pattern": "Rows, not columns, sum to 1; the upper triangle is zero because of the mask.",
    "dropout": "Dropout is not applied when generating (eval mode): seeing values change "
               "here would mean the model was left in training mode.",
    "add": "The shortcut is added, not concatenated: the shape does not change.",
    "linear": "The weight is stored as (out, in) and applied as x @ W.T.",
    "gelu": "GELU is not ReLU: negative inputs give small negative outputs, not zeros.",
    "ffn": "The feed-forward block does not change the embedding size: {c} in, {c} out, "
           "only {hidden} inside.",
    "logits": "These are not probabilities yet: softmax is applied afterwards.",
    "rmsnorm": "RMSNorm is not LayerNorm without eps: it never subtracts the mean, so a "
               "vector whose values are all 5 stays all 1 × weight, not 0; and it has no shift.",
    "rope": "RoPE does not add a position vector: it rotates queries and keys (never the "
            "values), and only their dot products see the positions.",
    "silu": "SiLU is not a 0/1 gate: negative inputs give small negative outputs, and large "
            "ones pass almost unchanged.",
    "product": "The product is value by value (⊙), not a matrix product: fc1 and fc2 each "
               "widen to {hidden}, and the width stays {hidden} until fc3.",
}

# A family's words where its node of a kind differs from GPT-2's (family name, kind).
WHAT_BY_FAMILY = {
    ("llama", "ffn"): "The SwiGLU feed-forward: fc1 and fc2 each widen every token from {c} "
                      "to {hidden} values, SiLU of fc1's values gates fc2's, and fc3 narrows "
                      "the product back to {c}. Three matrices instead of two, so {hidden} is "
                      "about two thirds of what 4 × {c} would be for the same parameters.",
    ("llama", "attention"): "Lets each token look at the tokens before it: queries meet keys "
                            "(both rotated by their positions) to give weights, and each token "
                            "receives a weighted mix of the values; {heads} query heads of "
                            "{head_dim} values share {kv_heads} key/value heads. out_proj then "
                            "combines the heads.",
    ("llama", "linear"): "A learned matrix multiplication applied to every token separately "
                         "(no bias here): each output value is a weighted score of all the "
                         "token's input values, one set of weights per output value.",
    ("llama", "embedding"): "Turns each token id into a vector of {c} learned numbers: a "
                            "table lookup ({vocab} rows). No position is added: RoPE rotates "
                            "queries and keys inside attention instead.",
}
MISTAKE_BY_FAMILY = {
    ("llama", "ffn"): "The inner width is not 4 × emb_dim: it is the config's hidden_dim "
                      "({hidden}), and the block has three matrices, not two.",
    ("llama", "attention"): "Fewer key/value heads ({kv_heads}) than query heads ({heads}) "
                            "does not mean fewer query heads: each group of query heads "
                            "shares one key and one value head (grouped-query attention).",
    ("llama", "embedding"): "There is no position embedding to add here: positions enter "
                            "only through RoPE, inside attention.",
    ("llama", "heads"): "Keys and values may have fewer heads than queries: they are "
                        "repeated (repeat_interleave) to the {heads} query heads, not copied "
                        "from other tokens.",
}


def numbers(cfg=None) -> dict[str, str]:
    """The values the texts name, from a GPTConfig (symbolic names without one)."""
    if cfg is None:
        return {"c": "emb_dim", "hidden": "hidden_dim", "vocab": "vocab_size",
                "ctx": "context_length", "heads": "n_heads", "head_dim": "head_dim",
                "drop": "drop_rate", "kv_heads": "n_kv_groups", "half": "head_dim / 2"}
    return {"c": f"{cfg.emb_dim:,}", "hidden": f"{cfg.hidden_dim:,}",
            "vocab": f"{cfg.vocab_size:,}", "ctx": f"{cfg.context_length:,}",
            "heads": str(cfg.n_heads), "head_dim": str(cfg.head_dim),
            "drop": f"{cfg.drop_rate:g}", "kv_heads": str(cfg.kv_heads),
            "half": str(cfg.head_dim // 2)}


@dataclass(frozen=True)
class Explanation:
    node: str
    what: str
    here: str
    mistake: str


def _piece(pieces: list[str], i: int) -> str:
    return repr(pieces[i]) if 0 <= i < len(pieces) else f"position {i}"


def _token_std(array: np.ndarray, position: int) -> float:
    return float(np.asarray(array).reshape(-1, array.shape[-1])[position].std())


def _token_rms(array: np.ndarray, position: int) -> float:
    row = np.asarray(array, dtype=np.float64).reshape(-1, array.shape[-1])[position]
    return float(np.sqrt((row ** 2).mean()))


def _token_mean(array: np.ndarray, position: int) -> float:
    return float(np.asarray(array).reshape(-1, array.shape[-1])[position].mean())


def _input_of(name: str, views: dict, norm_position: str) -> str | None:
    source = input_node(name, norm_position)
    return source if source in views else None


def explain(name: str, views: dict, pieces: list[str], position: int | None = None,
            norm_position: str = "pre", cfg=None, tokenizer=None) -> Explanation:
    """Explain ``name`` using the captured ``views`` of one pass (prompt pieces given);
    ``cfg`` (the loaded GPTConfig) fills in the texts' numbers, ``tokenizer`` (the
    model's) names tokens."""
    node = node_for_hook(name, norm_position)
    view = views.get(name)
    values = numbers(cfg)
    family = getattr(norm_position, "family", None)
    own = (family.name if family is not None else "gpt2", node.kind)
    what = WHAT_BY_KEY.get(node.key, WHAT_BY_FAMILY.get(own, WHAT[node.kind]))
    what = what.format(**values) + " " + node.description
    mistake = MISTAKE_BY_KEY.get(node.key, MISTAKE_BY_FAMILY.get(own, MISTAKE[node.kind]))
    mistake = mistake.format(**values)
    if view is None:
        return Explanation(name, what, "Run a prompt to see what it did here.", mistake)
    s = view.stats
    pos = _position(node, view, position)
    parts = [f"Here its output has shape {view.shape}: mean {s.mean:.3g}, std {s.std:.3g}, "
             f"largest |value| {s.absmax:.3g}."]
    if view.array is not None:
        parts += _what_it_did(name, node, view, views, pieces, pos, norm_position,
                              tokenizer or gpt2_tokenizer())
    return Explanation(name, what, " ".join(parts), mistake)


def _position(node, view, position: int | None) -> int:
    """The token a sentence speaks of: the one asked for, else the last (real) one."""
    array = view.array
    if array is None:
        rows = 1
    elif node.per_head:
        rows = array.shape[-2]  # (B, H, T, ·): positions are the query rows
    else:
        rows = int(np.prod(array.shape[:-1]))
    pos = (rows - 1) if position is None else position
    if position is None and view.valid is not None:  # a batch: the last real token
        real = view.valid[0, 0] if node.per_head else view.valid.reshape(-1)
        pos = int(np.flatnonzero(real)[-1]) if real.any() else pos
    return pos


def _what_it_did(name: str, node, view, views: dict, pieces: list[str], pos: int,
                 norm_position: str, tokenizer) -> list[str]:
    """One sentence, by the node's kind, with this pass's numbers."""
    array, s, width = view.array, view.stats, view.shape[-1]
    token = _piece(pieces, pos)
    source = _input_of(name, views, norm_position)
    seen = views[source] if source in views else None
    if node.kind == Kind.NORM and seen is not None and seen.array is not None:
        return [f"It brought token {token} from std {_token_std(seen.array, pos):.3g} to "
                f"{_token_std(array, pos):.3g}."]
    if node.kind == Kind.RMSNORM and seen is not None and seen.array is not None \
            and not node.per_head:
        before, after = _token_rms(seen.array, pos), _token_rms(array, pos)
        return [f"It brought token {token} from root mean square {before:.3g} to "
                f"{after:.3g} (before the learned weight, exactly 1); its mean, "
                f"{_token_mean(seen.array, pos):.3g}, was not taken out."]
    if node.kind == Kind.SILU and seen is not None and seen.array is not None:
        x = seen.real_rows().reshape(-1)
        return [f"{100 * float((x < 0).mean()):.0f}% of its inputs ({x.size:,} values) were "
                "negative and came out between -0.28 and 0: those gates are nearly shut."]
    if node.kind == "linear" and seen is not None:
        verb = "widened" if seen.shape[-1] < width else "narrowed"
        return [f"It {verb} each token from {seen.shape[-1]} to {width} values."]
    if node.kind == "gelu" and seen is not None and seen.array is not None:
        rows_in = seen.real_rows()  # a batch's padding left out
        x = rows_in.reshape(-1)
        return [f"{100 * float((x < 0).mean()):.0f}% of its inputs (the {rows_in.shape[0]} "
                f"tokens × {rows_in.shape[1]:,} = {x.size:,} values) were negative and came "
                "out between -0.17 and 0."]
    if node.kind == "add":
        return _add_sentence(name, node, array, views, token, pos, width, norm_position)
    if node.kind == "dropout":
        same_as = node.same_in_eval and name[: -len(node.key)] + node.same_in_eval
        if same_as in views and views[same_as].array is not None:
            same = np.array_equal(views[same_as].array, array)
            return ["It changed nothing here (eval mode)." if same else
                    f"It zeroed {100 * s.frac_zero:.0f}% of the values (training mode)."]
    if node.kind == "logits":
        top = int(np.argmax(np.asarray(array).reshape(-1, width)[pos]))
        return [f"At token {token} the highest score is for {tokenizer.token_piece(top)!r} (id {top})."]
    if node.width == "ctx":  # scores, masked scores, weights: (B, H, queries, keys)
        return _rows_sentence(node, np.asarray(array), pieces, token, pos)
    return []


def _rows_sentence(node, array: np.ndarray, pieces: list[str], token: str, pos: int) -> list[str]:
    """How many query rows meet how many keys (a generated step: its one row, against
    every key the KV cache holds), and for the weights where the row looks most."""
    queries, keys = array.shape[-2:]
    if queries == 1:
        said = (f"This generated step is one query row — its own token — against the {keys} "
                f"keys so far: the prompt's and the tokens generated before, from the KV cache.")
    else:
        said = (f"{queries} query rows × {keys} keys per head; the mask leaves each query the "
                f"keys up to itself, {queries * (queries + 1) // 2} of {queries * keys} scores.")
    if node.kind != "pattern":
        return [said]
    last = array[0][:, min(pos, queries - 1), :].mean(axis=0)  # (H, T, T) -> the row, averaged
    j = int(np.argmax(last))
    return [said, f"Averaged over the heads, token {token} attends most to "
                  f"{_piece(pieces, j)} (weight {last[j]:.2f})."]


def _add_sentence(name: str, node, array, views: dict, token: str, pos: int, width: int,
                  order) -> list[str]:
    branch_key = residual_branches(order).get(node.key)
    branch = views.get(name[: -len(node.key)] + branch_key) if branch_key else None
    if branch is None or branch.array is None:
        return []
    b = np.asarray(branch.array).reshape(-1, width)[pos]
    shortcut = np.asarray(array).reshape(-1, width)[pos] - b
    kept = np.linalg.norm(shortcut) / max(np.linalg.norm(b + shortcut), 1e-12)
    return [f"For token {token} the branch is "
            f"{np.linalg.norm(b) / max(np.linalg.norm(shortcut), 1e-12):.2g}× the shortcut's "
            f"size; the shortcut is {100 * kept:.0f}% of the result's norm."]
