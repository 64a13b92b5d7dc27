"""The stability experiments for every placement: at initialisation each block's last
Linear's gradient (as a backward written out here gives it) and the stream's size after
each block (Post-LN's is a norm's output: √emb_dim a token); trained, a loss at every
step with and without warm-up, the warm-up's first steps smaller."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from explorer.core.base.resources import resource_path
from explorer.core.experiments.ln_compare import EXPERIMENT_CONFIG, initialise, lm_loss
from explorer.core.experiments.stability import at_initialisation, stability, summary
from explorer.core.gpt.build import build_model
from explorer.core.gpt.norm_position import NormPosition
from explorer.core.gpt.tokenizer import encode

TEXT = resource_path("the-verdict.txt").read_text(encoding="utf-8")
IDS = encode(TEXT[:2000])
CFG = EXPERIMENT_CONFIG.replace(n_layers=3, context_length=64)


@pytest.mark.parametrize("position", list(NormPosition))
def test_the_gradients_at_initialisation_are_one_backward_of_the_loss(position):
    cfg = CFG.replace(norm_position=position)
    grads, sizes = at_initialisation(cfg, IDS, "xavier", 4)
    assert len(grads) == len(sizes) == 3
    model = initialise(build_model(cfg, seed=None), "xavier", 4).train()
    lm_loss(model, torch.tensor([IDS[:65]])).backward()
    expected = [float(b.ff.layers[2].weight.grad.norm()) for b in model.trf_blocks]
    np.testing.assert_allclose(grads, expected, rtol=1e-5)
    with torch.no_grad():
        x = model.tok_emb(torch.tensor([IDS[:64]])) + model.pos_emb(torch.arange(64))
        for layer, block in enumerate(model.trf_blocks):
            x = block(x)
            assert sizes[layer] == pytest.approx(float(x.norm(dim=-1).mean()), rel=1e-5)
    if position == NormPosition.POST:  # each block ends in LayerNorm (scale 1, shift 0)
        np.testing.assert_allclose(sizes, math.sqrt(CFG.emb_dim), rtol=1e-3)


def test_trained_each_placement_has_a_loss_every_step_with_and_without_warm_up():
    seen = []
    out = stability(CFG, IDS, ["pre", "peri"], train_steps=3, text=TEXT[:6000],
                    progress=lambda done, total: seen.append((done, total)))
    assert seen == [(i, 14) for i in range(1, 15)]  # each placement: 1 measurement, 2 × 3 steps
    assert list(out) == [NormPosition.PRE, NormPosition.PERI]
    for placed in out.values():
        assert set(placed.losses) == {"warm-up", "no warm-up"}
        warm, cold = placed.losses["warm-up"], placed.losses["no warm-up"]
        assert [s for s, _ in warm] == [s for s, _ in cold] == [1, 2, 3]
        assert warm[0][1] == pytest.approx(cold[0][1])  # the first step's loss: same weights
        assert warm[1][1] != cold[1][1]  # then the first update was smaller with the warm-up
    lines = summary(out)
    assert lines[0].startswith("Pre-LN") and "warm-up: loss" in lines[0] and len(lines) == 2
    warm = out[NormPosition.PRE].losses["warm-up"]
    assert f"warm-up: loss {np.mean([loss for _, loss in warm]):.3f} (last 3 steps)" in lines[0]
    json = out[NormPosition.PERI].as_json()
    assert set(json) == {"grad_norms", "residual_norms", "losses", "trained_residual_norms"}
    assert len(json["grad_norms"]) == 3 and len(json["trained_residual_norms"]["warm-up"]) == 3


def test_the_learning_rate_reaches_the_training_and_the_trained_stream_is_measured():
    """The same first loss (the same weights, those measured at initialisation); a
    hundred times the rate, a lower second; the stream measured on the trained model."""
    from explorer.core.experiments.stability import stream_sizes, train_placement
    slow, _ = train_placement(CFG, TEXT[:6000], IDS, 2, lr=1e-4)
    fast, sizes = train_placement(CFG, TEXT[:6000], IDS, 2, lr=1e-2)
    model = initialise(build_model(CFG, seed=None), "xavier", 0)
    fresh = stream_sizes(model, IDS)
    assert fresh == pytest.approx(at_initialisation(CFG, IDS)[1], rel=1e-5)
    assert slow["no warm-up"][0][1] == pytest.approx(fast["no warm-up"][0][1])
    assert fast["no warm-up"][1][1] < slow["no warm-up"][1][1] - 0.05
    assert set(sizes) == {"warm-up", "no warm-up"} and len(sizes["warm-up"]) == 3
    assert sizes["no warm-up"] != pytest.approx(fresh, rel=1e-3)  # trained: not the fresh model
    _, still = train_placement(CFG, TEXT[:6000], IDS, 1, lr=1e-9)  # trained from those weights
    assert still["no warm-up"] == pytest.approx(fresh, rel=1e-4)
