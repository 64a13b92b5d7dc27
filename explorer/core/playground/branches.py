"""Branches: generation continued from any step with a token the user chose instead of
the one the model drew — "what if it had said ' know' here?".

The branch reuses the run's KV cache up to the branching position (``fork`` copies it, so
the run it came from keeps its own), runs the chosen token as one position, and goes on
with the same settings (and whatever interventions are applied around it). Its tokens
and logits are those of a fresh run of the branch's whole text, with one forward pass of
one token a step instead of the whole text again.
"""

from __future__ import annotations

import dataclasses
import time

import torch

from ..gpt.layers import KVCache
from ..gpt.block_model import BlockModel
from ..run.generation import GenerationSettings, Prefill, generate_stream
from ..run.steps import StepRecorder


def fork(cache: KVCache, length: int) -> KVCache:
    """A copy of the cache's first ``length`` positions; the original is untouched."""
    if not 0 <= length <= cache.length:
        raise ValueError(f"the cache holds {cache.length} positions, not {length}")
    copy = KVCache(len(cache.layers))
    for mine, theirs in zip(copy.layers, cache.layers):
        if theirs.k is not None:
            mine.k, mine.v = theirs.k.clone(), theirs.v.clone()
    copy.length = length
    return copy


def branch_stream(model: BlockModel, ids: list[int], token: int, settings: GenerationSettings,
                  cache: KVCache, capture: bool = False):
    """Generation after ``ids`` + ``token``, from ``cache`` holding ``ids``' keys and
    values (or more: it is forked at ``len(ids)``). Yields the steps after the chosen
    token; ``settings.max_new_tokens`` counts them."""
    if not 0 <= token < model.cfg.vocab_size:
        raise ValueError(f"token id {token} is outside the vocabulary of {model.cfg.vocab_size:,}")
    if len(ids) + 1 > model.cfg.context_length:
        raise ValueError("the context is full at that step: a branch needs room for its token")
    forked = fork(cache, len(ids))
    device = next(model.parameters()).device
    start = time.perf_counter()
    recorder = StepRecorder(model) if capture else None
    with torch.inference_mode():
        if recorder is not None:
            with recorder:
                logits = model(torch.tensor([[token]], device=device), cache=forked,
                               last_only=True)[0, -1]
                step = recorder.snapshot(len(ids))
        else:
            logits = model(torch.tensor([[token]], device=device), cache=forked,
                           last_only=True)[0, -1]
            step = None
    prefill = Prefill(ids=list(ids) + [token], cache=forked, logits=logits, step=step,
                      seconds=time.perf_counter() - start)
    settings = dataclasses.replace(settings, capture_steps=capture, leave_room=False)
    return generate_stream(model, list(ids) + [token], settings, prefill=prefill)
