"""A mixture of experts' formulas worked with one token's numbers (formulas.py's, for the
nodes only such a feed-forward has): its weights on the experts, from the router's
logits captured at the token, recomputed in float64 as core/gpt/moe.py routes."""

from __future__ import annotations

import numpy as np

from dataclasses import replace

from ..gpt.nodes import Role, block_hook_name, expert_nodes, expert_step, input_node, role
from ..run.routing import routed_rows
from .formulas_common import SHOWN, Ask, Worked, _f, _p, _row


def routing(ask: Ask) -> Worked:
    """softmax over every expert, the k largest kept (renormalised where the model
    does), 0 for the rest."""
    ff = ask.model.trf_blocks[ask.layer].ff
    k, renormalise = ff.num_experts_per_tok, ff.renormalise
    logits = _row(ask.views, input_node(ask.name, ask.order), ask.pos)
    probs = np.exp(logits - logits.max())
    probs /= probs.sum()
    chosen = np.argsort(-probs, kind="stable")[:k]
    kept = probs[chosen] / (probs[chosen].sum() if renormalise else 1.0)
    value = np.zeros_like(probs)
    value[chosen] = kept
    shown = ", ".join(f"expert {e}: softmax {_f(probs[e])}" for e in chosen)
    lines = [f"{ask.where}: router logits over {probs.size} experts, largest "
             f"{_f(float(logits.max()))}; the {k} largest after the softmax — {shown}"]
    if renormalise:
        lines.append(f"renormalised: each divided by their sum {_f(float(probs[chosen].sum()))}"
                     " → " + ", ".join(f"{_f(w)}" for w in kept))
    else:
        lines.append(f"not renormalised: they sum to {_f(float(kept.sum()))}, the rest of the "
                     "softmax's mass goes to no expert")
    per_expert = 3 * ask.model.cfg.emb_dim * ask.model.cfg.hidden_dim  # multiply-adds a token
    lines.append(f"why top-k: these {k} hold {100 * float(probs[chosen].sum()):.1f}% of the "
                 f"softmax, and running only them costs this token {k * per_expert:,} of the "
                 f"{probs.size * per_expert:,} multiply-adds every expert would ({k} of "
                 f"{probs.size}): more parameters, the same work a token")
    formula = ("w = topk(softmax(gate(x)), k) / sum, 0 elsewhere" if renormalise
               else "w = topk(softmax(gate(x)), k), 0 elsewhere")
    return Worked(ask.name, formula, lines, value, ask.captured)



def expert_rows(views: dict, cfg, name: str, pos: int) -> dict:
    """The views with the steps of ``name``'s expert put at the positions of the tokens
    routed to it (0 elsewhere), so that a formula reads a token's row at its position;
    ``ValueError`` when the token at ``pos`` was not routed there (they did not run)."""
    layer, expert, _ = expert_step(name, cfg)
    rows = routed_rows(views, cfg, name)
    if rows is None:
        raise ValueError(f"this pass kept no routing weights for block {layer}")
    if pos not in rows:
        raise ValueError(f"the token at position {pos} was not routed to expert {expert}: "
                         "its steps did not run for that token")
    placed = dict(views)
    for node in expert_nodes(cfg, expert):
        step = block_hook_name(layer, node.key)
        view = views.get(step)
        if view is not None and view.array is not None:
            full = np.zeros((1, max(rows) + 1, view.array.shape[-1]), dtype=view.array.dtype)
            full[0, rows] = view.array[0]
            placed[step] = replace(view, array=full)
    return placed


def mixture(ask: Ask) -> Worked:
    """The feed-forward's output: each chosen expert's SwiGLU on the token's input,
    weighted by its routing weight, summed; recomputed from the captured input and
    weights and each expert's own matrices."""
    ff = ask.model.trf_blocks[ask.layer].ff
    x = _row(ask.views, input_node(ask.name, ask.order), ask.pos)
    weights = _row(ask.views, block_hook_name(ask.layer, role(ask.order, Role.ROUTING)), ask.pos)
    value, lines = np.zeros_like(x), []
    for e in np.flatnonzero(weights):
        gate, up = _p(ff.fc1[e].weight) @ x, _p(ff.fc2[e].weight) @ x
        out = _p(ff.fc3[e].weight) @ (gate / (1 + np.exp(-gate)) * up)
        value += weights[e] * out
        lines.append(f"{ask.where}: expert {e} × {_f(weights[e])}: its fc3(silu(fc1·x) ⊙ fc2·x) "
                     "starts " + ", ".join(_f(v) for v in out[:SHOWN]) + " …")
    idle = weights.size - len(lines)
    per_expert = 3 * x.size * ask.model.cfg.hidden_dim
    lines.append(f"the other {idle} experts do not run for this token; the sum starts "
                 + ", ".join(_f(v) for v in value[:SHOWN]) + " …")
    lines.append(f"active here: {len(lines) - 1} experts × {per_expert:,} parameters = "
                 f"{(len(lines) - 1) * per_expert:,} of this block's {weights.size * per_expert:,}")
    return Worked(ask.name, "ff(x) = Σₑ wₑ · fc3[e](silu(fc1[e](x)) ⊙ fc2[e](x)), over the "
                  "token's experts", lines, value, ask.captured)
