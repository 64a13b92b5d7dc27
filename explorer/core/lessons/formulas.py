"""Each node's formula worked with one token's numbers: the general formula, then the
selected token's values put through it step by step (three features shown), recomputed
from the captured tensors of the pass and the model's own parameters — and checked
against what the node captured. No UI; reads the model's parameters, never changes them.

The recomputation needs the whole pass (every position's tensors): a step from the KV
cache holds one position only, and attention then needs the cached keys it did not keep.
"""

from __future__ import annotations

import numpy as np

from ..gpt.block_model import BlockModel
from ..gpt.family import AttentionFormulas
from ..gpt.nodes import (ATTENTION, EMBEDDING_SUM, HEADS_MIX, QUERIES, KEYS, VALUES, Kind, Width,
                         expert_step, order_of, node_for_hook, parse_hook)
from ..gpt.tokenizer import tokenizer_of
from .formulas_common import Ask, Worked, _row
from .formulas_gpt2 import embedding
from .formulas_llama import attention_step
from .formulas_moe import expert_rows, mixture
from .kinds import KIND_LESSONS


def worked(model: BlockModel, name: str, views: dict, ids: list[int], pos: int,
           head: int = 0) -> Worked:
    """``name``'s formula at position ``pos`` of the pass whose ``views`` and token
    ``ids`` are given (the attention pattern and attention for ``head``): its kind's
    worker (``KindLesson.formula``); a family whose attention's steps are recomputed from
    attention's input (a rotary block's: ``AttentionFormulas.FROM_INPUT``) has them so,
    and the embedding sum is the embeddings' formula."""
    cfg = model.cfg
    order = order_of(cfg)
    node = node_for_hook(name, order)
    if views.get(name) is None or views[name].array is None:
        raise ValueError(f"{name} was not kept in full in this pass")
    if expert_step(name, cfg) is not None:  # its rows: the tokens routed to it, put in place
        views = expert_rows(views, cfg, name, pos)
    layer, key = parse_hook(name)
    index = head // (cfg.n_heads // cfg.kv_heads) if node.width == Width.KV_HEAD else head
    captured = _row(views, name, pos) if not node.per_head else \
        np.asarray(views[name].array, dtype=np.float64)[0, index, pos]
    piece = tokenizer_of(model).token_piece(ids[pos])  # the model's own vocabulary
    ask = Ask(model, name, key, layer, node, views, ids, pos, head, index,
              f"token {piece!r} at position {pos}", captured, order)
    if cfg.family.attention_formulas == AttentionFormulas.FROM_INPUT and layer is not None \
            and ATTENTION in (key, node.parent) and key not in (HEADS_MIX, QUERIES, KEYS, VALUES):
        return attention_step(ask)
    if key == EMBEDDING_SUM:
        return embedding(ask)
    if cfg.n_experts and node.kind == Kind.FFN:  # a mixture of experts: its routed sum
        return mixture(ask)
    return KIND_LESSONS[node.kind].formula(ask)
