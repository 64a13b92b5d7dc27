"""The Llama family's formulas worked with one token's numbers (formulas.py's, for the
nodes GPT-2's block does not have): RMSNorm, SiLU and the gated product, and every step
of grouped-query attention with RoPE, recomputed in float64 from the captured input and
the model's own weights, as the book's bonus chapters compute them."""

from __future__ import annotations

import math

import numpy as np
import torch

from ..gpt.nodes import (Width, ATTENTION, CONTEXT, CONTEXT_JOINED, SPLIT_KEYS,
                         SPLIT_QUERIES, SPLIT_VALUES, HEADS_MIX, K_NORM, KEYS, KEYS_ROPE, KEYS_SHARED,
                         MASKED_SCORES, PATTERN, Q_NORM, QUERIES, QUERIES_ROPE, SCORES, VALUES,
                         VALUES_SHARED, TOKEN_EMBEDDING, Kind, block_hook_name, input_node, node_for_hook)
from ..gpt.patterns import allowed_keys
from ..gpt.variant import Gate
from .formulas_common import SHOWN, Ask, Worked, norm_input, _f, _p, _row, key_row


def embedding_scale(ask: Ask) -> Worked:
    """Gemma's embedding scale: the token's row times √emb_dim, before the first block."""
    tok = _row(ask.views, TOKEN_EMBEDDING, ask.pos)
    root = float(ask.model.embed_scale)
    return Worked(ask.name, f"x = tok_emb[token id] × √emb_dim (√{tok.size} = {_f(root)})",
                  [f"{ask.where}, feature {i}: {_f(tok[i])} × {_f(root)} = {_f(tok[i] * root)}"
                   for i in range(SHOWN)], tok * root, ask.captured)


def rms_norm(ask: Ask) -> Worked:
    name, where, captured = ask.name, ask.where, ask.captured
    module, x = norm_input(ask)
    eps, offset, w = module.eps, getattr(module, "offset", 0.0), _p(module.scale)
    rms = math.sqrt(float(np.mean(x ** 2)) + eps)
    value = x / rms * (offset + w)
    lines = [f"{where}: mean(x²) {_f(float(np.mean(x ** 2)))} over its {x.size} values, eps "
             f"{eps:g}, √(mean(x²) + eps) {_f(rms)}; its mean {_f(float(x.mean()))} is not "
             "subtracted and nothing is shifted"
             + (f"; the weight w is stored around 0 and used as {offset:g} + w" if offset else "")]
    gain = (lambda i: f"({offset:g} + {_f(w[i])})") if offset else (lambda i: _f(w[i]))
    lines += [f"feature {i}: {_f(x[i])} / {_f(rms)} × {gain(i)} = {_f(value[i])}"
              for i in range(SHOWN)]
    formula = f"({offset:g} + weight)" if offset else "weight"
    return Worked(name, f"y = x / √(mean(x²) + eps) · {formula}", lines, value, captured)


def gate(ask: Ask) -> Worked:
    """SiLU of fc1's values, or the gated product SiLU(fc1) ⊙ fc2 (an expert's too)."""
    name, kind, views, pos, where, captured, order, layer = (
        ask.name, ask.node.kind, ask.views, ask.pos, ask.where, ask.captured, ask.order, ask.layer)
    # the gate is what SiLU reads, the values fc2's: the keys its node names (an expert's
    # own, ``ff.fc1.3``, in a mixture)
    silu_node = ask.node if kind == Kind.SILU else node_for_hook(
        block_hook_name(layer, ask.node.inputs[0]), order)
    gate = _row(views, block_hook_name(layer, silu_node.inputs[0]), pos)
    if ask.model.cfg.family.model.variant.gate == Gate.GELU_TANH:  # Gemma's GeGLU
        return _geglu(ask, gate)
    silu = gate / (1 + np.exp(-gate))
    if kind == Kind.SILU:
        return Worked(name, "silu(x) = x · σ(x) = x / (1 + e^(−x))",
                      [f"{where}, value {i}: {_f(gate[i])} / (1 + e^({_f(-gate[i])})) = "
                       f"{_f(silu[i])}" for i in range(SHOWN)], silu, captured)
    up = _row(views, block_hook_name(layer, ask.node.inputs[1]), pos)
    value = silu * up
    shut = float(np.mean(np.abs(silu) < 0.05))
    lines = [f"{where}: {100 * shut:.0f}% of the {silu.size} gates are within 0.05 of 0 "
             "(those values are shut off)"]
    lines += [f"value {i}: silu({_f(gate[i])}) {_f(silu[i])} × fc2 {_f(up[i])} = {_f(value[i])}"
              for i in range(SHOWN)]
    return Worked(name, "silu(fc1·x) ⊙ (fc2·x)", lines, value, captured)


