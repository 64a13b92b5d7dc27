import math

import numpy as np
import pytest
import torch

from explorer.core.experiments.ln_compare import (EXPERIMENT_CONFIG, compare_prompt,
                                                  gradient_experiment, initialise, lm_loss,
                                                  post_ln_twin)
from explorer.core.gpt.config import preset
from explorer.core.gpt.build import build_model
from explorer.core.base.resources import resource_path
from explorer.core.gpt.tokenizer import encode

TEXT_IDS = encode(resource_path("the-verdict.txt").read_text(encoding="utf-8")[:2000])


def test_twin_has_the_same_weights_in_the_other_order():
    model = build_model(preset("tiny"), seed=1)
    twin = post_ln_twin(model)
    assert twin.cfg.norm_position == "post"
    for (name, a), (_, b) in zip(model.state_dict().items(), twin.state_dict().items()):
        assert torch.equal(a, b), name
    ids = torch.tensor([[1, 2, 3, 4]])
    with torch.no_grad():
        assert not torch.allclose(model(ids), twin(ids))


def test_residual_stream_grows_in_pre_ln_and_stays_at_norm_scale_in_post_ln():
    model = build_model(EXPERIMENT_CONFIG.replace(n_layers=12), seed=0)
    pre, post = compare_prompt(model, TEXT_IDS[:64])
    assert pre.norm_position.position == "pre" and post.norm_position.position == "post"
    assert pre.residual_norm[-1] > 1.5 * pre.residual_norm[0]
    assert np.mean(np.diff(pre.residual_norm) > 0) >= 0.8  # grows layer after layer
    # LayerNorm's output has per-token norm sqrt(emb_dim) when scale is 1 and shift is 0
    np.testing.assert_allclose(post.residual_norm, math.sqrt(EXPERIMENT_CONFIG.emb_dim), rtol=0.02)
    assert len(pre.top_ids) == len(post.top_ids) == 5


def test_every_node_is_compared_the_output_head_too():
    """The Pre/Post-LN tab's default node is the output head: both orders count every
    logit of it (its histogram was missing, the chart empty)."""
    from explorer.core.gpt.nodes import select_hook_names
    model = build_model(preset("tiny"), seed=2)
    ids = TEXT_IDS[:6]
    pre, post = compare_prompt(model, ids)
    for run in (pre, post):
        assert set(run.histograms) == set(select_hook_names(model.cfg))
        logits = run.histograms["out_head"]
        assert int(logits.counts.sum()) + logits.below + logits.above == len(ids) * model.cfg.vocab_size
    with torch.no_grad():
        pre_logits = model(torch.tensor([ids]))
    counted = pre.histograms["out_head"]
    lo, hi = counted.edges[[0, -1]]
    assert counted.below == int((pre_logits < lo).sum()) and counted.above == int((pre_logits >= hi).sum())


@pytest.mark.slow
def test_gradient_experiment_reproduces_theorem_1_depth_scaling_with_xavier():
    result = gradient_experiment(EXPERIMENT_CONFIG, TEXT_IDS, [6, 24], "xavier", seed=0)
    post, pre = result.last_layer("post"), result.last_layer("pre")
    assert abs(post[1] / post[0] - 1) < 0.25
    assert pre[0] / pre[1] >= 1.5
    assert [len(result.per_layer[("pre", d)]) for d in (6, 24)] == [6, 24]
    assert "reproduces" in result.summary()


def test_gradient_experiment_can_be_cancelled():
    calls = []
    result = gradient_experiment(EXPERIMENT_CONFIG, TEXT_IDS, [2, 4], "gpt2", seed=0,
                                 progress=lambda done, total: calls.append((done, total)) or False)
    assert result is None and calls == [(1, 4)]


def test_gradients_match_finite_differences():
    cfg = preset("tiny", vocab_size=50257, n_layers=2, drop_rate=0.0)
    for position in ("pre", "post"):
        model = initialise(build_model(cfg.replace(norm_position=position), seed=None), "xavier", 3)
        model = model.double().train()
        model.tie_weights()
        ids = torch.tensor([TEXT_IDS[:12]])
        lm_loss(model, ids).backward()
        for block in (model.trf_blocks[0], model.trf_blocks[-1]):
            w = block.ff.layers[2].weight
            for (i, j) in [(0, 0), (3, 17), (31, 100)]:
                eps = 1e-6
                with torch.no_grad():
                    w[i, j] += eps
                    up = lm_loss(model, ids).item()
                    w[i, j] -= 2 * eps
                    down = lm_loss(model, ids).item()
                    w[i, j] += eps
                assert w.grad[i, j].item() == pytest.approx((up - down) / (2 * eps), rel=1e-4, abs=1e-9)


def test_unknown_initialisation_is_rejected():
    with pytest.raises(ValueError, match="xavier"):
        gradient_experiment(EXPERIMENT_CONFIG, TEXT_IDS, [2], "orthogonal")
