"""What would answer an open question: the kinds of thing that give it away (tensor
shapes, the block's order, a node's values, the model's prediction) and the exact texts
(a number, a shape, a token, the words Pre-LN and Post-LN). A Learn question and a round
of the prediction game state them; the window's one cover service hides every view that
shows such a kind and every text that holds such a text until the answer. Qt-free."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

SHAPES = "shapes"  # tensor shapes and the widths they are made of
ORDER = "order"  # the block's order and its Pre-LN / Post-LN name
VALUES = "values"  # a node's values and their statistics
PREDICTION = "prediction"  # the model's next token (generated, ranked or read by the lens)
KINDS = (SHAPES, ORDER, VALUES, PREDICTION)
HIDDEN = "▒▒"  # what a masked text shows in place of a fact


def _pattern(text: str) -> str:
    """A number matches only as a whole number (128 is not in 1280, 0.128 or 1,280); any
    other text as it is written."""
    if text.isdigit():
        return rf"(?<![\d.])(?<!\d,){text}(?![\d]|[.,]\d)"
    return re.escape(text)


@dataclass(frozen=True)
class Facts:
    kinds: frozenset[str] = frozenset()
    texts: tuple[str, ...] = ()
    asker: str = ""  # the view asking: it shows the options, so it is never covered
    _regex: re.Pattern | None = field(default=None, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        unknown = set(self.kinds) - set(KINDS)
        if unknown:
            raise ValueError(f"unknown kinds of fact: {sorted(unknown)}")
        texts = sorted({t for t in self.texts if t and t.strip()}, key=len, reverse=True)
        object.__setattr__(self, "texts", tuple(texts))
        object.__setattr__(self, "kinds", frozenset(self.kinds))
        regex = re.compile("|".join(_pattern(t) for t in texts)) if texts else None
        object.__setattr__(self, "_regex", regex)

    def __bool__(self) -> bool:
        return bool(self.kinds or self.texts)

    def found(self, text: str) -> str | None:
        """The first fact ``text`` holds, or None."""
        if self._regex is None or not text:
            return None
        hit = self._regex.search(text)
        return hit.group(0) if hit else None

    def mask(self, text: str) -> str:
        """``text`` with every fact in it replaced by ▒▒."""
        if self._regex is None or not text:
            return text
        return self._regex.sub(HIDDEN, text)


NO_FACTS = Facts()
