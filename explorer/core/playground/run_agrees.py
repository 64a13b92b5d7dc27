"""A saved run checked across its fields, and against a replay of it.

Across its fields: a file whose parts contradict each other (its prompt's text against
its ids, a step's ids against the prompt and the tokens before, a kept attention pattern
that looks ahead, logits that are not numbers) is refused in one line, as a damaged file
is; run_file.py calls it on a run every field of which already passed. Against a replay:
the first step whose token or probability departs from the record is named."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from ..gpt.node_types import Kind
from .run_checks import RunFileError
from .run_model_agrees import check_model_agrees


def check_agrees(path: Path, saved) -> None:
    _prompt(path, saved)
    _steps(path, saved, saved.passes[1:])
    for b in saved.branches:  # the shown line's steps before it parts, then its own
        _steps(path, saved, [*saved.passes[1:1 + b.at], *b.passes], f"branch {b.label!r:.60}'s ")
    for i, p in enumerate(saved.every_pass()):
        if p.next_logits is not None and np.isnan(p.next_logits).any():
            raise RunFileError(path, f"pass {i}'s logits hold NaN: not logits a token was "
                                     "drawn from")
        if p.step is None or p.whole:  # every position: a query sees no later key
            _causal(path, i, p)
    check_model_agrees(path, saved, saved.every_pass())


def _prompt(path: Path, saved) -> None:
    """The prompt's ids are its text as the tokenizer read it (cropped from the left when
    too long; an empty prompt starts from the end-of-text token), and the prompt pass's."""
    ids, tok = saved.prompt_ids, saved.tokenizer
    if saved.passes[0].ids != ids:
        raise RunFileError(path, "its prompt pass reads other tokens than its prompt_ids")
    if saved.prompt == "" and len(ids) == 1:
        return
    text = saved.prompt.encode("utf-8")
    try:
        pieces = [tok.token_bytes(i) for i in ids]
    except (KeyError, ValueError):
        raise RunFileError(path, "its prompt_ids name tokens it has no bytes for") from None
    if not (text.endswith(b"".join(pieces)) or text.endswith(b"".join(pieces[1:]))):
        raise RunFileError(path, "its prompt_ids are not its prompt's text (the tokens spell "
                                 f"{b''.join(pieces)[:40]!r}…)")


def _steps(path: Path, saved, steps: list, whose: str = "") -> None:
    """Each step reads what came before it: a step from the cache the ids so far and its
    own token; a recomputed step its context (the prompt and the tokens before it, the
    last context_length of them)."""
    so_far = list(saved.prompt_ids)
    ctx = saved.config.context_length if saved.config is not None else None
    for p in steps:
        want = so_far[-ctx:] if p.whole and ctx else so_far if p.whole else [*so_far, p.token_id]
        if p.ids != want:
            raise RunFileError(path, f"{whose}step {p.step} reads ids that are not the prompt "
                                     "and the tokens before it")
        so_far.append(p.token_id)


def _causal(path: Path, i: int, p) -> None:
    for name, view in p.views.items():
        if view.node.kind != Kind.PATTERN or view.array is None or view.array.ndim != 4:
            continue
        q, k = view.array.shape[-2:]
        ahead = np.triu(np.ones((q, k), bool), k=1 + (k - q))  # keys after each query
        if np.any(view.array[..., ahead] != 0):
            raise RunFileError(path, f"pass {i}'s {name[:60]} gives weight to later tokens: "
                                     "not a causal attention pattern")


REPLAY_TOLERANCE = 1e-3  # relative: a replayed step's probability of its token against the saved


def replay_difference(saved, replayed: list) -> str | None:
    """Where a replay of ``saved`` (its prompt pass, then one pass per saved token, each
    token forced) departs from the record: None when every step's token and its
    probability agree, else one line naming the first step that does not."""
    steps = [p for p in replayed if p.step is not None]
    if len(steps) != len(saved.tokens):
        return f"the replay made {len(steps)} steps, the run has {len(saved.tokens)}"
    for was, now in zip(saved.passes[1:], steps):
        if was.token_id != now.token_id:
            return f"step {was.step}: token {now.token_id} replayed, {was.token_id} saved"
        if was.prob is not None and now.prob is not None and \
                abs(was.prob - now.prob) > REPLAY_TOLERANCE * max(was.prob, now.prob, 1e-12):
            return (f"step {was.step}: the token {saved.tokenizer.token_piece(was.token_id)!r} had probability "
                    f"{was.prob:.4g} in the run, {now.prob:.4g} now — not the same model, "
                    "settings or interventions")
    return None
