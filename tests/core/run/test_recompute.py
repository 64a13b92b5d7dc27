"""Generation the book's way (the whole context each step, no KV cache): the same
tokens as with the cache, and each step is the whole captured pass, (1, T + k, C)."""

import numpy as np
import torch

from explorer.core.gpt.config import preset
from explorer.core.run.generation import GenerationSettings, generate
from explorer.core.gpt.build import build_model
from explorer.core.run.passes import Pass, prompt_then_generate
from explorer.core.gpt.tokenizer import encode

IDS = encode("Every effort moves you")


def run(model, **settings):
    passes = []
    why = prompt_then_generate(model, IDS, GenerationSettings(max_new_tokens=4, **settings),
                               passes.append)
    return why, [p for p in passes if isinstance(p, Pass)]


def test_recomputed_steps_are_whole_passes_with_the_same_tokens():
    model = build_model(preset("tiny"), seed=6)
    why, cached = run(model)
    why2, whole = run(model, recompute=True)
    assert why == why2 == "max_new_tokens"
    steps, whole_steps = cached[1:], whole[1:]
    assert [s.token_id for s in steps] == [s.token_id for s in whole_steps]
    for k, step in enumerate(whole_steps):
        assert step.step == k and step.whole and not step.one_position
        t = len(IDS) + k  # the book's (1, 4 + k, C)
        assert step.views["trf_blocks.0.ff"].shape == (1, t, 32)
        assert step.views["trf_blocks.1.att.attn_weights"].shape == (1, 4, t, t)
        assert step.pieces and len(step.ids) == t
        # its last position is the cached step's vector: the same numbers
        np.testing.assert_allclose(step.views["trf_blocks.1.add2"].array[0, -1],
                                   steps[k].views["trf_blocks.1.add2"].array.reshape(-1),
                                   rtol=1e-4, atol=1e-5)
        assert step.top_ids == steps[k].top_ids
        assert abs(step.prob - steps[k].prob) < 1e-5
    assert steps[0].one_position and steps[0].views["trf_blocks.0.ff"].shape == (1, 1, 32)
    assert whole_steps[0].views is whole[0].views  # step 0 is chosen by the prompt pass


def test_recompute_in_the_stream_gives_the_same_tokens():
    model = build_model(preset("tiny"), seed=7)
    a = generate(model, IDS, GenerationSettings(max_new_tokens=6)).new_ids
    b = generate(model, IDS, GenerationSettings(max_new_tokens=6, recompute=True)).new_ids
    assert a == b
    s = GenerationSettings(max_new_tokens=6, greedy=False, seed=3, temperature=1.5)
    sampled = generate(model, IDS, s).new_ids
    again = generate(model, IDS, GenerationSettings(**{**s.__dict__, "recompute": True})).new_ids
    assert sampled == again  # the same draws from the same seed
    assert torch.is_grad_enabled()


def test_a_recomputed_run_keeps_tensors_within_one_budget_fixed_before_it_starts():
    """The run's tensor budget is shared evenly between its steps before the first one
    runs (1,000 steps: 2.1 MB each, 2 GiB for the run), and each step keeps no more."""
    import dataclasses

    from explorer.core.run.passes import EVERYTHING, RUN_BUDGET, recompute_budget
    assert RUN_BUDGET == 2 * 2**30
    assert recompute_budget(GenerationSettings(max_new_tokens=1000), EVERYTHING) == 2_147_483
    model = build_model(preset("mini"), seed=1)
    settings = GenerationSettings(max_new_tokens=4, recompute=True)
    budget = 40_000  # a few of mini's nodes a step: the budget, not the nodes, decides
    passes = []
    keep = dataclasses.replace(EVERYTHING, budget_bytes=budget * 4)
    prompt_then_generate(model, IDS, settings, passes.append, keep=keep)
    steps = [p for p in passes if isinstance(p, Pass)][2:]  # step 0 is the prompt pass itself
    assert recompute_budget(settings, keep) == budget * 4
    for step in steps:
        arrays = {v.array.__array_interface__["data"][0]: v.array.nbytes  # a tensor two
                  for v in step.views.values() if v.array is not None}  # nodes share, once
        kept = sum(arrays.values())
        assert 0 < kept <= budget * 4 and any(v.array is None for v in step.views.values())
    prompt = [p for p in passes if isinstance(p, Pass)][0]  # the pass the status line says
    assert any(n.startswith("each step keeps at most 0.2 MiB of its tensors (2 GiB for the run)")
               for n in prompt.notices), prompt.notices


def test_each_pass_keeps_its_logits_row_not_the_whole_passes_logits():
    """A pass keeps the logits its next token is drawn from — one row of the vocabulary;
    a view into the pass's (T, vocab) logits would keep all of them alive (200 MB a
    recomputed step of gpt2-small at T = 1,024)."""
    import torch as _torch
    model = build_model(preset("tiny"), seed=6)
    _, passes = run(model, recompute=True)
    for p in passes:
        base = p.next_logits.base
        held = base.untyped_storage().nbytes() if isinstance(base, _torch.Tensor) else p.next_logits.nbytes
        assert p.next_logits.shape == (50257,) and held == p.next_logits.nbytes
