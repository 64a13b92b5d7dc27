"""Learn's questions about a node: the ones its kind's record lists (kinds.py), a
block's input asked as the first node it feeds, a block's norm asked why it sits where it
does; the n-th of them asked, and the score kept."""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Callable

from ..gpt.nodes import (EMBEDDING_SUM, KEYS, VALUES, Kind, NormPosition, Role, as_order,
                         block_output, embeddings, layer_of, node_for_hook, role)
from .kinds import KIND_LESSONS
from .question import Live, Question
from .quiz import first_node_question, norm_question, shape_question, width_question
from .quiz_llama import cache_question, group_question, swiglu_weights_question

NOT_WRITTEN = ("Learn's questions are not written for this block yet (a family's record says "
               "whether they are); on it use Explain, the worked formulas and the Code view.")


def questions_for(name: str, norm_position: str, follows: bool = True) -> tuple[Callable, ...]:
    """The question makers of a node, in the order they rotate; ``follows``: whether a
    block comes after it (not after the last block's output: no block's first operation
    to ask about there)."""
    node = node_for_hook(name, norm_position)
    if node.key == EMBEDDING_SUM:
        return (shape_question, width_question)
    makers = KIND_LESSONS[node.kind].questions
    if name == embeddings(norm_position) or (node.key == block_output(norm_position) and follows):
        # asked from a block's input (the embeddings, or the block before's output), not
        # from its first node, whose selection would give the answer away
        makers = (first_node_question,) + makers
    if layer_of(name) is not None and node.kind == Kind.NORM and \
            as_order(norm_position).position in (NormPosition.PRE, NormPosition.POST):
        makers = makers + (norm_question,)  # "Pre-LN or Post-LN?": asked of those two only
    order = as_order(norm_position)  # what grouped-query attention and a gated
    shared = {role(order, Role.KEYS_SHARED), role(order, Role.VALUES_SHARED)} - {None}
    if node.key in shared:  # feed-forward change, where the block has them
        makers = (group_question,) + makers
    elif shared and node.key in (KEYS, VALUES):
        makers = (cache_question,) + makers
    elif node.kind == Kind.FFN and role(order, Role.UP) is not None:
        makers = (swiglu_weights_question,) + makers
    return makers


def question_for(name: str, views: dict, norm_position: str, asked: int = 0,
                 seed: int = 0, norm_eps: float = 1e-5) -> Question | None:
    """The ``asked``-th question about ``name`` (they rotate), from the pass's ``views``
    (of a model whose norms add ``norm_eps``); None when the node is not in them."""
    if name not in views:
        return None
    layer = layer_of(name)  # a block after it: one of the pass's nodes is the next block's
    follows = layer is None or any(layer_of(n) == layer + 1 for n in views)
    makers = questions_for(name, norm_position, follows)
    live = Live(name, views, norm_position, norm_eps)
    return makers[asked % len(makers)](live, random.Random(seed * 7919 + asked))


@dataclass
class Score:
    asked: int = 0
    right: int = 0

    def record(self, correct: bool) -> None:
        self.asked += 1
        self.right += int(correct)
