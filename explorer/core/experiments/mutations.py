"""The mutations the divergence finder makes of a model, by name, with what each changes:
one table for the finder, the Divergence view and the command line's help (torch-free,
so that building the parser stays quick)."""

from __future__ import annotations

import re

MUTATIONS = {
    "no-shortcut": "remove the first shortcut of the block (add1 returns only the attention branch)",
    "post-ln": "move the norms after the adds (Post-LN), same weights",
    "relu": "GELU -> ReLU in the block's feed-forward",
    "no-activation": "GELU -> identity in the block's feed-forward (its two Linears collapse "
                     "into one linear map)",
    "ff-1024": "second feed-forward Linear sized 4*emb -> 1024 (the seeds' exercise; "
               "ff-N for any width N)",
    "unbiased-ln": "norm1 with unbiased variance (divide by n-1)",
    "eps": "norm1 with eps 1e-2 instead of 1e-5",
    "dropout-on": "dropout left on (the model in training mode)",
    # the chapter's "the second half of the block is wrong: where do you look first?"
    "ff-inner": "Linear 1 sized emb -> 2*emb while Linear 2 still reads 4*emb (inner sizes "
                "that do not match)",
    "no-norm2": "LayerNorm 2 removed (the feed-forward half reads an unnormalised stream)",
    "wrong-shortcut2": "the second add fed the block's input as its shortcut, not the first "
                       "half's output",
}
SECOND_HALF = ("ff-inner", "no-norm2", "wrong-shortcut2")  # the chapter's exercise


FF_WIDTH = re.compile(r"ff-(\d{1,6})$")  # ff-N: the second Linear gives N values per token


def known(name: str) -> bool:
    return name in MUTATIONS or FF_WIDTH.match(name) is not None
