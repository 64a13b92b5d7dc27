"""The contribution graph (after Ferrando & Voita 2024, as Meta's LLM Transparency Tool
draws it): each token's representation after each half of each block, and how much of
it each part brought — every head reading from every earlier token, the feed-forward
block, and the residual stream carried on.

A sum ``y = Σ c`` is split by proximity: part c's share is
``max(0, |y|₁ − |y − c|₁)``, normalised over the parts of y. After block l's attention,
y at position p is the stream before it plus ``A[h, p, j] · (v_j W_O,h)`` for every head
h and earlier token j, plus out_proj's bias; after its feed-forward, the stream before it
plus the feed-forward's output (the bias is a part too, never drawn). Edges above a
threshold make the graph. In Post-LN
models the same shares are of the sums the norms then rescale.

Memory grows with heads × tokens² × width, so prompts are cut to ``MAX_TOKENS``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from ..gpt.hooks import hooks
from ..gpt.block_model import BlockModel
from ..gpt.nodes import (FIRST_ADD, HEADS_MIX, PATTERN, SECOND_ADD, Role, block_hook_name,
                         node_for_hook, order_of, residual_branches, role)
from ..run.capture import StopCheck
from .direct import Branch

MAX_TOKENS = 48


@dataclass(frozen=True)
class ContributionGraph:
    ids: tuple[int, ...]
    heads: np.ndarray  # (layers, heads, T target, T source): each head's share, via each token
    attention_stream: np.ndarray  # (layers, T): the stream's own share across attention
    ff: np.ndarray  # (layers, T): the feed-forward's share
    ff_stream: np.ndarray  # (layers, T): the stream's share across the feed-forward
    cut: bool  # the prompt was longer than MAX_TOKENS

    def edges(self, threshold: float) -> list[tuple[Branch, int, int, int, int, float]]:
        """(kind, layer, head or -1, source token, target token, share) above the
        threshold: a head's edges from an earlier token, the feed-forward's within one."""
        out = []
        for layer, head, target, source in zip(*np.nonzero(self.heads > threshold)):
            out.append((Branch.HEAD, int(layer), int(head), int(source), int(target),
                        float(self.heads[layer, head, target, source])))
        for layer, target in zip(*np.nonzero(self.ff > threshold)):
            out.append((Branch.FEED_FORWARD, int(layer), -1, int(target), int(target),
                        float(self.ff[layer, target])))
        return out


def proximity_shares(total: np.ndarray, parts: np.ndarray) -> np.ndarray:
    """Each part's share of ``total`` (..., C) by proximity; parts (..., K, C) -> (..., K)."""
    size = np.abs(total).sum(-1)[..., None]
    raw = np.maximum(0.0, size - np.abs(total[..., None, :] - parts).sum(-1))
    return raw / np.maximum(raw.sum(-1, keepdims=True), 1e-12)


def contribution_graph(model: BlockModel, ids: list[int], should_stop=None) -> ContributionGraph:
    if not ids:
        raise ValueError("an empty prompt has no contributions")
    cut = len(ids) > MAX_TOKENS
    ids = list(ids[-MAX_TOKENS:])
    cfg = model.cfg
    seen: dict[str, np.ndarray] = {}

    def keep(name: str):
        def hook(module, inputs, out):
            seen[name] = out[0].detach().double().cpu().numpy()
        return hook

    order = order_of(cfg)
    branches = residual_branches(order)
    # the values each query head reads: W_value's (split below, GPT-2), or per head
    # already (a grouped-query block's, repeated from its key/value heads)
    value_key = role(order, Role.MIXED_VALUES)
    per_head = node_for_hook(block_hook_name(0, value_key), order).per_head
    names = [block_hook_name(layer, key) for layer in range(cfg.n_layers)
             for key in (PATTERN, value_key, FIRST_ADD, SECOND_ADD, branches[SECOND_ADD])]
    with torch.inference_mode(), StopCheck(model, should_stop), \
            hooks(model, [(n, keep(n)) for n in names]):
        model(torch.tensor([ids], device=next(model.parameters()).device))
    t, h = len(ids), cfg.n_heads
    heads = np.zeros((cfg.n_layers, h, t, t))
    att_stream, ff, ff_stream = (np.zeros((cfg.n_layers, t)) for _ in range(3))
    for layer in range(cfg.n_layers):
        def at(key: str) -> np.ndarray:
            return seen[block_hook_name(layer, key)]
        mix = model.get_submodule(block_hook_name(layer, HEADS_MIX))
        w_o = mix.weight.detach().double().cpu().numpy().reshape(cfg.emb_dim, h, -1)
        values = at(value_key).transpose(1, 0, 2) if per_head else \
            at(value_key).reshape(t, h, -1)  # (T, H, hd)
        written = np.einsum("thd,chd->htc", values, w_o)  # (H, T source, C): v_j W_O,h
        bias = np.zeros(cfg.emb_dim) if mix.bias is None else mix.bias.detach().double().cpu().numpy()
        pattern, after = at(PATTERN), at(FIRST_ADD)  # (H, T, T); the stream after attention
        before = after - np.einsum("hts,hsc->tc", pattern, written) - bias
        for p in range(t):  # one target at a time: (H * (p + 1) + 2, C) parts
            parts = (pattern[:, p, :p + 1, None] * written[:, :p + 1]).reshape(-1, cfg.emb_dim)
            shares = proximity_shares(after[p], np.vstack([parts, before[p], bias]))
            heads[layer, :, p, :p + 1] = shares[:-2].reshape(h, p + 1)
            att_stream[layer, p] = shares[-2]
        second = proximity_shares(at(SECOND_ADD), np.stack(
            [at(branches[SECOND_ADD]), at(SECOND_ADD) - at(branches[SECOND_ADD])], axis=1))
        ff[layer], ff_stream[layer] = second[:, 0], second[:, 1]
    return ContributionGraph(tuple(ids), heads, att_stream, ff, ff_stream, cut)
