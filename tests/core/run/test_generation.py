import pytest
import torch

from explorer.core.gpt.config import preset
from explorer.core.run.generation import (GenerationSettings, generate, generate_stream,
                                          prepare_prompt)
from explorer.core.gpt.build import build_model
from explorer.core.gpt.tokenizer import END_OF_TEXT_ID, decode
from tests.book_model import generate_text_simple


@pytest.fixture(scope="module")
def tiny():
    # A larger init scale than GPT-2's so greedy decoding does not collapse to one token.
    model = build_model(preset("tiny"), seed=7)
    with torch.no_grad():
        for p in model.parameters():
            if p.dim() == 2:
                p.mul_(25)
    return model


def test_greedy_matches_book_loop_of_full_forwards(tiny):
    prompt = [6109, 3626, 6100, 345]
    result = generate(tiny, prompt, GenerationSettings(max_new_tokens=30, stop_at_eot=False))
    ref = generate_text_simple(tiny, torch.tensor([prompt]), 30, tiny.cfg.context_length)
    assert result.new_ids == ref[0, len(prompt):].tolist()
    assert len(set(result.new_ids)) > 3  # a real test: the sequence is not constant


def test_greedy_past_the_context_slides_like_the_book(tiny):
    ctx = tiny.cfg.context_length  # 64
    prompt = list(range(100, 150))
    result = generate(tiny, prompt, GenerationSettings(max_new_tokens=40, stop_at_eot=False))
    ref = generate_text_simple(tiny, torch.tensor([prompt]), 40, ctx)
    assert result.new_ids == ref[0, len(prompt):].tolist()
    assert len(prompt) + 40 > ctx


def test_steps_carry_ids_text_and_probabilities(tiny):
    stream = generate_stream(tiny, [15496, 995], GenerationSettings(max_new_tokens=5, show_top_k=4,
                                                                    stop_at_eot=False))
    steps = list(stream)
    assert [s.index for s in steps] == [0, 1, 2, 3, 4]
    assert [s.position for s in steps] == [2, 3, 4, 5, 6]
    for s in steps:
        assert s.top_ids[0] == s.token_id  # greedy picks the most likely
        assert s.prob == pytest.approx(s.top_probs[0])
        assert len(s.top_ids) == 4 and list(s.top_probs) == sorted(s.top_probs, reverse=True)
        assert 0 < sum(s.top_probs) <= 1.0 + 1e-6
    assert "".join(s.text for s in steps) == decode([s.token_id for s in steps])
    assert steps[-1].elapsed >= steps[0].elapsed > 0
    assert stream.stopped_by == "max_new_tokens" and stream.prompt_seconds > 0


def test_same_seed_same_sample_and_other_seed_differs(tiny):
    def run(seed):
        s = GenerationSettings(max_new_tokens=25, greedy=False, temperature=1.5, seed=seed,
                               stop_at_eot=False)
        return generate(tiny, [1, 2, 3], s).new_ids
    assert run(11) == run(11)
    assert run(11) != run(12)


def test_top_k_one_and_tiny_top_p_equal_greedy(tiny):
    greedy = generate(tiny, [5, 6], GenerationSettings(max_new_tokens=15, stop_at_eot=False)).new_ids
    k1 = GenerationSettings(max_new_tokens=15, greedy=False, top_k=1, seed=3, stop_at_eot=False)
    p0 = GenerationSettings(max_new_tokens=15, greedy=False, top_p=1e-6, seed=3, stop_at_eot=False)
    assert generate(tiny, [5, 6], k1).new_ids == greedy
    assert generate(tiny, [5, 6], p0).new_ids == greedy


def test_top_k_restricts_sampling_to_the_model_top_k(tiny):
    s = GenerationSettings(max_new_tokens=30, greedy=False, temperature=5.0, top_k=3, seed=0,
                           show_top_k=3, stop_at_eot=False)
    for step in generate_stream(tiny, [9, 10, 11], s):
        assert step.token_id in step.top_ids


def test_stops_at_end_of_text():
    model = build_model(preset("tiny", tie_weights=False), seed=1)
    with torch.no_grad():  # final_norm outputs all ones; only <|endoftext|>'s row sees them
        model.final_norm.scale.zero_()
        model.final_norm.shift.fill_(1.0)
        model.out_head.weight.zero_()
        model.out_head.weight[END_OF_TEXT_ID] = 1.0
    steps = list(generate_stream(model, [1, 2], GenerationSettings(max_new_tokens=10)))
    assert len(steps) == 1 and steps[0].is_eot and steps[0].token_id == END_OF_TEXT_ID
    no_stop = GenerationSettings(max_new_tokens=10, stop_at_eot=False)
    assert len(list(generate_stream(model, [1, 2], no_stop))) == 10


def test_closing_stops_before_the_next_token(tiny):
    stream = generate_stream(tiny, [1, 2], GenerationSettings(max_new_tokens=50))
    calls = []
    handle = tiny.register_forward_hook(lambda m, i, o: calls.append(1))
    try:
        first = next(stream)
        assert first.index == 0 and len(calls) == 1  # the prompt pass only
        stream.close()
        with pytest.raises(StopIteration):
            next(stream)
    finally:
        handle.remove()
    assert len(calls) == 1 and stream.stopped_by == "closed"


def test_empty_prompt_is_an_error_unless_asked_to_start_from_eot(tiny):
    with pytest.raises(ValueError, match="prompt is empty"):
        generate_stream(tiny, [])
    stream = generate_stream(tiny, [], GenerationSettings(max_new_tokens=2), start_with_eot=True)
    assert stream.prompt_ids == [END_OF_TEXT_ID] and stream.notices


def test_long_prompt_is_cropped_from_the_left_with_a_notice():
    ids, notices = prepare_prompt(list(range(1030)), 1024)
    assert ids == list(range(6, 1030))
    assert "first 6 were dropped" in notices[0]


@pytest.mark.parametrize("settings,message", [
    (GenerationSettings(max_new_tokens=0), "max new tokens"),
    (GenerationSettings(greedy=False, temperature=0.0), "temperature"),
    (GenerationSettings(greedy=False, top_k=0), "top-k"),
    (GenerationSettings(greedy=False, top_k=60000), "top-k"),
    (GenerationSettings(greedy=False, top_p=1.5), "top-p"),
    (GenerationSettings(greedy=False, top_p=0.0), "top-p"),
    # greedy runs keep their sampling settings too (shown, saved in a run file)
    (GenerationSettings(greedy=True, temperature="hot"), "temperature must be a number"),
    (GenerationSettings(greedy=True, top_k=1e25), "top-k"),
    (GenerationSettings(greedy=True, seed="abc"), "the sampling seed"),
    (GenerationSettings(greedy=True, seed=-5), "the sampling seed"),
    (GenerationSettings(greedy="no"), "greedy must be true or false, got 'no'"),
    (GenerationSettings(stop_at_eot=[1, 2]), "stop_at_eot must be true or false"),
])
def test_invalid_settings_are_rejected(tiny, settings, message):
    with pytest.raises(ValueError, match=message):
        generate_stream(tiny, [1], settings)
