"""GPT-2's formulas worked with one token's numbers (``KindLesson.formula`` for its
kinds): the embeddings, LayerNorm, GELU, a Linear, the adds, attention and its steps, the
logits, and a node that is another's tensor in eval mode (dropout, the feed-forward)."""

from __future__ import annotations

import math

import numpy as np

from ..gpt.nodes import (ATTENTION, BLOCK_INPUT, CONTEXT, CONTEXT_JOINED,
                         EMBEDDING_SUM, FINAL_NORM, SPLIT_KEYS, SPLIT_QUERIES, SPLIT_VALUES, Kind, MASKED_SCORES,
                         POSITION_EMBEDDING, SCORES, TOKEN_EMBEDDING, block_hook_name,
                         block_input, eval_source, input_node, residual_branches,
                         shortcut_sources)
from ..gpt.tokenizer import tokenizer_of
from .formulas_common import SHOWN, Ask, Worked, norm_input, _f, _p, _row, _rows, key_row


def eval_copy(ask: Ask) -> Worked:
    """Dropout, or the feed-forward: in eval mode another node's tensor, unchanged."""
    name, key, views, pos = ask.name, ask.key, ask.views, ask.pos
    source = eval_source(name, ask.order)
    value = _row(views, source, pos)
    said = ask.model.cfg.family.words.feed_forward  # "ff(x) = …: its last Linear's output"
    return Worked(name, f"{key}(x) = x  (eval mode: dropout does nothing)"
                  if ask.node.kind == Kind.DROPOUT else said,
                  [f"{ask.where}: the output is {source}'s, value for value: "
                   + ", ".join(_f(v) for v in value[:SHOWN]) + " …"], value, ask.captured)


def embedding(ask: Ask) -> Worked:
    """A row of the token or position table, or their sum."""
    model, name, key, views, ids, pos, where, captured = (
        ask.model, ask.name, ask.key, ask.views, ask.ids, ask.pos, ask.where, ask.captured)
    if key != EMBEDDING_SUM:
        table = model.tok_emb.weight if key == TOKEN_EMBEDDING else model.pos_emb.weight
        index = ids[pos] if key == TOKEN_EMBEDDING else pos
        value = _p(table[index])
        return Worked(name, f"{key}[{'token id' if key == TOKEN_EMBEDDING else 'position'}] (a row of the "
                      f"({table.shape[0]}, {table.shape[1]}) table)",
                      [f"{where}: row {index} = " + ", ".join(_f(v) for v in value[:SHOWN]) + " …"],
                      value, captured)
    # emb_add: the sum of the two rows
    tok, posv = _row(views, TOKEN_EMBEDDING, pos), _row(views, POSITION_EMBEDDING, pos)
    value = tok + posv
    return Worked(name, "x = tok_emb[token id] + pos_emb[position]",
                  [f"{where}, feature {i}: {_f(tok[i])} + {_f(posv[i])} = {_f(value[i])}"
                   for i in range(SHOWN)], value, captured)


def gelu(ask: Ask) -> Worked:
    name, views, pos, where, captured, order = (
        ask.name, ask.views, ask.pos, ask.where, ask.captured, ask.order)
    x = _row(views, input_node(name, order), pos)
    c = math.sqrt(2 / math.pi)
    value = 0.5 * x * (1 + np.tanh(c * (x + 0.044715 * x ** 3)))
    return Worked(name, "GELU(x) = 0.5·x·(1 + tanh(√(2/π)·(x + 0.044715·x³)))",
                  [f"{where}, feature {i}: 0.5·{_f(x[i])}·(1 + tanh(0.7979·({_f(x[i])} + "
                   f"0.044715·{_f(x[i])}³))) = {_f(value[i])}" for i in range(SHOWN)],
                  value, captured)


def linear(ask: Ask) -> Worked:
    model, name, views, pos, where, captured, order = (
        ask.model, ask.name, ask.views, ask.pos, ask.where, ask.captured, ask.order)
    module = model.get_submodule(name)
    x = _row(views, input_node(name, order), pos)
    w = _p(module.weight)
    if module.bias is None:  # qkv_bias off, say: no "+ b" that is not there
        value = x @ w.T
        return Worked(name, f"y = x·Wᵀ (no bias)   x ({w.shape[1]}) · Wᵀ ({w.shape[1]}, "
                      f"{w.shape[0]}) → y ({w.shape[0]})",
                      [f"{where}, output {i}: Σ over {w.shape[1]} inputs of x·W[{i}] = "
                       f"{_f(value[i])}" for i in range(SHOWN)], value, captured)
    b = _p(module.bias)
    value = x @ w.T + b
    return Worked(name, f"y = x·Wᵀ + b   x ({w.shape[1]}) · Wᵀ ({w.shape[1]}, {w.shape[0]}) → y "
                  f"({w.shape[0]})",
                  [f"{where}, output {i}: Σ over {w.shape[1]} inputs of x·W[{i}] = "
                   f"{_f(float(x @ w[i]))}, + b[{i}] {_f(float(b[i]))} = {_f(value[i])}"
                   for i in range(SHOWN)], value, captured)


