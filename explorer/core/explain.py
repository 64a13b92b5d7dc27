"""Explanations with live numbers: for a node of a captured pass, what the node does in
plain words, what it did here (with the numbers of this prompt), and the common mistake
about it. Works on numpy views only; owns no tensors and no UI."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .nodes import (EMBEDDINGS, block_hook_name, block_nodes, layer_of, node_for_hook,
                    residual_branches)

WHAT = {
    "embedding": "Turns each token id (or each position) into a vector of learned numbers. "
                 "Nothing is computed yet: it is a table lookup.",
    "norm": "Rescales every token's vector on its own: subtract its mean, divide by its "
            "standard deviation, then apply a learned scale and shift per dimension.",
    "attention": "Lets each token look at the tokens before it: queries meet keys to give "
                 "weights, and each token receives a weighted mix of the values, one mix per "
                 "head; out_proj then combines the heads.",
    "pattern": "The attention weights themselves: for every head, how much each token (row) "
               "takes from each earlier token (column). Each row sums to 1.",
    "dropout": "During training, zeroes a random share of the values and scales the rest up "
               "so the expected value stays the same; when the model is used, it does nothing.",
    "add": "The residual connection: adds the block's branch to the shortcut — the vector "
           "that skipped the branch — so information and gradients can pass around it.",
    "linear": "A learned matrix multiplication applied to every token separately.",
    "gelu": "A smooth non-linearity: passes positive values almost unchanged, squashes "
            "negative ones towards zero with a small dip near -0.75.",
    "ffn": "The feed-forward block: widen each token to 4x the embedding size, apply GELU, "
           "and narrow it back. It works on each token on its own.",
    "logits": "Scores every token of the vocabulary as the next token; softmax turns the "
              "scores into probabilities.",
}

MISTAKE = {
    "embedding": "The position embedding is added, not concatenated: the width stays emb_dim.",
    "norm": "LayerNorm normalises each token over its own features, not over the batch "
            "(that is BatchNorm); it uses the biased variance (divide by n).",
    "attention": "The causal mask makes later tokens invisible to earlier ones; the output "
                 "has the same shape as the input.",
    "pattern": "Rows, not columns, sum to 1; the upper triangle is zero because of the mask.",
    "dropout": "Dropout is not applied when generating (eval mode): seeing values change "
               "here would mean the model was left in training mode.",
    "add": "The shortcut is added, not concatenated: the shape does not change.",
    "linear": "The weight is stored as (out, in) and applied as x @ W.T.",
    "gelu": "GELU is not ReLU: negative inputs give small negative outputs, not zeros.",
    "ffn": "The feed-forward block does not change the embedding size: 768 in, 768 out, "
           "only 3072 inside.",
    "logits": "These are not probabilities yet: softmax is applied afterwards.",
}


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


def _input_of(name: str, views: dict, norm_position: str) -> str | None:
    """The node whose output feeds this one, from the node table: the previous node at the
    same level of the block, or for the block's first node the block's input (the
    previous block's last node, or the embeddings' dropout)."""
    layer = layer_of(name)
    if layer is None:
        return None
    node = node_for_hook(name)
    siblings = [n.key for n in block_nodes(norm_position) if n.parent == node.parent]
    i = siblings.index(node.key)
    if i > 0:
        source = block_hook_name(layer, siblings[i - 1])
    elif node.parent is None:
        source = EMBEDDINGS if layer == 0 else block_hook_name(layer - 1, siblings[-1])
    else:
        return None
    return source if source in views else None


def explain(name: str, views: dict, pieces: list[str], position: int | None = None,
            norm_position: str = "pre") -> Explanation:
    """Explain ``name`` using the captured ``views`` of one pass (prompt pieces given)."""
    node = node_for_hook(name)
    view = views.get(name)
    what = WHAT[node.kind] + " " + node.description
    mistake = MISTAKE[node.kind]
    if view is None:
        return Explanation(name, what, "Run a prompt to see what it did here.", mistake)
    array = view.array
    s = view.stats
    if array is None:
        rows = 1
    elif node.kind == "pattern":
        rows = array.shape[-2]  # (B, H, T, T): positions are the query rows
    else:
        rows = int(np.prod(array.shape[:-1]))
    pos = (rows - 1) if position is None else position
    if position is None and view.valid is not None:  # a batch: the last real token
        real = view.valid[0, 0] if node.kind == "pattern" else view.valid.reshape(-1)
        pos = int(np.flatnonzero(real)[-1]) if real.any() else pos
    width = view.shape[-1]
    parts = [f"Here its output has shape {view.shape}: mean {s.mean:.3g}, std {s.std:.3g}, "
             f"largest |value| {s.absmax:.3g}."]
    if array is not None and node.kind != "pattern":
        token = _piece(pieces, pos)
        if node.kind == "norm":
            source = _input_of(name, views, norm_position)
            if source and views[source].array is not None:
                before = _token_std(views[source].array, pos)
                after = _token_std(array, pos)
                parts.append(f"It brought token {token} from std {before:.3g} to {after:.3g}.")
        elif node.key == "ff.layers.0":
            parts.append(f"It widened each token from {width // 4} to {width} values.")
        elif node.key == "ff.layers.2":
            parts.append(f"It narrowed each token from {width * 4} back to {width} values.")
        elif node.kind == "gelu":
            source = _input_of(name, views, norm_position)
            if source and views[source].array is not None:
                x = views[source].real_rows().reshape(-1)  # a batch's padding left out
                parts.append(f"{100 * float((x < 0).mean()):.0f}% of its inputs were negative and "
                             f"came out between -0.17 and 0.")
        elif node.kind == "add":
            branch_key = residual_branches().get(node.key)
            prefix = name[: -len(node.key)]
            branch = views.get(prefix + branch_key) if branch_key else None
            if branch is not None and branch.array is not None:
                b = np.asarray(branch.array).reshape(-1, width)[pos]
                total = np.asarray(array).reshape(-1, width)[pos]
                shortcut = total - b
                kept = np.linalg.norm(shortcut) / max(np.linalg.norm(total), 1e-12)
                parts.append(f"For token {token} the branch is {np.linalg.norm(b) / max(np.linalg.norm(shortcut), 1e-12):.2g}× "
                             f"the shortcut's size; the shortcut is {100 * kept:.0f}% of the result's norm.")
        elif node.kind == "dropout":
            source = node.same_in_eval and name[: -len(node.key)] + node.same_in_eval
            if source in views and views[source].array is not None:
                same = np.array_equal(views[source].array, array)
                parts.append("It changed nothing here (eval mode)." if same else
                             f"It zeroed {100 * s.frac_zero:.0f}% of the values (training mode).")
        elif node.kind == "logits":
            top = int(np.argmax(np.asarray(array).reshape(-1, width)[pos]))
            parts.append(f"At token {token} the highest score is for token id {top}.")
    if node.kind == "pattern" and array is not None:
        weights = np.asarray(array)[0]  # (H, T, T)
        last = weights[:, pos, :].mean(axis=0)
        j = int(np.argmax(last))
        parts.append(f"Averaged over the heads, token {_piece(pieces, pos)} attends most to "
                     f"{_piece(pieces, j)} (weight {last[j]:.2f}).")
    return Explanation(name, what, " ".join(parts), mistake)
