"""The groups of a node's statistics, each computed together (``stats.NodeStats``: a
group when one of its fields is first read). No torch: the command line names the groups
it prints before anything is loaded."""

from __future__ import annotations

from enum import StrEnum


class Group(StrEnum):
    """A group of statistics computed together (``GROUPS``: its fields)."""

    MOMENTS = "moments"
    SIGNS = "signs"
    HIST = "hist"
    TOP = "top"
    NORMS = "norms"


GROUPS = {Group.MOMENTS: ("mean", "std", "min", "max", "absmax", "rms", "kurtosis", "n_nan",
                          "n_inf"),
          Group.SIGNS: ("frac_neg", "frac_zero"),
          Group.HIST: ("hist", "under", "over"),
          Group.TOP: ("top_dims", "top_values"),
          Group.NORMS: ("token_l2",)}
ALL_GROUPS = tuple(Group)
GROUP_OF = {name: group for group, names in GROUPS.items() for name in names}
MOMENTS = GROUPS[Group.MOMENTS]
DETAILS = tuple(name for name, group in GROUP_OF.items() if group is not Group.MOMENTS)
