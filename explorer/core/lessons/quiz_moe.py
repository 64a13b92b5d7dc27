"""Learn's question on a mixture of experts, answered by the pass's own routing: how many
experts run for each token (the top k of the router's softmax, every other expert 0)."""

from __future__ import annotations

import random

import numpy as np

from .facts import VALUES
from .question import Live, Question, choices, numbers_around


def experts_question(live: Live, rng: random.Random) -> Question:
    """How many experts a token of this block runs: the non-zero weights of its row."""
    weights = np.asarray(live.view.array, dtype=np.float64).reshape(-1, live.shape[-1])
    n, k = weights.shape[1], int((weights[-1] != 0).sum())
    roles = {n: f"all {n}: a dense feed-forward runs everything, a mixture only the top k",
             1: "one expert a token is Switch Transformer's top-1; this router keeps more",
             n - k: f"the {n - k} experts that do not run for the token (their weight is 0)"}
    offered = numbers_around(k, list(roles), rng)
    why_not = {str(v): roles.get(v, f"the token's row has {k} weights that are not 0, not {v}")
               for v in offered}
    options, answer, reasons = choices(str(k), [str(v) for v in offered], rng, why_not)
    chosen = np.flatnonzero(weights[-1])
    said = ", ".join(f"expert {e} ({weights[-1, e]:.3g})" for e in chosen)
    return Question(f"How many of the {n} experts run for each token in {live.node.label} "
                    f"({live.name})?", options, answer,
                    f"{k}: the router keeps the {k} largest of its softmax and sets every other "
                    f"expert's weight to 0. The last token here went to {said}; its output is "
                    "their outputs weighted by these numbers.", reasons, frozenset({VALUES}))


__all__ = ["experts_question"]
