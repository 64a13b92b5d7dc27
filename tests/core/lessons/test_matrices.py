"""Weight matrices as objects: every matrix node's shape, parameters, norm and singular
values are the parameter's own, its heatmap's cells are block means, and what it did to
the token is x · Wᵀ + b of the pass's own vectors."""

import numpy as np
import pytest
import torch

from explorer.core.gpt.config import preset
from explorer.core.gpt.build import build_model
from explorer.core.gpt.nodes import all_hook_names
from explorer.core.lessons.matrices import block_means, describe, has_matrix, singular_values
from explorer.core.run.passes import Keep, run_prompt


@pytest.fixture(scope="module")
def model_and_pass():
    model = build_model(preset("tiny", qkv_bias=True), seed=6).eval()
    return model, run_prompt(model, [464, 3290, 318, 257, 1310], Keep(inside=True))


def test_every_matrix_node_is_described_by_its_own_parameter(model_and_pass):
    model, result = model_and_pass
    names = [n for n in all_hook_names(model.cfg, inside=True) if has_matrix(n)]
    assert len(names) == 6 * model.cfg.n_layers + 3  # 4 in attention, 2 in the feed-forward
    for name in names:
        m = describe(model, name, result.views, 3)
        w = model.get_submodule(name).weight.detach()
        assert m.shape == tuple(w.shape)
        bias = model.get_submodule(name).bias if hasattr(model.get_submodule(name), "bias") else None
        assert m.parameters == w.numel() + (0 if bias is None else bias.numel())
        assert m.frobenius == pytest.approx(float(torch.linalg.matrix_norm(w)), rel=1e-5)
        np.testing.assert_allclose(m.singular, torch.linalg.svdvals(w.double())[:5].numpy(), rtol=1e-4)
        if m.x is not None:  # what it did to the token: y = x · Wᵀ + b
            y = m.x @ w.numpy().T + (0 if bias is None else bias.detach().numpy())
            np.testing.assert_allclose(y, m.y, atol=1e-4, err_msg=name)
        else:  # an embedding: a row of the table
            assert any(np.allclose(m.y, row, atol=1e-6) for row in w.numpy()), name
    assert describe(model, "out_head").tied  # the tiny preset ties the head to tok_emb


def test_large_matrices_shrink_to_block_means_and_others_refuse():
    w = np.arange(600 * 10, dtype=np.float32).reshape(600, 10)
    image, cell = block_means(w, side=256)
    assert cell == (3, 1) and image.shape == (200, 10)
    np.testing.assert_allclose(image[0], w[:3].mean(0))
    assert singular_values(torch.eye(3) * 2) == (2.0, 2.0, 2.0)
    model = build_model(preset("tiny"), seed=1)
    with pytest.raises(ValueError, match="multiplies by no weight matrix"):
        describe(model, "trf_blocks.0.norm1")


def test_a_matrix_described_before_is_not_read_again_only_the_token_is(model_and_pass):
    model, result = model_and_pass
    name = "trf_blocks.1.ff.layers.2"
    first = describe(model, name, result.views, 4)
    again = describe(model, name, result.views, 1, known=first)
    assert again.image is first.image and again.singular == first.singular  # reused
    np.testing.assert_array_equal(again.y, result.views[name].array[0, 1])  # the other token
    assert not np.array_equal(again.y, first.y)
