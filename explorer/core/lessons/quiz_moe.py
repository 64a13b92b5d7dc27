"""Learn's question on a mixture of experts, answered by the pass's own routing: which
experts the last token runs (the top k of the router's softmax, every other expert 0)."""

from __future__ import annotations

import random

import numpy as np

from .facts import VALUES
from .question import Live, Question, choices


def experts_question(live: Live, rng: random.Random) -> Question:
    """Which experts the last token runs: the non-zero weights of its row — against the
    router's next-best, the k it scores lowest, the best alone (top-1)."""
    weights = np.asarray(live.view.array, dtype=np.float64).reshape(-1, live.shape[-1])
    row = weights[-1]
    n, k = row.size, int((row != 0).sum())
    chosen = sorted(int(e) for e in np.flatnonzero(row))
    ranked = [int(e) for e in np.argsort(-row, kind="stable")]  # its k first, the rest as 0

    def named(experts) -> str:
        experts = sorted(experts)
        return "expert " + str(experts[0]) if len(experts) == 1 else \
            "experts " + ", ".join(map(str, experts[:-1])) + " and " + str(experts[-1])

    wrong = {named(ranked[:k - 1] + [ranked[k]]) if k < n else "":
             "its weakest kept expert swapped for one the router did not keep (weight 0)",
             named(ranked[-k:]): f"the {k} experts its row gives the least, not the most",
             named(ranked[:1]): f"the strongest alone is Switch Transformer's top-1; this "
                                f"router keeps {k}",
             named(ranked[k:2 * k]) if 2 * k <= n else "": "experts the router did not keep: "
                                                           "their weight is 0"}
    wrong = {t: why for t, why in wrong.items() if t and t != named(chosen)}
    options, answer, reasons = choices(named(chosen), list(wrong), rng, wrong)
    said = ", ".join(f"expert {e} ({row[e]:.3g})" for e in chosen)
    return Question(f"Which of the {n} experts does the last token run in {live.node.label} "
                    f"({live.name})?", options, answer,
                    f"{named(chosen)}: the router keeps the {k} largest of its softmax and sets "
                    f"every other expert's weight to 0 ({said}); the token's output is their "
                    "outputs weighted by these numbers, and no other expert runs for it.",
                    reasons, frozenset({VALUES}))


__all__ = ["experts_question"]
