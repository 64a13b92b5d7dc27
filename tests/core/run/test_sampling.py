"""Live sampling: a step's distribution reshaped from its stored logits equals what
generation samples from, at every setting; seeded draws agree with it."""

import numpy as np
import pytest
import torch

from explorer.core.run.generation import GenerationSettings, generate, sampling_probabilities
from explorer.core.run.passes import EVERYTHING, prompt_then_generate
from explorer.core.run.sampling import chi_square, reshape, sample_counts
from explorer.core.gpt.config import preset
from explorer.core.gpt.build import build_model


def reference(logits: np.ndarray, t: float, k: int | None, p: float | None) -> np.ndarray:
    """Temperature, top-k, top-p written out in numpy, independently of the app."""
    z = logits.astype(np.float64) / t
    keep = np.ones_like(z, dtype=bool)
    if k is not None and k < len(z):
        keep &= z >= np.sort(z)[-k]
    if p is not None and p < 1.0:
        order = np.argsort(-np.where(keep, z, -np.inf), kind="stable")
        w = np.exp(z[order] - z[order][0]) * keep[order]
        cumulative = np.cumsum(w / w.sum())
        count = int(np.searchsorted(cumulative, p) + 1)  # the smallest set reaching p
        cut = np.zeros_like(keep)
        cut[order[:count]] = True
        keep &= cut
    w = np.where(keep, np.exp(z - z[keep].max()), 0.0)
    return w / w.sum()


@pytest.fixture(scope="module")
def logits():
    torch.manual_seed(0)
    return (torch.randn(50257) * 3).numpy()  # a spread like a trained model's


@pytest.mark.parametrize("t", [0.3, 1.0, 2.5])
@pytest.mark.parametrize("k", [None, 1, 40, 1000])
@pytest.mark.parametrize("p", [None, 0.5, 0.9])
def test_reshaping_equals_the_filtering_that_sampling_uses(logits, t, k, p):
    s = GenerationSettings(greedy=False, temperature=t, top_k=k, top_p=p)
    r = reshape(logits, s)
    want = reference(logits, t, k, p)
    np.testing.assert_allclose(r.after, want, atol=2e-6)
    assert r.kept == np.count_nonzero(want)
    if k is not None:
        assert r.kept <= k
    np.testing.assert_allclose(r.before, reference(logits, 1.0, None, None), atol=1e-6)
    # the numpy reshaping is the torch code generation draws from, step for step
    drawn_from = sampling_probabilities(torch.as_tensor(logits), s).numpy()
    np.testing.assert_allclose(r.after, drawn_from, atol=2e-6)
    assert np.array_equal(r.after > 0, drawn_from > 0)
    assert r.after.sum() == pytest.approx(1.0, abs=1e-5)


def test_greedy_puts_everything_on_the_top_token_and_ranks_follow(logits):
    r = reshape(logits, GenerationSettings(greedy=True), chosen=int(np.argmax(logits)))
    assert r.kept == 1 and r.after[np.argmax(logits)] == 1.0 and r.entropy_after == 0.0
    assert r.rank(int(np.argmax(logits))) == 1 and r.rank(0) is None
    hot = reshape(logits, GenerationSettings(greedy=False, temperature=2.0))
    cold = reshape(logits, GenerationSettings(greedy=False, temperature=0.5))
    assert cold.entropy_after < cold.entropy_before < hot.entropy_after
    second = int(np.argsort(-logits)[1])
    assert hot.rank(second) == cold.rank(second) == 2  # temperature changes no order
    assert list(hot.shown(5)) == list(np.argsort(-logits)[:5])


def test_two_hundred_draws_agree_with_the_exact_probabilities(logits):
    s = GenerationSettings(greedy=False, temperature=1.0, top_k=20)
    exact = reshape(logits, s).after
    counts = sample_counts(logits, s, draws=200, seed=3)
    assert counts.sum() == 200 and set(np.nonzero(counts)[0]) <= set(np.nonzero(exact)[0])
    stat, df = chi_square(counts, exact)
    assert stat < df + 5 * np.sqrt(2 * df)  # far inside the 99.99% region
    wrong = reshape(logits, GenerationSettings(greedy=False, temperature=3.0, top_k=20)).after
    stat_wrong, df_wrong = chi_square(counts, wrong)
    assert stat_wrong > df_wrong + 5 * np.sqrt(2 * df_wrong)  # the test tells them apart
    again = sample_counts(logits, s, draws=200, seed=3)
    assert np.array_equal(counts, again)  # seeded


def test_each_step_keeps_the_logits_it_was_drawn_from():
    model = build_model(preset("tiny"), seed=1)
    ids = [464, 3290, 286, 262]
    s = GenerationSettings(max_new_tokens=3, greedy=False, temperature=0.8, seed=5)
    passes = []
    prompt_then_generate(model, ids, s, passes.append, keep=EVERYTHING)
    steps = [p for p in passes if getattr(p, "step", None) is not None]
    with torch.no_grad():
        first = model(torch.tensor([ids]))[0, -1].numpy()
    np.testing.assert_allclose(passes[0].next_logits, first, atol=1e-4)
    np.testing.assert_allclose(steps[0].next_logits, first, atol=1e-4)
    tokens = [p.token_id for p in steps]
    with torch.no_grad():
        second = model(torch.tensor([ids + tokens[:1]]))[0, -1].numpy()
    np.testing.assert_allclose(steps[1].next_logits, second, atol=1e-4)
    plain = generate(model, ids, s)  # sampling itself is unchanged by keeping them
    assert plain.new_ids == tokens and plain.steps[0].logits is None


def test_the_top_ids_are_a_stable_sort_s_first_ids_ties_and_all():
    """``top_ids`` equals ``np.argsort(-v, kind="stable")[:k]`` on real-sized vocabularies,
    on ties across the cut (equal values kept by id) and on k past the size."""
    import numpy as np

    from explorer.core.run.sampling import top_ids
    rng = np.random.default_rng(0)
    cases = [rng.standard_normal(50_257), rng.random(262_144),
             np.round(rng.standard_normal(5_000), 1),  # many ties, some across the cut
             np.zeros(7), np.array([3.0, 1.0, 3.0, 2.0, 3.0])]
    for values in cases:
        for k in (1, 3, 10, 20, values.size, values.size + 5):
            want = np.argsort(-values, kind="stable")[:k]
            np.testing.assert_array_equal(top_ids(values, k), want)
    assert top_ids(np.arange(4.0), 0).size == 0
