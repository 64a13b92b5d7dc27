"""Learn's questions about a node: the ones its kind's record lists (kinds.py), a
block's input asked as the first node it feeds, a block's norm asked why it sits where it
does; the n-th of them asked, and the score kept."""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Callable

from ..gpt.nodes import EMBEDDINGS, EMBEDDING_SUM, Kind, block_output, layer_of, node_for_hook
from .kinds import KIND_LESSONS
from .question import Live, Question
from .quiz import first_node_question, norm_question, shape_question, width_question

QUIZ_FAMILIES = ("gpt2",)  # the blocks whose every question is written and checked
LLAMA_LESSONS = ("Learn's questions are the book's chapter-4 questions about GPT-2's block; "
                 "on this Llama-family block use Explain, the worked formulas and the Code "
                 "view.")


def questions_for(name: str, norm_position: str) -> tuple[Callable, ...]:
    node = node_for_hook(name, norm_position)
    if node.key == EMBEDDING_SUM:
        return (shape_question, width_question)
    makers = KIND_LESSONS[node.kind].questions
    if name == EMBEDDINGS or node.key == block_output(norm_position):
        # asked from a block's input (the embeddings, or the block before's output), not
        # from its first node, whose selection would give the answer away
        makers = (first_node_question,) + makers
    if layer_of(name) is not None and node.kind == Kind.NORM:
        makers = makers + (norm_question,)
    return makers


def question_for(name: str, views: dict, norm_position: str, asked: int = 0,
                 seed: int = 0) -> Question | None:
    """The ``asked``-th question about ``name`` (they rotate), from the pass's ``views``;
    None when the node is not in them."""
    if name not in views:
        return None
    makers = questions_for(name, norm_position)
    live = Live(name, views, norm_position)
    return makers[asked % len(makers)](live, random.Random(seed * 7919 + asked))


@dataclass
class Score:
    asked: int = 0
    right: int = 0

    def record(self, correct: bool) -> None:
        self.asked += 1
        self.right += int(correct)
