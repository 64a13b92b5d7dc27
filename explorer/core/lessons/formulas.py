"""Each node's formula worked with one token's numbers: the general formula, then the
selected token's values put through it step by step (three features shown), recomputed
from the captured tensors of the pass and the model's own parameters — and checked
against what the node captured. No UI; reads the model's parameters, never changes them.

The recomputation needs the whole pass (every position's tensors): a step from the KV
cache holds one position only, and attention then needs the cached keys it did not keep.
"""

from __future__ import annotations

import numpy as np

from ..gpt.model import GPTModel
from ..gpt.nodes import (ATTENTION, EMBEDDING_SUM, HEADS_MIX, Width, order_of, node_for_hook,
                         parse_hook)
from ..gpt.tokenizer import token_piece
from .formulas_common import Ask, Worked, _row
from .formulas_gpt2 import embedding
from .formulas_llama import attention_step
from .kinds import KIND_LESSONS


def worked(model: GPTModel, name: str, views: dict, ids: list[int], pos: int,
           head: int = 0) -> Worked:
    """``name``'s formula at position ``pos`` of the pass whose ``views`` and token
    ``ids`` are given (the attention pattern and attention for ``head``): its kind's
    worker (``KindLesson.formula``); a Llama block's attention steps are all recomputed
    from attention's input, and the embedding sum is the embeddings' formula."""
    cfg = model.cfg
    order = order_of(cfg)
    node = node_for_hook(name, order)
    if views.get(name) is None or views[name].array is None:
        raise ValueError(f"{name} was not kept in full in this pass")
    layer, key = parse_hook(name)
    index = head // (cfg.n_heads // cfg.kv_heads) if node.width == Width.KV_HEAD else head
    captured = _row(views, name, pos) if not node.per_head else \
        np.asarray(views[name].array, dtype=np.float64)[0, index, pos]
    ask = Ask(model, name, key, layer, node, views, ids, pos, head, index,
              f"token {token_piece(ids[pos])!r} at position {pos}", captured, order)
    if cfg.llama and layer is not None and key.startswith(ATTENTION) and \
            key != HEADS_MIX and not key.startswith(("att.W_",)):
        return attention_step(ask)
    if key == EMBEDDING_SUM:
        return embedding(ask)
    return KIND_LESSONS[node.kind].formula(ask)
