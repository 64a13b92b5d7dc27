"""A saved run checked against its own model config and the numbers it kept: each pass's
probability is its token's under the logits it keeps and its prompt pass's token their
top one; a pass that keeps attention's steps of a block keeps the steps its config
computes (q/k norms with ``qk_norm``, none without); kept queries and keys and their
rotation turn by the config's θ, scaling and head size. run_agrees.py calls it once
every field has passed."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch

from ..gpt.config import GPTConfig
from ..gpt.family import Role
from ..gpt.nodes import (all_hook_names, input_node, inside_attention, layer_of, order_of,
                         parse_hook, role)
from ..gpt.rope import apply_rope, layer_rotary
from .run_checks import RunFileError
from .run_tokens import RecordedTokenizer

PROB_TOLERANCE = 1e-3  # relative: a saved probability against its own logits' softmax
TIE = 1e-9  # probabilities closer than this are one (float32's softmax and ours)
ROPE_TOLERANCE = 1e-2  # relative to the largest value: a kept rotation may be float16


def check_model_agrees(path: Path, saved, passes: list) -> None:
    cfg = saved.config
    if cfg is not None and not isinstance(saved.tokenizer, RecordedTokenizer):
        _intervention_prompts(path, saved.interventions, saved.tokenizer, cfg)
    known = all_hook_names(cfg, include_pattern=True, inside=True, experts=True) \
        if cfg is not None else []
    for i, p in enumerate(passes):
        _probabilities(path, i, p)
        if cfg is not None:
            _attention_steps(path, i, p, cfg, known)
            _rotation(path, i, p, cfg)


def _intervention_prompts(path: Path, interventions: list[dict], tokenizer,
                          cfg: GPTConfig) -> None:
    """An intervention's prompts (a patch's, a steering vector's two) fit the saved
    model's context: the replay runs the model on them. (A run of a vocabulary of its
    own keeps no tokenizer that reads text: its replay says it.)"""
    for i, item in enumerate(interventions):
        for key in ("prompt", "prompt_b"):
            text = item.get(key)
            if not isinstance(text, str) or not text:
                continue
            try:
                count = len(tokenizer.encode(text))
            except ValueError as exc:
                raise RunFileError(path, f"intervention {i + 1}'s {key}: {exc}"[:300]) from None
            if count > cfg.context_length:
                raise RunFileError(path, f"intervention {i + 1}'s {key} has {count:,} tokens; "
                                         f"the saved model reads at most {cfg.context_length:,}")


def _probabilities(path: Path, i: int, p) -> None:
    """``prob`` and ``top_probs`` are the softmax of the logits the pass keeps; the
    prompt pass's token (the one it predicts) is their most probable one."""
    if p.token_id is None:
        return
    if p.next_logits is None:  # only its top tokens to hold it to
        probs = dict(zip(p.top_ids, p.top_probs))
        if p.prob is not None and p.token_id in probs and not _close(probs[p.token_id], p.prob):
            raise RunFileError(path, f"pass {i}'s probability {p.prob:.4g} is not the one its "
                                     "top tokens give its token")
        best = max(probs.values(), default=None)
    else:
        z = np.asarray(p.next_logits, np.float64)
        every = np.exp(z - z.max())
        every /= every.sum()
        if p.prob is not None and not _close(every[p.token_id], p.prob):
            raise RunFileError(path, f"pass {i}'s probability {p.prob:.4g} is not its token's "
                                     f"under its own logits ({every[p.token_id]:.4g})")
        top = every[list(p.top_ids)]
        if not all(_close(a, b) for a, b in zip(top, p.top_probs)) or len(top) and (
                _above(np.sort(every)[-len(top)], top.min())
                or any(_above(b, a) for a, b in zip(top, top[1:]))):  # most probable first
            raise RunFileError(path, f"pass {i}'s top tokens are not the most probable under "
                                     "its own logits")
        best = float(every.max())
    if p.step is None and best is not None and p.prob is not None and not _close(p.prob, best):
        raise RunFileError(path, f"its prompt pass predicts token {p.token_id}, not the most "
                                 "probable one")


def _close(a: float, b: float) -> bool:
    return abs(a - b) <= PROB_TOLERANCE * max(abs(a), abs(b)) + TIE


def _above(a: float, b: float) -> bool:
    """``a`` more probable than ``b`` beyond the tolerance (float32's tiny probabilities,
    which its softmax rounds to 0, are ties)."""
    return a > b * (1 + PROB_TOLERANCE) + TIE


def _attention_steps(path: Path, i: int, p, cfg: GPTConfig, known: list[str]) -> None:
    """A block whose attention steps the pass keeps keeps all of them and no other
    (``known``: every node of the saved model)."""
    have = {n for n in p.views if inside_attention(n)}
    if not have:
        return
    strange = next((n for n in p.views if n not in known), None)
    if strange is not None:
        raise RunFileError(path, f"pass {i} keeps {strange[:60]!r}, a node its saved model "
                                 f"(qk_norm {cfg.qk_norm}) does not compute")
    want = {n for n in known if inside_attention(n)}
    for layer in sorted({layer_of(n) for n in have}):
        missing = sorted(n for n in want - have if layer_of(n) == layer)
        if missing:
            raise RunFileError(path, f"pass {i} keeps attention's steps of block {layer} "
                                     f"without {missing[0][:60]!r}, which its saved model "
                                     f"(qk_norm {cfg.qk_norm}) computes")


def _rotation(path: Path, i: int, p, cfg: GPTConfig) -> None:
    """Each kept rotated query or key is its kept input turned by the config's angles
    at its positions (the last of the ids the pass read)."""
    order = order_of(cfg)
    rotated = {role(order, Role.QUERIES_ROPE), role(order, Role.KEYS_ROPE)} - {None}
    for name, view in p.views.items():
        layer, key = parse_hook(name)
        source = p.views.get(input_node(name, order) or "") if key in rotated else None
        if view.array is None or source is None or source.array is None or \
                source.array.shape != view.array.shape or view.array.ndim != 4:
            continue
        x = torch.from_numpy(np.asarray(source.array, np.float32))
        stop = len(p.ids) if p.step is not None and not p.whole else x.shape[-2]
        cos, sin = layer_rotary(cfg, layer)(stop - x.shape[-2], stop, torch.device("cpu"))
        want = apply_rope(x, cos, sin).numpy()
        scale = max(float(np.abs(want).max()), 1e-6)
        if np.abs(want - np.asarray(view.array, np.float32)).max() > ROPE_TOLERANCE * scale:
            raise RunFileError(path, f"pass {i}'s {name[:60]} is not its input turned by its "
                                     f"saved model's rotation (θ {cfg.rope_base_of(layer):g}, "
                                     f"head size {cfg.head_dim})")

