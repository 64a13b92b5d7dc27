"""What a Learn question is made of: the question with its options, answer, explanation,
why each wrong option is wrong and what would give it away (``Facts``); the selected node
in the shown pass (``Live``); and options alike in form — numbers and shapes whose
answer lands at a random rank among them, so that no rule about the options' shape
("the largest", "the one that shares its last dimension with another") finds it more
often than chance. Qt-free."""

from __future__ import annotations

import random
from dataclasses import dataclass

from ..gpt.nodes import (FIRST_NORM, block_hook_name, block_output, input_node, layer_of,
                         node_for_hook, parse_hook)
from .facts import ORDER, SHAPES, VALUES, Facts

ORDINALS = ("first", "second", "third", "fourth", "fifth", "sixth", "seventh", "eighth",
            "ninth", "tenth", "eleventh", "twelfth")
NORM_WORDS = ("Pre-LN", "Post-LN")  # either one names the order


@dataclass(frozen=True)
class Question:
    text: str
    options: tuple[str, ...]
    answer: int  # index into options
    explanation: str
    why: tuple[str, ...] = ()  # per option: why it is wrong ("" for the answer)
    hides: frozenset[str] = frozenset({SHAPES, VALUES})
    gives: tuple[str, ...] = ()  # texts besides the answer that would give it away

    def check(self, choice: int) -> bool:
        return choice == self.answer

    def facts(self, asker: str = "learn") -> Facts:
        """What the window hides while the question is open: its kinds, the answer (a
        one-digit number is everywhere and tells nothing, so not that) and the texts
        that give it away."""
        answer = self.options[self.answer]
        said = () if answer.isdigit() and len(answer) == 1 else (answer,)
        return Facts(self.hides, (*said, *self.gives), asker)

    def feedback(self, choice: int) -> str:
        """What to say after ``choice``: the verdict, the explanation, and one line for
        each wrong option."""
        answer = self.options[self.answer]
        verdict = ("Right." if self.check(choice) else "Not quite:"
                   if answer in self.explanation else  # it names the answer itself
                   f"Not quite: the answer is {answer}.")
        lines = [f"{verdict} {self.explanation}"]
        lines += [f"✗ {self.options[i]}: {w}" for i, w in enumerate(self.why)
                  if w and i != self.answer]
        return "\n".join(lines)


@dataclass(frozen=True)
class Live:
    """The selected node in the shown pass: its captured view and its neighbours'."""
    name: str
    views: dict  # hook name -> core.capture.NodeView
    norm_position: str
    norm_eps: float = 1e-5  # the model's norms' eps (GPT-2's, Llama 2's; Qwen3's is 1e-6)

    @property
    def view(self):
        return self.views[self.name]

    @property
    def node(self):
        return node_for_hook(self.name, self.norm_position)  # that order's words

    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(self.view.shape)

    def near(self, key: str, layer: int | None = None):
        """The view of another node (``key``) of this block, of block ``layer``, or of the
        model."""
        layer = layer_of(self.name) if layer is None else layer
        return self.views.get(key if layer is None else block_hook_name(layer, key))

    def input(self):
        source = input_node(self.name, self.norm_position)
        return self.views.get(source) if source else None

    def width(self, key: str, layer: int | None = None) -> int | None:
        view = self.near(key, layer)
        return None if view is None else int(view.shape[-1])


def live_layer(live: Live) -> int:
    """The block a question is about: the node's own, or — at a block's input (the
    embeddings, a block's output) — the block that input enters."""
    layer = layer_of(live.name)
    if layer is None:
        return 0
    if parse_hook(live.name)[1] == block_output(live.norm_position) and \
            block_hook_name(layer + 1, FIRST_NORM) in live.views:
        return layer + 1
    return layer


def nth(n: int) -> str:
    """1 → "first", … 12 → "twelfth", then "13th": one way of saying it everywhere."""
    if 1 <= n <= len(ORDINALS):
        return ORDINALS[n - 1]
    suffix = "th" if 10 <= n % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
    return f"{n}{suffix}"


def choices(correct: str, distractors: list[str], rng: random.Random,
            why: dict[str, str] | None = None) -> tuple[tuple[str, ...], int, tuple[str, ...]]:
    """The options in a random order: the answer and up to three distractors."""
    options = [correct] + [d for d in dict.fromkeys(distractors) if d != correct][:3]
    rng.shuffle(options)
    why = why or {}
    return tuple(options), options.index(correct), tuple(why.get(o, "") for o in options)


def numbers_around(answer: int, meaningful: list[int], rng: random.Random,
                   count: int = 3) -> list[int]:
    """``count`` whole numbers to offer beside ``answer``: the model's own widths where
    they fit (``meaningful``), else halves, quarters and multiples of the answer. How many
    lie below the answer is drawn at random (0 to ``count``), so its rank among the
    options says nothing."""
    useful = {v for v in meaningful if v and v > 0 and v != answer}
    below = useful | {answer // 2, answer // 4, answer * 3 // 4, answer // 3}
    above = useful | {answer * 2, answer * 3, answer * 4, answer * 3 // 2}
    below = sorted(v for v in below if 0 < v < answer)
    above = sorted(v for v in above if v > answer)
    n_below = _below(len(below), len(above), count, rng)

    def pick(pool: list[int], n: int) -> list[int]:
        first = [v for v in pool if v in useful]  # the model's own widths first
        rng.shuffle(first)
        rest = [v for v in pool if v not in useful]
        rng.shuffle(rest)
        return (first + rest)[:n]

    return pick(below, n_below) + pick(above, count - n_below)


def _below(below: int, above: int, count: int, rng: random.Random) -> int:
    """How many of ``count`` distractors lie below the answer: drawn evenly from the
    numbers the candidates on each side allow, so that no rank is the answer's more often
    than the candidates force."""
    feasible = [n for n in range(count + 1) if n <= below and count - n <= above]
    return rng.choice(feasible) if feasible else min(below, count)


def spread(right: float, candidates: dict[str, tuple[float, str]], rng: random.Random,
           count: int = 3) -> dict[str, str]:
    """``count`` distractors from ``candidates`` (text -> (its value, why it is wrong)):
    how many lie below the answer ``right`` is drawn evenly (``_below``), each side's at
    random, so the answer's rank among the options says nothing. Text -> why."""
    below = [t for t, (v, _) in candidates.items() if v < right]
    above = [t for t, (v, _) in candidates.items() if v > right]
    n = _below(len(below), len(above), count, rng)
    picked = rng.sample(below, n) + rng.sample(above, min(count - n, len(above)))
    return {t: candidates[t][1] for t in picked}


__all__ = ["ORDER", "SHAPES", "VALUES", "NORM_WORDS", "Question", "Live", "live_layer", "nth", "spread",
           "choices", "numbers_around"]