def logits(ask: Ask) -> Worked:
    model, name, views, pos, where, captured = (
        ask.model, ask.name, ask.views, ask.pos, ask.where, ask.captured)
    x = _row(views, FINAL_NORM, pos)
    w = _p(model.out_head.weight)
    value = x @ w.T
    top = int(np.argmax(value))
    tied = model.out_head.weight.data_ptr() == model.tok_emb.weight.data_ptr()
    return Worked(name, "logits = final_norm(x) · W_outᵀ" + (" (W_out is tok_emb: tied)" if tied else ""),
                  [f"{where}: the top logit is {tokenizer_of(model).token_piece(top)!r} (id {top}): "
                   "final-norm vector · "
                   f"row {top} of W_out = {_f(value[top])}"], value, captured)


def layer_norm(ask: Ask) -> Worked:
    name, where, captured = ask.name, ask.where, ask.captured
    module, x = norm_input(ask)
    mean, var = x.mean(), x.var()  # the biased variance: divide by n
    eps = module.eps
    scale, shift = _p(module.scale), _p(module.shift)
    value = (x - mean) / math.sqrt(var + eps) * scale + shift
    spread = math.sqrt(var / (var + eps))  # the normalised values' std, before scale
    lines = [f"{where}: mean {_f(mean)}, biased variance {_f(var)} (over its {x.size} values), "
             f"eps {eps:g}, √(var + eps) {_f(math.sqrt(var + eps))}. eps keeps the division "
             f"finite for a token whose values are all equal (variance 0), and makes the "
             f"normalised values' std √(var / (var + eps)) = "
             + (f"1 − {1 - spread:.2g}, a hair under 1" if f"{spread:.4g}" == "1"
                else f"{spread:.4g}, not quite 1")
             + (" — here eps is larger than the variance, so far below 1" if eps > var else "")]
    lines += [f"feature {i}: ({_f(x[i])} − {_f(mean)}) / {_f(math.sqrt(var + eps))} × {_f(scale[i])} "
              f"+ {_f(shift[i])} = {_f(value[i])}" for i in range(3)]
    return Worked(name, "y = (x − mean) / √(var + eps) · scale + shift", lines, value, captured)


def add(ask: Ask) -> Worked:
    name, views, pos, where, captured, layer, key, order = (
        ask.name, ask.views, ask.pos, ask.where, ask.captured, ask.layer, ask.key, ask.order)
    branch = block_hook_name(layer, residual_branches(order)[key])
    source = shortcut_sources(order)[key]
    shortcut = block_input(layer, order) if source == BLOCK_INPUT else block_hook_name(layer, source)
    b, s = _row(views, branch, pos), _row(views, shortcut, pos)
    value = b + s
    lines = [f"{where}: ‖branch‖ {_f(np.linalg.norm(b))} ({branch}), ‖shortcut‖ "
             f"{_f(np.linalg.norm(s))} ({shortcut}), ‖sum‖ {_f(np.linalg.norm(value))}"]
    lines += [f"feature {i}: {_f(b[i])} + {_f(s[i])} = {_f(value[i])}" for i in range(SHOWN)]
    return Worked(name, "output = branch + shortcut", lines, value, captured)


def attention(ask: Ask) -> Worked:
    model, name, views, pos, head, where, captured, layer, order = (
        ask.model, ask.name, ask.views, ask.pos, ask.head, ask.where, ask.captured, ask.layer,
        ask.order)
    att = model.trf_blocks[layer].att
    x = _rows(views, input_node(block_hook_name(layer, ATTENTION), order), pos)  # (pos+1, C)
    hd = att.head_dim

    def proj(linear):
        w = _p(linear.weight)
        b = _p(linear.bias) if linear.bias is not None else 0.0
        return x @ w.T + b  # (pos+1, C)

    queries, keys, values = proj(att.W_query), proj(att.W_key), proj(att.W_value)
    heads = []
    for h in range(att.num_heads):
        s = slice(h * hd, (h + 1) * hd)
        attn_scores = keys[:, s] @ queries[pos, s]  # (pos+1,) keys ≤ pos: the Scores node's
        scaled = attn_scores / math.sqrt(hd)
        weights = np.exp(scaled - scaled.max())
        weights /= weights.sum()
        heads.append((attn_scores, weights, weights @ values[:, s]))
    scores, weights, _ = heads[head]
    context_vec = np.concatenate([c for _, _, c in heads])
    # attn_scores is the book's name for q·k before the scaling, as on the Scores node
    lines = [f"{where}, head {head} (head_dim {hd}): attn_scores = queries·keysᵀ for the "
             f"{pos + 1} keys up to it (later keys masked to −inf): " + key_row(scores),
             f"attn_scores / √{hd}: " + key_row(scores / math.sqrt(hd)),
             f"attn_weights = softmax(attn_scores / √{hd}): " + key_row(weights)
             + f" (sum over all {pos + 1} keys {_f(weights.sum())})"]
    if ask.node.kind == Kind.PATTERN:
        full = np.zeros(np.asarray(views[name].array).shape[-1])
        full[:pos + 1] = weights
        return Worked(name, "attn_weights = softmax(queries·keysᵀ / √head_dim + mask)", lines,
                      full, captured)
    w, b = _p(att.out_proj.weight), _p(att.out_proj.bias)
    value = context_vec @ w.T + b
    lines.append(f"context_vec = attn_weights · values for each of {att.num_heads} heads, "
                 f"concatenated ({context_vec.size}); out_proj: " +
                 ", ".join(f"{_f(v)}" for v in value[:SHOWN]) + " …")
    return Worked(name, "context_vec = softmax(queries·keysᵀ / √head_dim + mask)·values; "
                  "out_proj(context_vec)", lines, value, captured)


