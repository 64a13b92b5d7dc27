"""The prediction game: think before the model answers.

*Guess the next token*: the rounds follow a real generation — for each generated step the
player sees the text so far, types a word or picks one of five (three of the model's
top candidates shuffled with two plausible others), and scores the model's
log-probability of the guess; then the model's choice and the guess's rank are shown.

*Guess the layer*: for a position, the block at which the logit lens first ranks the
model's final prediction first.

Scores are kept while the window is open; nothing here runs the model (the steps keep
their logits, the lens its rows).
"""

from __future__ import annotations

import random
from dataclasses import dataclass

import numpy as np

from ..gpt.tokenizer import gpt2_tokenizer, visible
from .facts import PREDICTION, Facts

CHOICES = 5


def token_facts(*token_ids: int, tokenizer=None) -> tuple[str, ...]:
    """How a token is written where the window shows it: quoted (' know') and as a chip
    or label shows it (·know)."""
    tok = tokenizer or gpt2_tokenizer()
    pieces = [tok.token_piece(int(t)) for t in token_ids]
    return tuple(text for p in pieces for text in (repr(p), visible(p)))


def round_facts(logits: np.ndarray, chosen: int, tokenizer=None) -> Facts:
    """What a next-token round hides: the predictions anywhere, and the token the
    generation took and the model's favourite wherever they are written."""
    return Facts(frozenset({PREDICTION}),
                 token_facts(chosen, int(np.argmax(logits)), tokenizer=tokenizer), "game")


def layer_facts() -> Facts:
    """A layer round hides the lens and every other prediction."""
    return Facts(frozenset({PREDICTION}), (), "game")


def guess_token(text: str, tokenizer=None) -> tuple[int, str]:
    """A typed guess as a token: the text as typed if it is one token, else with a
    leading space (a word after a word); otherwise its first token, said so."""
    tok = tokenizer or gpt2_tokenizer()
    if not text.strip():
        raise ValueError("type a word or pick one of the five")
    for candidate in (text, " " + text.strip()):
        ids = tok.encode(candidate)
        if len(ids) == 1:
            return ids[0], ""
    ids = tok.encode(" " + text.strip())
    return ids[0], f"{text.strip()!r} is {len(ids)} tokens: its first, {tok.token_piece(ids[0])!r}, counts"


def log_probabilities(logits: np.ndarray) -> np.ndarray:
    z = logits.astype(np.float64)
    z = z - z.max()
    return z - np.log(np.exp(z).sum())


@dataclass(frozen=True)
class Answer:
    guess: int
    log_prob: float  # the model's, of the guess (nats; 0 is certain)
    rank: int  # of the guess among the model's candidates (1 = its favourite)
    chosen: int  # the token the generation took
    chosen_log_prob: float
    note: str = ""  # how a typed guess became a token

    @property
    def points(self) -> float:
        """The score: the log-probability, in bits (−1: a coin flip's worth of surprise)."""
        return self.log_prob / np.log(2)


def answer(logits: np.ndarray, guess: int, chosen: int, note: str = "") -> Answer:
    lp = log_probabilities(logits)
    rank = int(np.count_nonzero(lp > lp[guess])) + 1
    return Answer(guess, float(lp[guess]), rank, chosen, float(lp[chosen]), note)


def choices(logits: np.ndarray, round_index: int, seed: int = 0) -> list[int]:
    """Five tokens to pick from: the model's top three and two plausible others (ranks
    6 to 50), in an order that does not give the favourite away."""
    order = np.argsort(-logits, kind="stable")
    rng = random.Random(seed * 1_000_003 + round_index)
    others = rng.sample([int(i) for i in order[5:50]], CHOICES - 3)
    picked = [int(i) for i in order[:3]] + others
    rng.shuffle(picked)
    return picked


@dataclass
class Score:
    rounds: int = 0
    bits: float = 0.0  # the sum of the answers' points
    model_first: int = 0  # rounds where the guess was the model's favourite

    def add(self, a: Answer) -> None:
        self.rounds += 1
        self.bits += a.points
        self.model_first += a.rank == 1

    @property
    def words(self) -> str:
        if not self.rounds:
            return "No round answered yet"  # said during round 1 too: true then
        return (f"{self.rounds} round{'s' * (self.rounds != 1)}: {self.bits / self.rounds:+.2f} "
                f"bits a round on average; the model's favourite {self.model_first} times")


def first_layer(lens_top: list[int], final: int) -> int | None:
    """The first residual read (index into the lens's rows) whose top token is the final
    prediction; None if only the output has it."""
    return next((i for i, top in enumerate(lens_top) if top == final), None)
