"""A mixture of experts' routing in one block, read from a pass's captured router logits
and weights (no model needed): each token's weight on each expert, how many of the
prompt's tokens each expert got, the mean router probability per expert, the
load-balancing loss the models were trained with, and how spread each token's routing
is (the entropy of its softmax over every expert)."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ..gpt.nodes import Role, block_hook_name, expert_step, order_of, role


@dataclass(frozen=True)
class RoutingMap:
    layer: int
    weights: np.ndarray  # (T, n_experts): each token's weight on each expert, 0 if not routed
    probs: np.ndarray  # (T, n_experts): the router's softmax over every expert
    k: int  # experts a token is routed to

    @property
    def tokens(self) -> np.ndarray:
        """(n_experts,) how many of the tokens each expert got."""
        return (self.weights != 0).sum(axis=0)

    @property
    def idle(self) -> list[int]:
        """The experts no token was routed to: they did not run in this block."""
        return [int(e) for e in np.flatnonzero(self.tokens == 0)]

    @property
    def balance_loss(self) -> float:
        """The auxiliary load-balancing loss (Switch Transformer's, as ``transformers``'
        ``load_balancing_loss_func`` computes it for Qwen3-MoE and OLMoE), this block's
        tokens only: n_experts · Σₑ (share of tokens routed to e) · (mean probability of
        e). k when every expert gets as many tokens and as much probability; up to
        n_experts · k / … more the more a few experts take."""
        n, t = self.weights.shape[1], self.weights.shape[0]
        return float(n * np.sum(self.tokens / t * self.probs.mean(axis=0)))

    @property
    def entropy_bits(self) -> np.ndarray:
        """(T,) each token's routing entropy over every expert, in bits: 0 when one expert
        takes all the probability, log2(n_experts) when the router cannot choose."""
        p = np.clip(self.probs, 1e-30, 1.0)
        return -(self.probs * np.log2(p)).sum(axis=1)

    @property
    def uniform_bits(self) -> float:
        return math.log2(self.weights.shape[1])


def routing_map(views: dict, cfg, layer: int, sample: int = 0) -> RoutingMap | None:
    """Block ``layer``'s routing from a pass's views (its router logits and weights kept
    in full), or None for a model without experts or a pass that did not keep them."""
    order = order_of(cfg)
    router, routing = role(order, Role.ROUTER), role(order, Role.ROUTING)
    if router is None or routing is None:
        return None
    logits_view = views.get(block_hook_name(layer, router))
    weights_view = views.get(block_hook_name(layer, routing))
    if logits_view is None or weights_view is None or logits_view.array is None \
            or weights_view.array is None:
        return None
    logits = np.asarray(logits_view.array, dtype=np.float64)[sample]
    probs = np.exp(logits - logits.max(axis=-1, keepdims=True))
    probs /= probs.sum(axis=-1, keepdims=True)
    weights = np.asarray(weights_view.array, dtype=np.float64)[sample]
    return RoutingMap(layer, weights, probs, cfg.experts_per_token)


def expert_tokens(views: dict, cfg, layer: int) -> dict[int, int] | None:
    """How many of a pass's tokens (a batch's real ones) block ``layer`` routed to each
    expert, or None for a model without experts or a pass that did not keep its weights."""
    routing = role(order_of(cfg), Role.ROUTING)
    view = views.get(block_hook_name(layer, routing)) if routing else None
    if view is None or view.array is None:
        return None
    rows = view.real_rows()
    return {e: int(n) for e, n in enumerate((rows != 0).sum(axis=0))}


def routed_rows(views: dict, cfg, hook_name: str) -> list[int] | None:
    """The pass's rows (a batch's real ones, sample-major) whose tokens went to the expert
    whose step ``hook_name`` is, in the order its tensor holds them; None for any other
    node or a pass that did not keep the weights."""
    found = expert_step(hook_name, cfg) if cfg.n_experts else None
    if found is None:
        return None
    layer, expert, _ = found
    view = views.get(block_hook_name(layer, role(order_of(cfg), Role.ROUTING)))
    if view is None or view.array is None:
        return None
    return [int(i) for i in np.flatnonzero(view.real_rows()[:, expert] != 0)]


def text_routing(prompt, steps: list, cfg, layer: int) -> tuple[RoutingMap, list[int]] | None:
    """Block ``layer``'s routing over the whole text: the prompt's tokens, then each
    token generated from it (the step that ran it: step k runs step k-1's token; step 0
    is the prompt's last position again), with each row's token id; None without the
    prompt's weights or for a batch."""
    if prompt is None or prompt.batch is not None:
        return None
    first = routing_map(prompt.views, cfg, layer)
    if first is None:
        return None
    weights, probs, ids = [first.weights], [first.probs], list(prompt.ids)
    for before, step in zip(steps, steps[1:]):
        row = routing_map(step.views, cfg, layer)
        if row is None or step.whole:  # a recomputed step holds the whole context: stop
            break
        weights.append(row.weights[-1:])
        probs.append(row.probs[-1:])
        ids.append(int(before.token_id))
    return RoutingMap(layer, np.concatenate(weights), np.concatenate(probs), first.k), ids
