"""Chapter 4's plan — the pieces a GPT is built from, one by one — each with where it
sits in the loaded model (its node names and sizes), for Learn ▸ Model."""

from __future__ import annotations

from ..gpt.family import NORM_KINDS
from ..gpt.nodes import (FEED_FORWARD, FINAL_NORM, LOGITS, Kind, Role, activation_label,
                         block_module_name, block_nodes, expert_nodes, expert_step_keys,
                         model_nodes, order_of, residual_branches, role)
from ..gpt.sizes import count_parameters


def chapter_plan(cfg) -> list[str]:
    """The chapter's steps, in its order, each said with this model's own nodes."""
    order = order_of(cfg)
    before, _after = model_nodes(order)
    nodes = block_nodes(order)
    norms = [n for n in nodes if n.kind in NORM_KINDS and n.parent is None]
    norm_word = norms[0].label.split(" ")[0] if norms else "norm"
    activation = role(order, Role.ACTIVATION)
    adds = list(residual_branches(order))
    total = count_parameters(cfg).total
    return [
        f"1. The GPT's backbone: {', '.join(n.key for n in before)} before the blocks, "
        f"{FINAL_NORM} and {LOGITS} after them.",
        f"2. Layer normalisation: {', '.join(n.key for n in norms)} in each block "
        f"({norm_word}), and {FINAL_NORM} after the last.",
        f"3. The non-linearity: {activation} ({activation_label(activation)})." if activation
        else f"3. The non-linearity: each expert's {_expert_activation(cfg)}.E, as a gate.",
        f"4. The feed-forward network: {FEED_FORWARD}, {cfg.emb_dim:,} → {cfg.hidden_dim:,} → "
        f"{cfg.emb_dim:,} values a token.",
        f"5. Shortcut connections: {', '.join(adds)}, each adding a branch to the stream.",
        f"6. Attention and the feed-forward in one transformer block: {block_module_name(0)} "
        f"… {block_module_name(cfg.n_layers - 1)}, each drawn in the block graph.",
        f"7. The GPT model: {cfg.n_layers} blocks, {total:,} parameters (the table above).",
        "8. Generating text: one token at a time from the last position's logits "
        "(Generate, Ctrl+Enter).",
    ]


def _expert_activation(cfg) -> str:
    """The key of an expert's non-linearity in a mixture (its expert index left off)."""
    return next(key for key, n in zip(expert_step_keys(cfg), expert_nodes(cfg, 0))
                if n.kind in (Kind.SILU, Kind.GELU))

