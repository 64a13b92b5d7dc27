"""One forward pass read at one position: what attribution and the layer table need.

``read_position(model, ids, position)`` runs the prompt up to ``position`` (later tokens
cannot change it: attention is causal) with forward hooks on the nodes it reads, and
keeps, as float64 copies, only that position's vectors: the token and position
embeddings, each block's per-head context (the input of ``out_proj``), its attention and
feed-forward branches, the GELU's output, the residual stream after each half, this
position's query and every key (for the attention entropy), the final norm's input and
the logits. A 1,024-token prompt keeps a few megabytes, not the pass's gigabytes.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from ..gpt.family import BlockOrder
from ..gpt.hooks import hooks
from ..gpt.block_model import BlockModel
from ..gpt.nodes import (FEED_FORWARD, FINAL_NORM, FIRST_ADD, HEADS_MIX, LOGITS, SECOND_ADD,
                         TOKEN_EMBEDDING, Role, block_hook_name, input_node, node_for_hook,
                         order_of, parse_hook, residual_branches, residual_nodes, role)
from ..run.capture import StopCheck


@dataclass(frozen=True)
class BlockReading:
    """One block at the position read; vectors of emb_dim unless said."""

    block_input: np.ndarray
    context: np.ndarray  # the heads' context vectors side by side, before out_proj
    attention: np.ndarray  # the attention branch (out_proj's output)
    feed_forward: np.ndarray  # the feed-forward branch (Linear 2's, or fc3's, output)
    gelu: np.ndarray  # what the last Linear reads (hidden_dim): GELU's output, SwiGLU's product
    residual: tuple[np.ndarray, np.ndarray]  # the stream after each half of the block
    query: np.ndarray  # (heads, head_dim) at this position (rotated, in a Llama block)
    keys: np.ndarray  # (heads, position + 1, head_dim) (rotated and shared per group)
    # a mixture of experts: the feed-forward's input and the token's weight on each expert
    experts: tuple[np.ndarray, np.ndarray] | None = None


@dataclass(frozen=True)
class Reading:
    ids: tuple[int, ...]  # the tokens up to and including the position
    position: int
    norm_position: BlockOrder  # the model's block order
    token_embedding: np.ndarray
    position_embedding: np.ndarray  # zeros where the model has none (RoPE)
    blocks: tuple[BlockReading, ...]
    final_input: np.ndarray  # what the final norm receives
    logits: np.ndarray  # (vocab,) the model's own logits at this position

    @property
    def embeddings(self) -> np.ndarray:
        """The residual stream entering block 0 (dropout is the identity in eval)."""
        return self.token_embedding + self.position_embedding


def read_position(model: BlockModel, ids: list[int], position: int,
                  should_stop=None) -> Reading:
    """The vectors at ``position`` of a forward pass of ``ids``; ``should_stop()`` is asked
    before every block (``Cancelled``)."""
    if not 0 <= position < len(ids):
        raise ValueError(f"position {position} is outside the prompt's {len(ids)} tokens")
    if position >= model.cfg.context_length:
        raise ValueError(f"position {position} is past the model's context of "
                         f"{model.cfg.context_length} tokens")
    cfg = model.cfg
    seen: dict[str, np.ndarray] = {}
    p = position

    def last_row(name: str, whole: bool = False):
        def hook(module, inputs, out):
            tensor = out if out.dim() == 2 else out[0]  # the position embedding has no batch
            seen[name] = (tensor if whole else tensor[p]).detach().double().cpu().numpy()
        return hook

    def input_row(name: str):
        def hook(module, inputs):
            seen[name] = inputs[0][0, p].detach().double().cpu().numpy()
        return hook

    def head_row(name: str, whole: bool = False):  # (B, H, T, hd): the position, or every one
        def hook(module, inputs, out):
            seen[name] = (out[0] if whole else out[0][:, p]).detach().double().cpu().numpy()
        return hook

    order = order_of(cfg)
    forward = [(TOKEN_EMBEDDING, last_row(TOKEN_EMBEDDING)), (LOGITS, last_row(LOGITS))]
    position = role(order, Role.POSITION_EMBEDDING)  # a learned one (RoPE adds none)
    if position is not None:
        forward.append((position, last_row(position)))
    pre = [(FINAL_NORM, input_row(FINAL_NORM))]
    branches = residual_branches(order)
    # what the scores are made of: per head already (B, H, T, hd), or (B, T, C) to split
    query, keys = role(order, Role.SCORED_QUERIES), role(order, Role.SCORED_KEYS)
    per_head = node_for_hook(block_hook_name(0, query), order).per_head
    for layer in range(cfg.n_layers):
        neurons = role(order, Role.ACTIVATION_OUTPUT)  # None: a mixture of experts has none
        names = [branches[FIRST_ADD], branches[SECOND_ADD], *([neurons] if neurons else []),
                 *_mixture_nodes(order), *residual_nodes(order)] + ([] if per_head else [query])
        forward += [(block_hook_name(layer, k), last_row(block_hook_name(layer, k)))
                    for k in names]
        if per_head:
            forward += [(block_hook_name(layer, query), head_row(block_hook_name(layer, query))),
                        (block_hook_name(layer, keys), head_row(block_hook_name(layer, keys), True))]
        else:
            forward.append((block_hook_name(layer, keys), last_row(block_hook_name(layer, keys), whole=True)))
        pre.append((block_hook_name(layer, HEADS_MIX), input_row(block_hook_name(layer, HEADS_MIX))))
    tokens = torch.tensor([ids[:p + 1]], device=next(model.parameters()).device)
    with torch.inference_mode(), StopCheck(model, should_stop), hooks(model, forward, pre):
        model(tokens)
    return _reading(cfg, seen, tuple(ids[:p + 1]), p)


def _reading(cfg, seen: dict[str, np.ndarray], ids: tuple[int, ...], p: int) -> Reading:
    heads, head_dim = cfg.n_heads, cfg.head_dim
    order = order_of(cfg)
    branches = residual_branches(order)
    query_key, keys_key = role(order, Role.SCORED_QUERIES), role(order, Role.SCORED_KEYS)
    per_head = node_for_hook(block_hook_name(0, query_key), order).per_head
    blocks = []
    position_key = role(order, Role.POSITION_EMBEDDING)
    position = seen[position_key] if position_key else np.zeros_like(seen[TOKEN_EMBEDDING])
    previous = seen[TOKEN_EMBEDDING] + position
    for layer in range(cfg.n_layers):
        def at(key: str) -> np.ndarray:
            return seen[block_hook_name(layer, key)]
        first, second = residual_nodes(order)
        if per_head:
            query, keys = at(query_key), at(keys_key)
        else:
            query = at(query_key).reshape(heads, head_dim)
            keys = at(keys_key).reshape(p + 1, heads, head_dim).transpose(1, 0, 2)
        mixture = _mixture_nodes(order)
        blocks.append(BlockReading(
            block_input=previous, context=at(HEADS_MIX), attention=at(branches[FIRST_ADD]),
            feed_forward=at(branches[SECOND_ADD]),
            gelu=at(neurons) if (neurons := role(order, Role.ACTIVATION_OUTPUT)) else np.zeros(0),
            residual=(at(first), at(second)), query=query, keys=keys,
            experts=tuple(at(k) for k in mixture) if mixture else None))
        previous = at(second)
    return Reading(ids, p, order, seen[TOKEN_EMBEDDING], position,
                   tuple(blocks), seen[FINAL_NORM], seen[LOGITS])


def _mixture_nodes(order) -> tuple[str, ...]:
    """A mixture of experts' feed-forward input and routing weights (keys in a block),
    or none for a dense feed-forward."""
    routing = role(order, Role.ROUTING)
    if routing is None:
        return ()
    return (parse_hook(input_node(block_hook_name(0, FEED_FORWARD), order))[1], routing)
