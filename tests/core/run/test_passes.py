"""The captured pass and the prompt pass as generation's prefill: one forward per prompt."""

import numpy as np
import pytest
import torch

from explorer.core.run.batch import make_batch
from explorer.core.gpt.config import preset
from explorer.core.run.generation import GenerationSettings, generate_stream
from explorer.core.gpt.build import build_model
from explorer.core.run.passes import (EVERYTHING, STATISTICS, Completed, Keep, prompt_and_prefill,
                                      prompt_then_generate, run_prompt, window_keep)

IDS = [6109, 3626, 6100, 345]


@pytest.fixture
def model():
    return build_model(preset("tiny"), seed=1)


def forwards(model):
    """Count the model's forward calls and the tokens each one ran."""
    calls = []
    handle = model.register_forward_pre_hook(lambda m, inputs: calls.append(inputs[0].shape[1]))
    return calls, handle


def test_the_prompt_runs_once_and_generation_continues_from_it(model):
    calls, handle = forwards(model)
    reports = []
    reason = prompt_then_generate(model, IDS, GenerationSettings(max_new_tokens=5), reports.append)
    handle.remove()
    assert calls == [4, 1, 1, 1, 1]  # the prompt once (4 tokens), then one token per step
    assert reason == "max_new_tokens"
    prompt, completed, steps = reports[0], reports[1], reports[2:]
    assert completed == Completed(prompt) and prompt.ready  # the rest, before generating
    assert prompt.step is None and prompt.views["trf_blocks.1.add2"].array.shape == (1, 4, 32)
    assert [s.step for s in steps] == list(range(5))
    plain = list(generate_stream(model, IDS, GenerationSettings(max_new_tokens=5, capture_steps=True)))
    assert [s.token_id for s in steps] == [s.token_id for s in plain]
    assert prompt.top_ids[0] == steps[0].token_id  # the pass predicts what is generated
    for ours, theirs in zip(steps, plain):  # every node's vector, as without a prefill
        views = theirs.capture.views()
        assert set(ours.views) == set(views)
        for name, view in views.items():
            if view.array is not None:
                np.testing.assert_allclose(ours.views[name].array, view.array, atol=1e-5)


def test_a_prefill_belongs_to_its_prompt_and_is_used_once(model):
    _, prefill = prompt_and_prefill(model, IDS)
    with pytest.raises(ValueError, match="another prompt"):
        generate_stream(model, IDS[:3], GenerationSettings(), prefill=prefill)
    stream = generate_stream(model, IDS, GenerationSettings(max_new_tokens=2), prefill=prefill)
    assert len(list(stream)) == 2 and stream.prefill is None


def test_stop_between_tokens(model):
    reports = []
    reason = prompt_then_generate(model, IDS, GenerationSettings(max_new_tokens=50),
                                  reports.append, should_stop=lambda: len(reports) >= 3)
    assert reason == "stopped" and len(reports) == 3


def test_what_a_pass_keeps(model):
    every = run_prompt(model, IDS, EVERYTHING)
    assert "trf_blocks.0.att.attn_weights" in every.views and not every.ready
    every.complete()
    assert every.ready and sorted(every.gelu_shares) == [
        f"trf_blocks.{i}.ff.layers.0" for i in range(model.cfg.n_layers)]
    assert every.views["trf_blocks.0.att.attn_weights"].array.shape == (1, 4, 4, 4)
    stats = run_prompt(model, IDS, STATISTICS)
    assert all(v.array is None for v in stats.views.values())
    assert "trf_blocks.0.att.attn_weights" not in stats.views
    assert stats.views["out_head"].stats.std == pytest.approx(every.views["out_head"].stats.std)
    with torch.inference_mode():
        logits = model(torch.tensor([IDS]))[0, -1]
    assert stats.top_ids[0] == int(logits.argmax())
    one = run_prompt(model, IDS, Keep(layer=1, tensors="trf_blocks.1.add2", attention=False))
    assert set(n for n, v in one.views.items() if v.array is not None) == {"trf_blocks.1.add2"}
    assert all(n.startswith("trf_blocks.1.") for n in one.views)
    small = run_prompt(model, IDS, Keep(budget_bytes=4 * 4 * 32 * 10))
    assert small.dropped and "over the memory budget" in small.notices[-1]


