"""Property-based tests over hostile prompts: arbitrary Unicode, control characters,
emoji, very long text and the literal <|endoftext|>."""

import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from explorer.core.run.capture import Capture
from explorer.core.gpt.config import preset
from explorer.core.run.generation import GenerationSettings, generate_stream, prepare_prompt
from explorer.core.gpt.build import build_model
from explorer.core.gpt.tokenizer import END_OF_TEXT, decode, encode

MODEL = build_model(preset("tiny"), seed=0)
TEXT = st.text(alphabet=st.characters(codec="utf-8"), max_size=300) | st.sampled_from(
    ["", END_OF_TEXT, "a" + END_OF_TEXT + "b", "\x00\x01\x1b[31m", "🦙🦙🦙", "\u202e\ufeff", "\r\n\t"])


@settings(max_examples=150, deadline=None)
@given(TEXT)
def test_tokenize_decode_round_trips(text):
    assert decode(encode(text)) == text
    assert decode(encode(text, allow_special=False)) == text


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(TEXT)
def test_generation_and_capture_never_crash(text):
    ids = encode(text)
    if not ids:
        with pytest.raises(ValueError, match="prompt is empty"):
            generate_stream(MODEL, ids)
        return
    stream = generate_stream(MODEL, ids, GenerationSettings(max_new_tokens=2, capture_steps=True,
                                                            stop_at_eot=False))
    steps = list(stream)
    assert len(steps) == 2 and all(0 <= s.token_id < 50257 for s in steps)
    cropped, _ = prepare_prompt(ids, MODEL.cfg.context_length)
    with torch.inference_mode(), Capture(MODEL) as cap:
        MODEL(torch.tensor([cropped]))
    assert cap["out_head"].shape == (1, len(cropped), 50257)


def test_ten_times_the_context_is_cropped_with_a_notice():
    text = "word " * (10 * MODEL.cfg.context_length)
    ids = encode(text)
    assert len(ids) >= 10 * MODEL.cfg.context_length
    stream = generate_stream(MODEL, ids, GenerationSettings(max_new_tokens=3, stop_at_eot=False))
    assert len(stream.prompt_ids) == MODEL.cfg.context_length
    assert "dropped" in stream.notices[0]
    assert len(list(stream)) == 3
