"""Attention opened on demand: a block's attention run again on the input a pass
captured for it, with every step inside it captured (``nodes.ATTENTION_INSIDE``), or
only its pattern.

A pass captures attention's own steps only when asked (``Keep.inside``), and the
patterns of the blocks asked (``Keep.attention``): the score matrices are T × T per head
and block. The window asks for one block at a time, when its attention is opened or
shown, through ``open_attention``: the same module, the same input, so the same numbers
the pass computed. For a generated step the query is its one position: the
keys and values of the positions before it go into the KV cache first, as in generation.
"""

from __future__ import annotations

import numpy as np
import torch

from .capture import Capture, NodeView
from ..gpt.hooks import hooks
from ..gpt.layers import LayerKV
from ..gpt.block_model import BlockModel
from ..gpt.nodes import (ATTENTION, FEED_FORWARD, PATTERN, Role, attention_inside, block_hook_name,
                         input_node, order_of, role)


def attention_input(layer: int, norm_position: str) -> str:
    """The node whose output block ``layer``'s attention reads."""
    return input_node(block_hook_name(layer, ATTENTION), norm_position)


def inside_names(layer: int, order="pre") -> list[str]:
    """Block ``layer``'s attention steps, for a block of this order (its family's steps)."""
    return [block_hook_name(layer, n.key) for n in attention_inside(order)]


def experts_input(layer: int, cfg) -> tuple[str, str]:
    """The nodes a mixture's experts in block ``layer`` need: what its feed-forward reads,
    and each token's weights on the experts."""
    order = order_of(cfg)
    return (input_node(block_hook_name(layer, FEED_FORWARD), order),
            block_hook_name(layer, role(order, Role.ROUTING)))


def open_experts(model: BlockModel, x: np.ndarray, weights: np.ndarray, layer: int,
                 valid: np.ndarray | None = None) -> dict[str, NodeView]:
    """Every expert's steps in block ``layer`` for the feed-forward's input ``x`` (B, T,
    C) and the weights a pass routed with (B, T, n_experts; an intervention's included):
    the feed-forward run again with those weights, so the experts that ran and their
    tokens are the pass's. ``valid`` marks a batch's real tokens (padding left out)."""
    x, weights = np.asarray(x), np.asarray(weights)
    if x.ndim != 3 or weights.shape != x.shape[:2] + (model.cfg.n_experts,):
        raise ValueError(f"the experts need (batch, tokens, {model.cfg.emb_dim}) inputs and "
                         f"their weights, not {tuple(x.shape)} and {tuple(weights.shape)}")
    if valid is not None:  # the real tokens only, as one row
        x, weights = x[np.asarray(valid, bool)][None], weights[np.asarray(valid, bool)][None]
    param = next(model.parameters())
    ff = model.trf_blocks[layer].ff
    xs = torch.from_numpy(np.ascontiguousarray(x)).to(param.device, param.dtype)
    ws = torch.from_numpy(np.ascontiguousarray(weights)).to(param.device, param.dtype)
    routing = experts_input(layer, model.cfg)[1]  # the pass's weights, before capture sees them
    with torch.inference_mode(), hooks(model, forward=[(routing, lambda module, i, o: ws)]), \
            Capture(model, tensors=True, experts=layer, layer=layer,
                    nodes=f"{block_hook_name(layer, FEED_FORWARD)}.*.*") as cap:
        ff(xs)
    return cap.views()


def open_attention(model: BlockModel, x: np.ndarray, layer: int, valid: np.ndarray | None = None,
                   last_only: bool = False, steps: bool = True) -> dict[str, NodeView]:
    """Attention's steps in block ``layer`` for its input ``x`` (B, T, C), every position
    the attention saw; ``valid`` marks a batch's real tokens; ``last_only``: the last
    position as a generated step asks (one query row against every key so far);
    ``steps=False``: the pattern only (a pass keeps the shown block's, ``Keep.attention``)."""
    x = np.asarray(x)
    if x.ndim != 3 or x.shape[-1] != model.cfg.emb_dim:
        raise ValueError(f"attention's input must be (batch, tokens, {model.cfg.emb_dim}), "
                         f"not {tuple(x.shape)}")
    if not 0 <= layer < model.cfg.n_layers:
        raise ValueError(f"block {layer} is not in this model (blocks 0–{model.cfg.n_layers - 1})")
    param = next(model.parameters())
    att = model.trf_blocks[layer].att
    xs = torch.from_numpy(np.ascontiguousarray(x)).to(param.device, param.dtype)
    names = inside_names(layer, order_of(model.cfg)) if steps else [block_hook_name(layer, PATTERN)]
    with torch.inference_mode():
        if last_only:
            kv, pos = LayerKV(), xs.shape[1] - 1
            if pos:
                att(xs[:, :pos], kv, 0)  # the keys and values before it, cached
            with Capture(model, names, tensors=True, attention=True, inside=steps) as cap:
                att(xs[:, pos:], kv, pos)
        else:
            with Capture(model, names, tensors=True, attention=True, inside=steps,
                         mask=valid) as cap:
                att(xs)
    return cap.views()
