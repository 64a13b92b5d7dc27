"""The kinds of intervention (``Change``), what each does in words and the fields each
reads: the words of interventions.py, without torch, for the graph's marks and menu."""

from __future__ import annotations

from enum import Enum


class Change(str, Enum):
    """What an intervention does to its node (its ``kind``, as written in a JSON file)."""

    ZERO = "zero"
    MEAN = "mean"
    SCALE = "scale"
    STEER = "steer"
    PATCH = "patch"
    HEADS = "heads"
    NO_SHORTCUT = "no-shortcut"
    ACTIVATION = "activation"
    FORCE = "force-expert"
    BAN = "ban-experts"

    __str__ = str.__str__  # the word itself wherever it is written or formatted
    __format__ = str.__format__


KINDS = {
    Change.ZERO: "set the node's output to 0",
    Change.MEAN: "replace it by its mean over the prompt's tokens (mean-ablation)",
    Change.SCALE: "multiply it by k",
    Change.STEER: "add k × (mean activation on prompt A − on prompt B) at every position",
    Change.PATCH: "replace it by its value on another prompt, at the chosen positions",
    Change.HEADS: "knock out attention heads (their share of the output before out_proj)",
    Change.NO_SHORTCUT: "remove this add's shortcut: the add returns only its branch",
    Change.ACTIVATION: "swap the GELU (or SiLU) for relu or identity",
    Change.FORCE: "send the token to this one expert alone, with weight 1 (a mixture's routing)",
    Change.BAN: "the router never picks these experts (their logits set to −∞): the token "
                "goes to its next best",
}
FUNCTIONS = ("relu", "identity")
# the fields each kind reads besides its node and positions: any other is refused, not ignored
FIELDS = {Change.ZERO: (), Change.MEAN: (), Change.SCALE: ("k",),
          Change.STEER: ("k", "prompt", "prompt_b", "vector"), Change.PATCH: ("prompt",),
          Change.HEADS: ("heads",), Change.NO_SHORTCUT: (), Change.ACTIVATION: ("function",),
          Change.FORCE: ("experts",), Change.BAN: ("experts",)}
