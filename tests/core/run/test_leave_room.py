"""A prompt that fills the context: without room every later token recomputes the whole
window (and a notice says so); with room the prompt is cropped so the KV cache serves
every step."""

import pytest

from explorer.core.gpt.config import preset
from explorer.core.run.generation import GenerationSettings, prepare_prompt
from explorer.core.gpt.build import build_model
from explorer.core.run.passes import Completed, prompt_then_generate

CTX = 64  # the tiny preset's context


def test_prepare_prompt_crops_for_the_new_tokens_and_says_why():
    ids = list(range(1, 71))  # 70 tokens, context 64
    kept, notices = prepare_prompt(ids, CTX, new_tokens=10, leave_room=True)
    assert kept == ids[-54:] and len(notices) == 1
    assert notices[0] == "the first 16 were dropped to leave room for 10 new tokens (context 64)"
    kept, notices = prepare_prompt(ids, CTX, new_tokens=10)
    assert kept == ids[-64:] and len(notices) == 2
    assert notices[0] == "the first 6 were dropped (context 64)"
    assert notices[1] == ("the context is full after 0 new tokens: later ones recompute all 64 "
                          "positions without the KV cache (slow)")
    kept, notices = prepare_prompt(ids[:60], CTX, new_tokens=10)
    assert kept == ids[:60] and "full after 4 new tokens" in notices[0]
    assert prepare_prompt(ids[:50], CTX, new_tokens=10) == (ids[:50], [])
    assert prepare_prompt(ids[:50], CTX, new_tokens=10, leave_room=True) == (ids[:50], [])
    # more new tokens than the context: one prompt token stays
    kept, _ = prepare_prompt(ids, CTX, new_tokens=500, leave_room=True)
    assert kept == ids[-1:]


@pytest.mark.parametrize("leave_room, forwards", [(True, [54] + [1] * 9),
                                                  (False, [64] + [64] * 9)])
def test_with_room_every_step_uses_the_cache(leave_room, forwards):
    model = build_model(preset("tiny"), seed=0)
    calls = []
    handle = model.register_forward_pre_hook(lambda m, inputs: calls.append(inputs[0].shape[1]))
    reports = []
    settings = GenerationSettings(max_new_tokens=10, stop_at_eot=False, leave_room=leave_room)
    prompt_then_generate(model, list(range(1, 71)), settings, reports.append)
    handle.remove()
    assert calls == forwards  # the 10th token needs no forward; without room: the whole
    #                           window for every later token
    prompt = reports[0]
    assert len(prompt.ids) == forwards[0]
    assert any("dropped" in n for n in prompt.notices)
    assert any("context is full" in n for n in prompt.notices) is not leave_room
    steps = [r for r in reports[1:] if not isinstance(r, Completed)]
    assert len(steps) == 10
