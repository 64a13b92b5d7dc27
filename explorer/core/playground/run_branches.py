"""A saved run's other lines: the run and the branches made from it (right-click a
candidate ▸ Continue with this token) besides the one shown when it was saved. The file's
passes are the shown line's; each other line is kept as where it parts from the shown
one (``at``: its first own step) and its own passes from there, so a reopened run has
every branch to compare, each named as it was (version 3 of the format)."""

from __future__ import annotations

from dataclasses import dataclass

from ..run.passes import Pass
from .run_checks import RunFileError

MAX_BRANCHES = 64  # lines besides the shown one


@dataclass
class SavedBranch:
    label: str
    at: int  # its first own step: before it, the shown line's steps
    passes: list[Pass]  # its own steps, at, at + 1, …


def lines_of(branches: list[tuple[str, list[Pass]]], shown: int,
             parting) -> list[SavedBranch]:
    """Every line but the shown one, by where it parts from it (``parting(a, b)``: the
    first step where two lines' passes differ); a line that never parts adds nothing."""
    mine = branches[shown][1]
    out = []
    for i, (label, steps) in enumerate(branches):
        at = parting(steps, mine)
        if i != shown and at is None and len(steps) > len(mine):
            at = len(mine)  # the shown line is its start: its steps after that
        if i != shown and at is not None and steps[at:]:
            out.append(SavedBranch(label, at, list(steps[at:])))
    return out


def branch_entries(run: dict) -> list[dict]:
    """The description's branches, checked for form: a label, where it parts, how many
    passes of the list are its own."""
    entries = run.get("branches", [])
    if not isinstance(entries, list) or len(entries) > MAX_BRANCHES or not all(
            isinstance(e, dict) and set(e) == {"label", "at", "passes"} and
            isinstance(e["label"], str) and len(e["label"]) <= 200 and
            all(isinstance(e[k], int) and not isinstance(e[k], bool) for k in ("at", "passes"))
            for e in entries):
        raise TypeError(f"branches must be at most {MAX_BRANCHES} objects of a label, the "
                        "step where it parts and its number of passes")
    return entries


def split_steps(path, entries: list[dict], steps: list, most: int) -> int:
    """How many of the list's passes are the shown line's (its prompt pass, then steps 0,
    1, …); each branch's follow in turn, numbered from the step where it parts."""
    own = len(steps) - sum(e["passes"] for e in entries)
    if not 1 <= own <= most:
        raise RunFileError(path, f"{own:,} passes for the run shown; a run has 1 to {most:,}")
    if steps[:own] != [None, *range(own - 1)]:  # the prompt's pass, then steps 0, 1, …
        raise RunFileError(path, "its passes are not the prompt's then steps 0, 1, 2, … in "
                                 "order")
    start = own
    for n, e in enumerate(entries):
        if not 0 <= e["at"] <= own - 1 or not 1 <= e["passes"] <= most:
            raise RunFileError(path, f"branch {n + 1} parts at step {e['at']} with "
                                     f"{e['passes']} passes; the run shown has {own - 1} steps")
        if steps[start:start + e["passes"]] != list(range(e["at"], e["at"] + e["passes"])):
            raise RunFileError(path, f"branch {n + 1}'s passes are not steps {e['at']}, "
                                     f"{e['at'] + 1}, … in order")
        start += e["passes"]
    return own


def saved_branches(run: dict, entries: list[dict], passes: list[Pass]) -> list[SavedBranch]:
    """The branches, each with its passes (those after the shown line's, in turn)."""
    out, start = [], 0
    for e in entries:
        out.append(SavedBranch(e["label"], e["at"], passes[start:start + e["passes"]]))
        start += e["passes"]
    return out


def shown_line(run: dict, branches: int) -> tuple[str, int]:
    """The shown line's name and its place among all ``branches`` + 1 lines."""
    label, shown = run.get("label"), run.get("shown")
    if not isinstance(label, str) or len(label) > 200 or not isinstance(shown, int) or \
            isinstance(shown, bool) or not 0 <= shown <= branches:
        raise TypeError(f"label must be text and shown a place among the {branches + 1} lines")
    return label, shown
