"""Why this token: one question, one answer. ``why_token`` reads one position of a pass
(core.attribution.reading), attributes a token's logit there (core.attribution.direct)
and builds the layer table (core.attribution.layer_table) from the same reading; the
app's Why and Layers views, the graph's colouring and ``gpt-explorer attribute`` all
show a ``Why``."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ..gpt.block_model import BlockModel
from ..gpt.tokenizer import Tokenizer, gpt2_tokenizer, tokenizer_of
from .direct import Attribution, attribute
from .layer_table import LayerRow, layer_rows
from .reading import read_position


@dataclass(frozen=True)
class Why:
    ids: tuple[int, ...]  # the tokens up to the position
    attribution: Attribution
    layers: tuple[LayerRow, ...]
    tokenizer: Tokenizer = field(default_factory=gpt2_tokenizer, compare=False, repr=False)
    interventions: int = 0  # the What if interventions the model ran with (0: the clean one)

    @property
    def position(self) -> int:
        return self.attribution.position

    @property
    def question(self) -> str:
        """"Why ' know' (not ' say') after 'I don't'?" in words."""
        a = self.attribution
        piece = self.tokenizer.token_piece
        versus = f" rather than {piece(a.versus)!r}" if a.versus is not None else ""
        return (f"{piece(a.target)!r}{versus} at position {a.position} "
                f"(after {piece(self.ids[-1])!r})")


def one_token(text: str, what: str = "--target", tokenizer=None) -> int:
    """A token given as its text (' know', with its leading space): exactly one token."""
    tok = tokenizer or gpt2_tokenizer()
    ids = tok.encode(text)
    if len(ids) != 1:
        pieces = ", ".join(repr(tok.token_piece(i)) for i in ids[:6]) or "nothing"
        raise ValueError(f"{what} {text!r} is {len(ids)} tokens ({pieces}); give one token, "
                         "with its leading space if it has one (\" know\")")
    return ids[0]


def pass_question(ids: list[int], step: int | None, chosen: int | None,
                  position: int | None = None) -> tuple[list[int], int, int | None]:
    """What "why?" asks of a pass: (the tokens, the position, the token to explain). A
    generated step: why it chose its token, at the position before it. A prompt pass:
    why the model's top token follows ``position`` (default: the last)."""
    if step is not None and chosen is not None:
        return list(ids[:-1]), len(ids) - 2, chosen
    last = len(ids) - 1
    return list(ids), last if position is None else max(0, min(position, last)), None


def why_token(model: BlockModel, ids: list[int], position: int, target: int | None = None,
              versus: int | None = None, should_stop=None, interventions: int = 0) -> Why:
    """Attribute ``target`` (default: the model's top token there) at ``position`` of
    ``ids``, and the layer table of that position; ``interventions``: how many are hooked
    into the model (said with the answer: it explains the model that ran)."""
    reading = read_position(model, ids, position, should_stop)
    vocab = min(reading.logits.shape[0], model.cfg.vocab_size)
    if target is None:
        target = int(np.argmax(reading.logits[:vocab]))
    attribution = attribute(model, reading, target, versus)
    return Why(reading.ids, attribution, tuple(layer_rows(model, reading, attribution)),
               tokenizer_of(model), interventions)


def summary_lines(why: Why, top: int = 5) -> list[str]:
    """The answer in a few lines: the logit, the biggest parts, heads and neurons."""
    a = why.attribution
    what = "logit difference" if a.versus is not None else "logit"
    n = why.interventions
    ran = f" (the model with its {n} What if intervention{'s' if n > 1 else ''})" if n else ""
    lines = [f"Why {why.question}: {what} {a.logit:.3f}{ran}",
             a.note]
    biggest = sorted(a.parts, key=lambda p: -abs(p.value))[:top]
    lines.append("Largest parts: " + "; ".join(f"{p.label} {p.value:+.3f}" for p in biggest))
    if a.exact:
        lines.append("Top heads: " + "; ".join(f"block {layer} head {head} {v:+.3f}"
                                              for layer, head, v in a.top_heads(top)))
        lines.append(f"Top {a.split}s: " + "; ".join(f"block {layer} {a.split} {n} {v:+.3f}"
                                                    for layer, n, v in a.top_neurons(top)))
    return lines
