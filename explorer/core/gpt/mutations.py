"""The mutations the divergence finder makes of a model, by name, with what each changes:
one table for the finder, the Divergence view, the command line's help and the families,
which say which of them their block has (``BlockFamily.mutations``). Torch-free, so that
building the parser stays quick."""

from __future__ import annotations

import re
from enum import StrEnum


class Mutation(StrEnum):
    """One change of a model, made in one block (``divergence.mutate``); ``ff-N``, the
    second Linear sized N for any width, is written as its name (``FF_WIDTH``)."""
    NO_SHORTCUT = "no-shortcut"
    POST_LN = "post-ln"
    RELU = "relu"
    NO_ACTIVATION = "no-activation"
    FF_1024 = "ff-1024"
    UNBIASED_LN = "unbiased-ln"
    EPS = "eps"
    DROPOUT_ON = "dropout-on"
    FF_INNER = "ff-inner"
    NO_NORM2 = "no-norm2"
    WRONG_SHORTCUT2 = "wrong-shortcut2"


MUTATIONS = {
    Mutation.NO_SHORTCUT: "remove the first shortcut of the block (add1 returns only the "
                          "attention branch)",
    Mutation.POST_LN: "move the norms after the adds (Post-LN), same weights",
    Mutation.RELU: "GELU -> ReLU in the block's feed-forward",
    Mutation.NO_ACTIVATION: "GELU -> identity in the block's feed-forward (its two Linears "
                            "collapse into one linear map)",
    Mutation.FF_1024: "second feed-forward Linear sized 4*emb -> 1024 (the seeds' exercise; "
                      "ff-N for any width N)",
    Mutation.UNBIASED_LN: "norm1 with unbiased variance (divide by n-1)",
    Mutation.EPS: "norm1 with eps 1e-2 instead of 1e-5",
    Mutation.DROPOUT_ON: "dropout left on (the model in training mode)",
    # the chapter's "the second half of the block is wrong: where do you look first?"
    Mutation.FF_INNER: "Linear 1 sized emb -> 2*emb while Linear 2 still reads 4*emb (inner "
                       "sizes that do not match)",
    Mutation.NO_NORM2: "LayerNorm 2 removed (the feed-forward half reads an unnormalised "
                       "stream)",
    Mutation.WRONG_SHORTCUT2: "the second add fed the block's input as its shortcut, not the "
                              "first half's output",
}
SECOND_HALF = (Mutation.FF_INNER, Mutation.NO_NORM2, Mutation.WRONG_SHORTCUT2)  # the chapter's
# the exercises every block with two shortcuts has, whatever its norms and feed-forward
SHORTCUTS = (Mutation.NO_SHORTCUT, Mutation.WRONG_SHORTCUT2)


FF_WIDTH = re.compile(r"ff-(\d{1,6})$")  # ff-N: the second Linear gives N values per token


def known(name: str) -> bool:
    return name in MUTATIONS or FF_WIDTH.match(name) is not None
