"""A branch from any step with another token: the same tokens and logits as a fresh run
of its whole text, one one-token forward a step, and the run it came from untouched."""

import numpy as np
import pytest
import torch

from explorer.core.gpt.config import preset
from explorer.core.gpt.build import build_model
from explorer.core.playground.branches import branch_stream, fork
from explorer.core.run.generation import GenerationSettings, generate_stream

PROMPT = [464, 3290, 286, 262, 1295]


@pytest.fixture(scope="module")
def model():
    return build_model(preset("tiny"), seed=4)


def counted(model):
    """Forward passes of the model and the tokens each one ran."""
    seen = []
    handle = model.tok_emb.register_forward_hook(lambda m, i, o: seen.append(i[0].shape[1]))
    return seen, handle


@pytest.mark.parametrize("s", [GenerationSettings(max_new_tokens=6, stop_at_eot=False),
                               GenerationSettings(max_new_tokens=6, greedy=False, temperature=0.9,
                                                  top_k=50, seed=11, stop_at_eot=False)])
def test_a_branch_matches_a_fresh_run_of_its_whole_text(model, s):
    main = generate_stream(model, PROMPT, s)
    steps = list(main)
    at = 2  # branch at the third generated token, with the model's second choice there
    chosen = steps[at].top_ids[1]
    before = PROMPT + [st.token_id for st in steps[:at]]
    cache = main_cache(model, PROMPT + [st.token_id for st in steps])  # the run's full cache
    n = cache.length  # the buffers past it are never written: uninitialised memory
    kept = [layer.k[:, :, :n].clone() for layer in cache.layers]
    seen, handle = counted(model)
    try:
        branch = list(branch_stream(model, before, chosen, s, cache, capture=True))
    finally:
        handle.remove()
    # the chosen token, then one token after each step but the last: the prefix never again
    assert seen == [1] * len(branch) and len(branch) == s.max_new_tokens
    fresh = list(generate_stream(model, before + [chosen], s))
    assert [b.token_id for b in branch] == [f.token_id for f in fresh]
    for b, f in zip(branch, fresh):
        np.testing.assert_allclose(b.logits, f.logits if f.logits is not None else _logits(
            model, before + [chosen] + [x.token_id for x in fresh[:f.index]]), atol=1e-4)
        assert b.capture is not None
    for layer, k in zip(cache.layers, kept):  # the run the branch came from is untouched
        assert torch.equal(layer.k[:, :, :n], k) and cache.length == n


def main_cache(model, ids):
    cache = model.new_cache()
    with torch.inference_mode():
        model(torch.tensor([ids]), cache=cache)
    return cache


def _logits(model, ids):
    with torch.inference_mode():
        return model(torch.tensor([ids]))[0, -1].numpy()


def test_fork_refuses_positions_the_cache_does_not_hold(model):
    cache = main_cache(model, PROMPT)
    assert fork(cache, 3).length == 3
    with pytest.raises(ValueError, match="holds 5 positions, not 6"):
        fork(cache, 6)
    with pytest.raises(ValueError, match="outside the vocabulary"):
        branch_stream(model, PROMPT, 10**6, GenerationSettings(), cache)
