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
    out = stability(CFG, IDS, ["pre", "peri"], train_steps=3, text=TEXT[:6000])
    assert list(out) == [NormPosition.PRE, NormPosition.PERI]
    for placed in out.values():
        assert set(placed.losses) == {"warm-up", "no warm-up"}
        warm, cold = placed.losses["warm-up"], placed.losses["no warm-up"]
        assert [s for s, _ in warm] == [s for s, _ in cold] == [1, 2, 3]
        assert warm[0][1] == pytest.approx(cold[0][1])  # the first step's loss: same weights
        assert warm[1][1] != cold[1][1]  # then the first update was smaller with the warm-up
    lines = summary(out)
    assert lines[0].startswith("Pre-LN") and "warm-up: loss" in lines[0] and len(lines) == 2
    json = out[NormPosition.PERI].as_json()
    assert set(json) == {"grad_norms", "residual_norms", "losses"} and len(json["grad_norms"]) == 3
