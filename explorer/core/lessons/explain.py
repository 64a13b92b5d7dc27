"""Explanations with live numbers: for a node of a captured pass, what the node does in
plain words, what it did here (with the numbers of this prompt), and the common mistake
about it. Works on numpy views only; owns no tensors and no UI."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..gpt.nodes import (Width, CONTEXT_JOINED, EMBEDDING_SUM, KEYS_SHARED, VALUES_SHARED, Kind,
                         as_order, input_node, layer_of, model_input_node, node_for_hook,
                         residual_branches)
from ..gpt.tokenizer import gpt2_tokenizer
from .kinds import KIND_LESSONS

# Texts with {names}: filled in from the loaded config (``numbers``), never fixed. Each
# kind's own are its record's (kinds.py); these are the nodes whose kind's text does not
# fit them (the embedding sum is an add without a branch or a shortcut).
WHAT_BY_KEY = {
    CONTEXT_JOINED: "Joins the heads again: each token's {heads} context vectors of "
                    "{head_dim} values side by side ({c} values), ready for out_proj.",
    EMBEDDING_SUM: "Adds each token's embedding and its position's embedding, value by value "
               "({c} values each): the residual stream starts here. There is no branch and "
               "no shortcut yet; the blocks add theirs to this sum.",
    KEYS_SHARED: "Copies each of the {kv_heads} key heads for every query head of its group "
                 "({groups}): {heads} heads of {head_dim} values, the same keys read by "
                 "several query heads. Nothing is split and no number changes.",
    VALUES_SHARED: "Copies each of the {kv_heads} value heads for every query head of its "
                   "group ({groups}): {heads} heads of {head_dim} values, the same values "
                   "mixed by several query heads. Nothing is split and no number changes.",
}
MISTAKE_BY_KEY = {
    CONTEXT_JOINED: "Joining is not mixing: each head's values sit in their own slice; "
                    "out_proj, the next step, is what mixes the heads.",
    EMBEDDING_SUM: "The two embeddings are added, not concatenated: the width stays {c}; the "
               "position embedding is the same for every prompt at that position.",
    KEYS_SHARED: "Sharing is a copy, not a split: query heads of one group read identical keys, "
                 "and the KV cache keeps only the {kv_heads} key heads, not {heads}.",
    VALUES_SHARED: "Sharing is a copy, not a split: query heads of one group mix identical "
                   "values, and the KV cache keeps only the {kv_heads} value heads, not {heads}.",
}

def numbers(cfg=None) -> dict[str, str]:
    """The values the texts name, from a GPTConfig (symbolic names without one)."""
    if cfg is None:
        return {"c": "emb_dim", "hidden": "hidden_dim", "vocab": "vocab_size",
                "ctx": "context_length", "heads": "n_heads", "head_dim": "head_dim",
                "drop": "drop_rate", "kv_heads": "n_kv_groups", "half": "head_dim / 2",
                "groups": "each key/value head read by n_heads / n_kv_groups query heads",
                "kv_values": "2 × n_kv_groups × head_dim", "mha_values": "2 × n_heads × head_dim",
                "experts": "n_experts", "k": "experts_per_token", "base": "base",
                "scaling": ""}
    g = cfg.n_heads // cfg.kv_heads
    return {"c": f"{cfg.emb_dim:,}", "hidden": f"{cfg.hidden_dim:,}",
            "vocab": f"{cfg.vocab_size:,}", "ctx": f"{cfg.context_length:,}",
            "heads": str(cfg.n_heads), "head_dim": str(cfg.head_dim),
            "drop": f"{cfg.drop_rate:g}", "kv_heads": str(cfg.kv_heads),
            "half": str(cfg.head_dim // 2), "groups": _groups(cfg.kv_heads, g),
            "kv_values": f"{2 * cfg.kv_heads * cfg.head_dim:,}",
            "mha_values": f"{2 * cfg.n_heads * cfg.head_dim:,}",
            "experts": str(cfg.n_experts or 0), "k": str(cfg.experts_per_token or 0),
            "base": f"{cfg.rope_base:g}", "scaling": _scaling(cfg)}


def _scaling(cfg) -> str:
    """What the model's rotary frequency scaling does to θ, as a clause ("" without)."""
    scaling = getattr(cfg, "rope_scaling", None)
    return f" ({scaling.words(cfg.rope_base, cfg.head_dim)})" if scaling is not None else ""


