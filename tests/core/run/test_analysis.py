import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from explorer.core.run.analysis import (gelu_curves, gelu_input_shares, layer_table, lens_nodes,
                                        logit_lens, residual_profile)
from explorer.core.run.capture import Capture
from explorer.core.gpt.config import preset
from explorer.core.gpt.build import build_model


def test_gelu_curves_match_torch_and_their_derivatives():
    c = gelu_curves(-5, 5, 1001)
    x = torch.from_numpy(c.x)
    np.testing.assert_allclose(c.tanh, F.gelu(x, approximate="tanh").numpy(), atol=1e-12)
    np.testing.assert_allclose(c.exact, F.gelu(x, approximate="none").numpy(), atol=1e-12)
    np.testing.assert_allclose(c.relu, F.relu(x).numpy())
    phi = np.exp(-0.5 * c.x ** 2) / math.sqrt(2 * math.pi)
    Phi = 0.5 * (1 + np.vectorize(math.erf)(c.x / math.sqrt(2)))
    np.testing.assert_allclose(c.d_exact, Phi + c.x * phi, atol=1e-9)
    assert 1e-4 < c.max_gap < 1e-3 and 2.0 < abs(c.max_gap_at) < 3.2
    assert c.exact.min() == pytest.approx(-0.17, abs=0.005)


def test_gelu_input_shares():
    v = np.array([-5.0, -0.75, -0.4, 0.0, 1.0, 3.5, 10.0, np.nan])
    s = gelu_input_shares(v)
    assert s.count == 7
    assert s.negative == pytest.approx(3 / 7)
    assert s.dip == pytest.approx(2 / 7)  # -0.75 and -0.4 are within 0.5 of the minimum
    assert s.identity == pytest.approx(2 / 7)


@pytest.fixture(scope="module")
def captured():
    model = build_model(preset("tiny"), seed=3)
    ids = torch.randint(0, 50257, (1, 7), generator=torch.Generator().manual_seed(1))
    with torch.inference_mode(), Capture(model, tensors=True) as cap:
        logits = model(ids)
    return model, cap, logits


def test_layer_table_and_residual_profile(captured):
    model, cap, _ = captured
    views = cap.views()
    keys, table = layer_table(views, 2, "pre", "std")
    assert keys[0] == "norm1" and keys[-1] == "add2" and table.shape == (len(keys), 2)
    assert table[keys.index("add2"), 1] == pytest.approx(cap["trf_blocks.1.add2"].stats.std)
    names, values = residual_profile(views, 2, "pre")
    assert names == ["trf_blocks.0.add1", "trf_blocks.0.add2", "trf_blocks.1.add1", "trf_blocks.1.add2"]
    assert values[-1] == pytest.approx(cap["trf_blocks.1.add2"].stats.std)


def test_logit_lens_at_the_last_add_is_the_model_prediction(captured):
    model, cap, logits = captured
    residuals = {n: cap[n].tensor for n in lens_nodes(2)}
    rows = logit_lens(model, residuals, position=4, k=5)
    assert [r.name for r in rows] == lens_nodes(2)
    expected = torch.topk(torch.softmax(logits[0, 4], -1), 5)
    assert list(rows[-1].top_ids) == expected.indices.tolist()
    np.testing.assert_allclose(rows[-1].top_probs, expected.values.numpy(), rtol=1e-5)
    assert rows[0].top_ids != rows[-1].top_ids or rows[0].top_probs != rows[-1].top_probs