@pytest.mark.parametrize("name, details", [
    ("tiny", {"trf_blocks.1.norm1", "trf_blocks.1.ff.layers.0"}),
    ("llama-tiny", {"trf_blocks.1.norm1", "trf_blocks.1.ff.fc1"}),
])
def test_the_windows_pass_has_the_shown_blocks_pattern_and_the_first_views_details(name, details):
    model = build_model(preset(name), seed=1)
    shown = window_keep(model.cfg, 1, "trf_blocks.1.norm1")
    result = run_prompt(model, IDS, shown)
    patterns = {n for n in result.views if n.endswith(".att.attn_weights")}
    assert patterns == {"trf_blocks.1.att.attn_weights"}
    assert all(v.array is not None for v in result.views.values())
    assert all(v.stats.moments_ready for v in result.views.values())  # computed in the pass
    assert {n for n, v in result.views.items() if v.stats.ready} == details
    opened = run_prompt(model, IDS, window_keep(model.cfg, 1, attention_opened=True, later=False))
    steps = {n for n in opened.views if n.endswith((".att.attn_scores", ".att.queries"))}
    assert opened.ready and steps == {"trf_blocks.1.att.attn_scores", "trf_blocks.1.att.queries"}


def test_a_batch_pass_and_a_failing_model(model):
    batch = make_batch(["Every effort moves you", "Hello"], model.cfg.context_length)
    run = run_prompt(model, batch)
    assert run.batch is batch and run.views["trf_blocks.0.ff.layers.1"].array.shape == (2, 4, 128)
    assert run.ids == IDS
    model.trf_blocks[1].ff.layers[2] = torch.nn.Linear(128, 16)  # shapes stop adding up
    with pytest.raises(RuntimeError):
        run_prompt(model, IDS)
    partial = run_prompt(model, IDS, tolerate_errors=True)
    assert partial.error and "trf_blocks.0.add2" in partial.views
    assert "trf_blocks.1.add2" not in partial.views


def test_a_prompt_outside_a_small_vocabulary_is_one_clear_error():
    small = build_model(preset("tiny", vocab_size=512), seed=0)
    with pytest.raises(ValueError, match=r"token 6109 \('Every'\) is outside this model's "
                                         r"vocabulary of 512 tokens"):
        run_prompt(small, IDS)
    with pytest.raises(ValueError, match="outside this model's vocabulary"):
        generate_stream(small, IDS, GenerationSettings())
    batch = make_batch([[5, 6, 7], [8]], small.cfg.context_length)  # padding fits it too
    run = run_prompt(small, batch)
    assert run.views["out_head"].shape == (2, 3, 512)


def test_a_padded_vocabulary_is_every_row_a_token_shown_as_its_id_where_the_tokenizer_has_none():
    """Probabilities over all 50,304 rows (not cut to the tokenizer's 50,257 and
    renormalised); an extra row can be chosen, and is shown and written as <id N>."""
    from explorer.core.gpt.tokenizer import decode, token_piece
    padded = build_model(preset("tiny", vocab_size=50304, tie_weights=False), seed=0)
    with torch.no_grad():  # an extra row twice the most likely real one: the most likely
        first = padded(torch.tensor([IDS]))[0, -1]
        top = int(first[:50257].argmax())
        assert first[top] > 0
        padded.out_head.weight[50300] = 2 * padded.out_head.weight[top]
    reports = []
    prompt_then_generate(padded, IDS, GenerationSettings(max_new_tokens=3),
                         lambda r: isinstance(r, Completed) or reports.append(r))
    with torch.no_grad():
        logits = padded(torch.tensor([IDS]))[0, -1].double()
    want = torch.softmax(logits, -1)  # over every row, computed here
    prompt = reports[0]
    assert int(want.argmax()) == 50300 and prompt.next_logits.shape == (50304,)
    assert prompt.top_ids[0] == 50300 and prompt.top_pieces[0] == "<id 50300>"
    assert prompt.top_probs[0] == pytest.approx(float(want[50300]), rel=1e-5)
    assert reports[1].token_id == 50300 and reports[1].prob == pytest.approx(float(want[50300]), rel=1e-5)
    assert token_piece(50300) == "<id 50300>" and decode([40, 50300]) == "I<id 50300>"