def _groups(kv: int, g: int) -> str:
    """Which query heads read which key/value head: 'query heads 0–2 read key/value head
    0, 3–5 head 1, …'."""
    if g == 1:
        return "each query head with a key/value head of its own"
    spans = [f"{k * g}–{k * g + g - 1}" for k in range(kv)]
    shown = spans[:3] + (["…"] if kv > 3 else [])
    return f"query heads {shown[0]} read key/value head 0" + "".join(
        f", {s} head {k + 1}" if s != "…" else ", …" for k, s in enumerate(shown[1:]))


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
    """What the node read, when the pass has it: a block's node's input, or for a node
    after the blocks (the final norm) the node before it (the last block's output)."""
    if layer_of(name) is not None:
        source = input_node(name, norm_position)
    else:
        layers = [layer_of(n) for n in views]
        source = model_input_node(name, norm_position,
                                  max((l for l in layers if l is not None), default=-1) + 1)
    return source if source in views else None


def explain(name: str, views: dict, pieces: list[str], position: int | None = None,
            norm_position: str = "pre", cfg=None, tokenizer=None) -> Explanation:
    """Explain ``name`` using the captured ``views`` of one pass (prompt pieces given);
    ``cfg`` (the loaded GPTConfig) fills in the texts' numbers, ``tokenizer`` (the
    model's) names tokens: with a model's config it must be given (GPT-2's would name
    another vocabulary's tokens); without one, the texts are GPT-2's."""
    if cfg is not None and tokenizer is None:
        raise TypeError("explain: a model's config comes with its tokenizer")
    node = node_for_hook(name, norm_position)
    view = views.get(name)
    values = numbers(cfg)
    words = as_order(norm_position).family.words  # its family's, where its block differs
    lesson = KIND_LESSONS[node.kind]
    what = WHAT_BY_KEY.get(node.key, words.what.get(node.kind, lesson.what))
    what = what.format(**values) + " " + node.description
    mistake = MISTAKE_BY_KEY.get(node.key, words.mistake.get(node.kind, lesson.mistake))
    mistake = mistake.format(**values)
    if view is None:
        return Explanation(name, what, "Run a prompt to see what it did here.", mistake)
    s = view.stats
    pos = _position(node, view, position)
    unbounded = s.n_inf + s.n_nan  # left out of the statistics: said, with why
    left_out = "" if not unbounded else (
        f" — over its {s.count - unbounded:,} finite values; its {s.n_inf:,} −inf (the "
        "masked scores) are left out" if node.kind == Kind.MASK and not s.n_nan else
        f" — over its {s.count - unbounded:,} finite values; {s.n_inf:,} infinite and "
        f"{s.n_nan:,} NaN left out")
    parts = [f"Here its output has shape {view.shape}: mean {s.mean:.3g}, std {s.std:.3g}, "
             f"largest |value| {s.absmax:.3g}{left_out}."]
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
    if node.kind == Kind.LINEAR and seen is not None:
        if seen.shape[-1] == width:  # a square projection (W_query, out_proj…)
            return [f"It kept each token at {width} values, each a new mix of all {width}."]
        verb = "widened" if seen.shape[-1] < width else "narrowed"
        return [f"It {verb} each token from {seen.shape[-1]} to {width} values."]
    if node.kind == Kind.GELU and seen is not None and seen.array is not None:
        rows_in = seen.real_rows()  # a batch's padding left out
        x = rows_in.reshape(-1)
        return [f"{100 * float((x < 0).mean()):.0f}% of its inputs (the {rows_in.shape[0]} "
                f"tokens × {rows_in.shape[1]:,} = {x.size:,} values) were negative and came "
                "out between -0.17 and 0."]
    if node.kind == Kind.ADD:
        return _add_sentence(name, node, array, views, token, pos, width, norm_position)
    if node.kind == Kind.DROPOUT:
        same_as = node.same_in_eval and name[: -len(node.key)] + node.same_in_eval
        if same_as in views and views[same_as].array is not None:
            same = np.array_equal(views[same_as].array, array)
            return ["It changed nothing here (eval mode)." if same else
                    f"It zeroed {100 * s.frac_zero:.0f}% of the values (training mode)."]
    if node.kind == Kind.LOGITS:
        top = int(np.argmax(np.asarray(array).reshape(-1, width)[pos]))
        return [f"At token {token} the highest score is for {tokenizer.token_piece(top)!r} (id {top})."]
    if node.width == Width.CTX:  # scores, masked scores, weights: (B, H, queries, keys)
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
    if node.kind != Kind.PATTERN:
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