def _geglu(ask: Ask, gate: np.ndarray) -> Worked:
    """Gemma's gated product: GELU (tanh approximation) of fc1's values ⊙ fc2's."""
    up = _row(ask.views, block_hook_name(ask.layer, ask.node.inputs[1]), ask.pos)
    gelu = 0.5 * gate * (1 + np.tanh(math.sqrt(2 / math.pi) * (gate + 0.044715 * gate ** 3)))
    value = gelu * up
    lines = [f"{ask.where}: {100 * float(np.mean(np.abs(gelu) < 0.05)):.0f}% of the {gelu.size} "
             "gates are within 0.05 of 0 (those values are shut off)"]
    lines += [f"value {i}: gelu({_f(gate[i])}) {_f(gelu[i])} × fc2 {_f(up[i])} = {_f(value[i])}"
              for i in range(SHOWN)]
    return Worked(ask.name, "gelu_tanh(fc1·x) ⊙ (fc2·x)", lines, value, ask.captured)


def _llama_steps(model, layer: int, views: dict, order) -> dict[str, torch.Tensor]:
    """Every step of a Llama-family attention, recomputed in float64 from its captured
    input and the block's own weights, as the book's GroupedQueryAttention computes it."""
    att = model.trf_blocks[layer].att
    x = torch.from_numpy(np.asarray(views[input_node(block_hook_name(layer, ATTENTION), order)].array,
                                    dtype=np.float64)[:1])  # (1, T, C)
    b, t, _ = x.shape
    h, kv, hd = att.num_heads, att.num_kv_groups, att.head_dim

    def lin(m, inputs=x):
        return torch.nn.functional.linear(inputs, m.weight.detach().double(),
                                          None if m.bias is None else m.bias.detach().double())

    def rms(v, module):
        return v / torch.sqrt(v.pow(2).mean(-1, keepdim=True) + module.eps) * module.gain().detach().double()

    steps = {QUERIES: lin(att.W_query), KEYS: lin(att.W_key), VALUES: lin(att.W_value)}
    q, k = steps[QUERIES], steps[KEYS]
    if att.q_norm is not None and att.whole_qk:  # OLMo: the whole projection, then the heads
        q, k = steps[Q_NORM], steps[K_NORM] = rms(q, att.q_norm), rms(k, att.k_norm)
    q = steps[SPLIT_QUERIES] = q.view(b, t, h, hd).transpose(1, 2)
    k = steps[SPLIT_KEYS] = k.view(b, t, kv, hd).transpose(1, 2)
    v = steps[SPLIT_VALUES] = steps[VALUES].view(b, t, kv, hd).transpose(1, 2)
    if att.q_norm is not None and not att.whole_qk:
        q = steps[Q_NORM] = rms(q, att.q_norm)
        k = steps[K_NORM] = rms(k, att.k_norm)
    angles = torch.arange(t, dtype=torch.float64)[:, None] * att.rope.inv_freq.double()[None, :]
    angles = torch.cat([angles, angles], dim=-1)
    cos, sin = torch.cos(angles), torch.sin(angles)
    steps["cos"], steps["sin"] = cos, sin

    def rotate(z):
        return z * cos + torch.cat((-z[..., hd // 2:], z[..., : hd // 2]), dim=-1) * sin

    q = steps[QUERIES_ROPE] = rotate(q)
    k = steps[KEYS_ROPE] = rotate(k)
    k = steps[KEYS_SHARED] = k.repeat_interleave(h // kv, dim=1)
    v = steps[VALUES_SHARED] = v.repeat_interleave(h // kv, dim=1)
    scores = steps[SCORES] = q @ k.transpose(2, 3)
    masked = steps[MASKED_SCORES] = scores.masked_fill(
        ~allowed_keys(t, t, scores.device, att.window), float("-inf"))
    scaled = masked / math.sqrt(hd) if att.scale is None else masked * att.scale
    weights = steps[PATTERN] = torch.softmax(scaled, dim=-1)
    context = steps[CONTEXT] = weights @ v
    joined = steps[CONTEXT_JOINED] = context.transpose(1, 2).reshape(b, t, h * hd)
    steps[ATTENTION] = steps[HEADS_MIX] = lin(att.out_proj, joined)
    return steps


def attention_step(ask: Ask) -> Worked:
    """A step of grouped-query attention with RoPE, at one token (and head)."""
    model, name, key, views, pos, head, index, where, captured, layer, order = (
        ask.model, ask.name, ask.key, ask.views, ask.pos, ask.head, ask.index, ask.where,
        ask.captured, ask.layer, ask.order)
    att = model.trf_blocks[layer].att
    steps = _llama_steps(model, layer, views, order)
    hd, group = att.head_dim, att.num_heads // att.num_kv_groups
    node = ask.node
    tensor = steps[key]
    value = (tensor[0, index, pos] if node.per_head else tensor[0, pos]).numpy()
    heads = (f"{where}, head {head}" + (f" (its key/value head {head // group}: heads "
                                        f"{head // group * group}…{head // group * group + group - 1} "
                                        "share it)" if group > 1 else ""))
    if node.kind == Kind.ROPE:
        theta = att.rope.inv_freq.double().numpy()
        keys = key == KEYS_ROPE
        per_head = Q_NORM in steps and not att.whole_qk  # OLMo's norms come before the split
        before = (K_NORM if per_head else SPLIT_KEYS) if keys else \
            (Q_NORM if per_head else SPLIT_QUERIES)
        source = steps[before][0, index, pos].numpy()
        base, scaling = model.cfg.rope_base_of(layer), model.cfg.rope_scaling
        scaled = f"; {scaling.words(base, hd)}" if scaling is not None else ""
        lines = [f"{heads}: θᵢ = {base:g}^(−2i/{hd}){scaled}: θ₀ = {_f(theta[0])}, θ₁ = "
                 f"{_f(theta[1])}, …; at position {pos} the angle of pair i is {pos}·θᵢ"]
        for i in range(min(SHOWN, hd // 2)):
            a = pos * theta[i]
            lines.append(f"pair ({i}, {i + hd // 2}) at angle {_f(a)}: ({_f(source[i])}, "
                         f"{_f(source[i + hd // 2])}) → ({_f(value[i])}, {_f(value[i + hd // 2])})")
        return Worked(name, "x·cos(pθ) + rotate_half(x)·sin(pθ)", lines, value, captured)
    if node.width == Width.CTX:
        said = {Kind.SCORES: "attn_scores = queries_rope @ keys_repeated.transpose(2, 3)",
                Kind.MASK: "attn_scores.masked_fill(mask, -inf)",
                Kind.PATTERN: "attn_weights = softmax(masked scores / √head_dim)" if att.scale is None
                else f"attn_weights = softmax(masked scores × {att.scale:.4g}, "
                     "1/√query_pre_attn_scalar)"}[node.kind]
        return Worked(name, said,
                      [f"{heads}, query {pos}: " + key_row(value[: pos + 1])
                       + (f" (keys after {pos}: " + ("−inf)" if node.kind == Kind.MASK else "0)")
                          if pos + 1 < value.size and node.kind != Kind.SCORES else "")],
                      value, captured)
    span = "over all heads at once, before the split" if att.whole_qk else "per head"
    gain = f"({att.q_norm.offset:g} + weight)" if getattr(att.q_norm, "offset", 0) else "weight"
    scaled = "/ √head_dim" if att.scale is None else f"× {att.scale:.4g}"
    formula = {SPLIT_QUERIES: "queries.view(b, T, n_heads, head_dim).transpose(1, 2)",
               SPLIT_KEYS: "keys.view(b, T, n_kv_groups, head_dim).transpose(1, 2)",
               SPLIT_VALUES: "values.view(b, T, n_kv_groups, head_dim).transpose(1, 2)",
               Q_NORM: f"q_norm(queries): x / √(mean(x²) + eps) · {gain}, {span}",
               K_NORM: f"k_norm(keys): x / √(mean(x²) + eps) · {gain}, {span}",
               KEYS_SHARED: "keys.repeat_interleave(group_size, dim=1)",
               VALUES_SHARED: "values.repeat_interleave(group_size, dim=1)",
               CONTEXT: "attn_weights @ values_repeated",
               CONTEXT_JOINED: "context.transpose(1, 2).reshape(b, T, n_heads · head_dim)",
               ATTENTION: f"out_proj(softmax(RoPE(q)·RoPE(k)ᵀ {scaled} + mask) · v)"}[key]
    return Worked(name, formula, [f"{heads}: " + ", ".join(_f(v) for v in value[:SHOWN]) + " …"],
                  value, captured)
