"""Predict, then reveal: multiple-choice questions generated from the current config
and prompt — the output shape of a node, which node runs first in the block, whether a
node changes the last dimension, Pre-LN or Post-LN — with plausible distractors (as in
the seeds: (2, 3, 768), (2, 3, 3072), (2, 3, 192), (6, 768)) and an explanation.
Qt-free; the Learn view asks them and keeps the score."""

from __future__ import annotations

import random
from dataclasses import dataclass

from .config import GPTConfig
from .nodes import block_nodes, layer_of, node_for_hook


@dataclass(frozen=True)
class Question:
    text: str
    options: tuple[str, ...]
    answer: int  # index into options
    explanation: str

    def check(self, choice: int) -> bool:
        return choice == self.answer


def _shuffle(correct: str, distractors: list[str], rng: random.Random) -> tuple[tuple[str, ...], int]:
    options = [correct] + [d for d in dict.fromkeys(distractors) if d != correct][:3]
    rng.shuffle(options)
    return tuple(options), options.index(correct)


def shape_question(name: str, cfg: GPTConfig, batch: int, tokens: int, seed: int = 0) -> Question:
    node = node_for_hook(name)
    shape = node.shape(cfg, batch, tokens)
    c, h = cfg.emb_dim, cfg.hidden_dim
    if node.kind == "pattern":
        distractors = [(batch, tokens, tokens), (batch, cfg.n_heads, tokens, cfg.head_dim),
                       (batch, tokens, c)]
    elif len(shape) == 2:  # the position embedding
        distractors = [(batch, tokens, c), (tokens,), (cfg.context_length, c)]
    else:
        last = shape[-1]
        distractors = [(batch, tokens, c), (batch, tokens, h), (batch, tokens, c // 4),
                       (batch * tokens, last), (batch, tokens, cfg.vocab_size)]
    options, answer = _shuffle(str(shape), [str(d) for d in distractors], random.Random(seed))
    return Question(
        f"What shape comes out of {name} ({node.label}) for a batch of {batch} and "
        f"{tokens} tokens?", options, answer,
        f"{shape}: {node.description}")


def first_node_question(cfg: GPTConfig, seed: int = 0) -> Question:
    nodes = [n for n in block_nodes(cfg.norm_position) if n.parent is None]
    rng = random.Random(seed)
    others = [n.label for n in nodes[1:]]
    rng.shuffle(others)
    options, answer = _shuffle(nodes[0].label, others, rng)
    order = " → ".join(n.label for n in nodes)
    return Question("Which operation touches the block's input x first?", options, answer,
                    f"In this {'Pre' if cfg.norm_position == 'pre' else 'Post'}-LN block the order is {order}.")


def width_question(name: str, cfg: GPTConfig) -> Question:
    node = node_for_hook(name)
    changes = node.key in ("ff.layers.0", "ff.layers.2") or node.kind in ("logits", "pattern")
    options = ("Yes", "No")
    shape = node.shape(cfg, 1, 1)
    return Question(f"Does {name} ({node.label}) change the size of the last dimension?",
                    options, 0 if changes else 1,
                    f"Its output's last dimension is {shape[-1]}; its input's is "
                    f"{_input_width(node, cfg)}.")


def _input_width(node, cfg: GPTConfig) -> int:
    if node.key in ("ff.layers.1", "ff.layers.2"):
        return cfg.hidden_dim
    if node.kind == "embedding":
        return 1  # a token id or a position
    return cfg.emb_dim


def norm_question(cfg: GPTConfig) -> Question:
    options = ("Pre-LN (norm before attention and feed-forward)", "Post-LN (norm after each add)")
    answer = 0 if cfg.norm_position == "pre" else 1
    return Question("Is this model Pre-LN or Post-LN?", options, answer,
                    "GPT-2 is Pre-LN; the 2017 Transformer was Post-LN. Look where LayerNorm 1 "
                    "sits in the block graph.")


def question_for(name: str, cfg: GPTConfig, batch: int, tokens: int, seed: int) -> Question:
    """A question about the node just selected (the kind rotates with ``seed``)."""
    kind = seed % 4
    if kind == 1 and layer_of(name) is not None:
        return width_question(name, cfg)
    if kind == 2:
        return first_node_question(cfg, seed)
    if kind == 3:
        return norm_question(cfg)
    return shape_question(name, cfg, batch, tokens, seed)


@dataclass
class Score:
    asked: int = 0
    right: int = 0

    def record(self, correct: bool) -> None:
        self.asked += 1
        self.right += int(correct)
