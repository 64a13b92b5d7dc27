"""Where a block's norms sit, as one enum with its words (no torch): the norm positions
a family may have, each with its formula and who uses it. core/gpt/placements.py makes a
family's node table for each."""

from __future__ import annotations

from enum import StrEnum


class NormPosition(StrEnum):
    """Where a block's norms sit (a family says which it has): before attention and the
    feed-forward (GPT-2's, Llama's Pre-LN), after each add (the 2017 Transformer's
    Post-LN), inside each branch after its sublayer (OLMo 2 and 3), on both sides of each
    sublayer (Gemma 2 and 3, Peri-LN), one norm feeding both sublayers side by side (GPT-J,
    PaLM, Cohere), or no norm at all: Pre-LN's places taken by Dynamic Tanh (DyT)."""
    PRE = "pre"
    POST = "post"
    BRANCH = "branch"
    PERI = "peri"
    PARALLEL = "parallel"
    DYT = "dyt"

    @property
    def title(self) -> str:
        """'Pre-LN', 'Post-LN', …: the placement in the words the literature uses."""
        return _PLACEMENT_WORDS[self][0]

    @property
    def formula(self) -> str:
        """One sublayer ``f`` of a block in this placement: 'x + f(norm(x))'."""
        return _PLACEMENT_WORDS[self][1]

    @property
    def explained(self) -> str:
        """The placement in one line: where the norm is, and who puts it there."""
        return _PLACEMENT_WORDS[self][2]

    @property
    def sums_branches(self) -> bool:
        """Whether the stream leaving a block is its input plus what each branch added
        (every placement but Post-LN, whose norms rescale the sum itself)."""
        return self != NormPosition.POST


_PLACEMENT_WORDS = {
    NormPosition.PRE: ("Pre-LN", "x + f(norm(x))",
                       "the norm before each sublayer, on its branch (GPT-2, Llama, Qwen)"),
    NormPosition.POST: ("Post-LN", "norm(x + f(x))",
                        "the norm after each add, on the stream itself (the 2017 Transformer, BERT)"),
    NormPosition.BRANCH: ("Branch norm", "x + norm(f(x))",
                          "the norm after each sublayer, inside its branch, none before it (OLMo 2, OLMo 3)"),
    NormPosition.PERI: ("Peri-LN", "x + norm_out(f(norm_in(x)))",
                        "a norm on both sides of each sublayer, inside its branch (Gemma 2, Gemma 3)"),
    NormPosition.PARALLEL: ("Parallel", "x + att(norm(x)) + ff(norm(x))",
                            "one norm, read by attention and the feed-forward side by side (GPT-J, PaLM, Cohere)"),
    NormPosition.DYT: ("DyT", "x + f(dyt(x)), dyt(x) = γ·tanh(αx) + β",
                       "no norm: Pre-LN's places taken by Dynamic Tanh, an element-wise squashing (Zhu et al. 2025)"),
}