def inside(ask: Ask) -> Worked:
    """A step inside attention for one head and query token, recomputed from the
    attention's captured input and the model's own weights."""
    model, name, key, views, pos, head, where, captured, layer, order = (
        ask.model, ask.name, ask.key, ask.views, ask.pos, ask.head, ask.where, ask.captured,
        ask.layer, ask.order)
    att = model.trf_blocks[layer].att
    x = np.asarray(views[input_node(block_hook_name(layer, ATTENTION), order)].array,
                   dtype=np.float64)[0]  # (T, C): every token, later ones too
    hd = att.head_dim
    s = slice(head * hd, (head + 1) * hd)

    def proj(linear):
        b = _p(linear.bias) if linear.bias is not None else 0.0
        return x @ _p(linear.weight).T + b  # (T, d_out)

    heads = f"{where}, head {head} (head_dim {hd} = {att.d_out} / {att.num_heads} heads)"
    if key == CONTEXT_JOINED:
        value = np.asarray(views[block_hook_name(layer, CONTEXT)].array,
                           dtype=np.float64)[0, :, pos].reshape(-1)
        return Worked(name, "context_vec = context.transpose(1, 2).view(b, T, d_out)",
                      [f"{where}: the {att.num_heads} heads' {hd} values side by side; head 1 "
                       f"starts at value {hd}: " + ", ".join(_f(v) for v in value[hd:hd + SHOWN])
                       + " …"], value, captured)
    linear = {SPLIT_KEYS: att.W_key, SPLIT_QUERIES: att.W_query, SPLIT_VALUES: att.W_value}
    BOOK_NAMES = {SPLIT_KEYS: "keys", SPLIT_QUERIES: "queries", SPLIT_VALUES: "values"}
    if key in linear:
        value = proj(linear[key])[pos, s]
        var = BOOK_NAMES[key]  # the book's variable (queries), not the node's key
        return Worked(name, f"{var} = {var}.view(b, num_tokens, num_heads, head_dim)"
                            ".transpose(1, 2)",
                      [f"{heads}: values {s.start}…{s.stop - 1} of the token's {att.d_out}: "
                       + ", ".join(_f(v) for v in value[:SHOWN]) + " …"], value, captured)
    q, k = proj(att.W_query)[pos, s], proj(att.W_key)[:, s]  # (hd,), (T, hd)
    scores = k @ q  # (T,) every key, later ones too
    n = len(scores)
    if key == SCORES:
        return Worked(name, "attn_scores = queries @ keys.transpose(2, 3)",
                      [f"{heads}: the query · each key (before the mask; later keys too): "
                       + key_row(scores)], scores, captured)
    masked = np.where(np.arange(n) > pos, -np.inf, scores)
    if key == MASKED_SCORES:
        return Worked(name, "attn_scores.masked_fill(mask_bool, -inf)",
                      [f"{heads}: keys 0…{pos} kept, " + (f"keys {pos + 1}…{n - 1} set to −inf: "
                       if pos + 1 < n else "no later key to mask: ") + key_row(masked)],
                      masked, captured)
    weights = np.exp((masked - scores[:pos + 1].max()) / math.sqrt(hd))
    weights /= weights.sum()
    value = weights @ proj(att.W_value)[:n, s]
    return Worked(name, "context = attn_weights @ values",
                  [f"{heads}: weights " + key_row(weights) + f" (sum over all {n} keys "
                   f"{_f(weights.sum())})",
                   "value " + ", ".join(f"{i}: Σ weight·values[:, {i}] = {_f(value[i])}"
                                        for i in range(SHOWN))], value, captured)

