"""Tracing the forward pass node by node, as the seeds do: the order (embeddings, every
block in its own Pre-LN or Post-LN order, final norm, head) and one sentence per node,
with the pass's numbers, on what changed — the shape (and which dimension), the mean
and the standard deviation. Qt-free; the Code view steps through it."""

from __future__ import annotations

import numpy as np

from ..gpt.config import GPTConfig
from ..gpt.nodes import (order_of, BLOCK_INPUT, EMBEDDING_SUM, POSITION_EMBEDDING, TOKEN_EMBEDDING, Kind,
                         all_hook_names, block_hook_name, block_input,
                         input_node, layer_of, model_input_node, node_for_hook, shortcut_sources)


def trace_order(cfg: GPTConfig) -> list[str]:
    return all_hook_names(cfg, include_pattern=True)


def source_of(name: str, cfg: GPTConfig) -> str | None:
    """The node whose output this one reads (None for the embeddings' lookups)."""
    order = order_of(cfg)
    if layer_of(name) is None:
        return model_input_node(name, order, cfg.n_layers)
    return input_node(name, order)


AXES = ("batch", "token", "feature")


def what_changed(name: str, views: dict, cfg: GPTConfig) -> str:
    """One sentence: what this node did to the tensor it read, with the pass's numbers."""
    node = node_for_hook(name, order_of(cfg))
    view = views.get(name)
    if view is None:
        return f"{node.label} ({name}): not captured in this pass."
    shape, s = tuple(view.shape), view.stats
    head = f"{node.label} ({name}) gives {shape}, mean {s.mean:.3g}, std {s.std:.3g}"
    source = source_of(name, cfg)
    before = views.get(source) if source else None
    if name == TOKEN_EMBEDDING:
        return head + f": one {shape[-1]}-value row of the embedding table per token id."
    if name == POSITION_EMBEDDING:
        return head + f": one learned vector per position 0..{shape[0] - 1}, no batch axis."
    if name == EMBEDDING_SUM and POSITION_EMBEDDING in views:
        return head + ": token + position embeddings, added (the width stays " \
                      f"{shape[-1]}; the positions are broadcast over the batch)."
    if node.kind == Kind.PATTERN:
        return head + (f": for each of {shape[1]} heads a {shape[2]} × {shape[3]} table of "
                       "weights (query × key); every row sums to 1, the upper triangle is 0.")
    if before is None:
        return head + "."
    layer = layer_of(name)
    if node.kind == Kind.ADD and layer is not None:
        short = shortcut_sources(order_of(cfg))[node.key]
        short = (block_input(layer, order_of(cfg)) if short == BLOCK_INPUT
                 else block_hook_name(layer, short))
        if short in views:
            return head + (f": the branch {source} (std {before.stats.std:.3g}) plus the shortcut "
                           f"{short} (std {views[short].stats.std:.3g}); the shape stays {shape}.")
    b_shape, b = tuple(before.shape), before.stats
    changed = [i for i, (x, y) in enumerate(zip(b_shape, shape)) if x != y]
    if len(b_shape) != len(shape):
        what = f"the shape went from {b_shape} to {shape}"
    elif changed:
        axes = ", ".join(f"the {AXES[i] if len(shape) == 3 else f'axis {i}'} dimension from "
                         f"{b_shape[i]} to {shape[i]}" for i in changed)
        what = f"it changed {axes}"
    else:
        what = f"the shape stays {shape}"
    if node.kind == Kind.DROPOUT and before.array is not None and view.array is not None \
            and before.array.shape == view.array.shape and np.array_equal(before.array, view.array):
        return head + f": {what}, value for value the same as {source} (dropout is off at inference)."
    return head + f"; from {source}: {what}, std {b.std:.3g} → {s.std:.3g}, mean {b.mean:.3g} → {s.mean:.3g}."
