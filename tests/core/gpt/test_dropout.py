"""The model's dropout is nn.Dropout's: each value kept with probability 1 − p and scaled
by 1/(1 − p), the same mask in the backward pass, nothing in eval mode — its CPU mask
drawn from 16 random bits a value, four values from each 64-bit draw."""

import pytest
import torch
from torch import nn

from explorer.core.gpt.dropout import Dropout


@pytest.mark.parametrize("p", [0.1, 0.5, 0.9])
def test_values_are_kept_with_probability_one_minus_p_and_scaled(p):
    torch.manual_seed(0)
    x = torch.ones(2_000_000, requires_grad=True)
    drop = Dropout(p).train()
    y = drop(x)
    kept = y != 0
    share = kept.double().mean().item()
    assert abs(share - (1 - p)) < 5 * (p * (1 - p) / x.numel()) ** 0.5  # five standard errors
    for lane in range(4):  # each 16 bits of a draw as random as the others
        part = kept[lane::4].double().mean().item()
        assert abs(part - (1 - p)) < 5 * (p * (1 - p) / (x.numel() / 4)) ** 0.5
    assert torch.allclose(y[kept], torch.full_like(y[kept], 1 / (1 - p)))
    y.backward(torch.arange(x.numel(), dtype=torch.float32))
    assert torch.equal(x.grad, torch.arange(x.numel(), dtype=torch.float32) * y.detach())


def test_eval_mode_and_the_edges_are_nn_dropouts():
    x = torch.randn(64, 32)
    assert Dropout(0.1).eval()(x) is x and Dropout(0.0).train()(x) is x
    assert isinstance(Dropout(0.1), nn.Dropout) and Dropout(0.3).p == 0.3
    assert torch.count_nonzero(Dropout(1.0).train()(x)) == 0


def test_the_mask_follows_torchs_seed():
    drop = Dropout(0.1).train()
    x = torch.randn(8, 128, 192)
    torch.manual_seed(3)
    a = drop(x)
    torch.manual_seed(3)
    assert torch.equal(a, drop(x))
    assert not torch.equal(a, drop(x))


def test_attention_trained_on_a_cpu_drops_its_weights_causally_and_unbiased():
    """In training, GPT-2's attention draws its pattern's dropout with this module: on
    average it is the pattern without dropout, and a position never sees a later one."""
    from explorer.core.gpt.build import build_model
    from explorer.core.gpt.config import preset
    torch.manual_seed(0)
    att = build_model(preset("tiny", drop_rate=0.1), seed=0).trf_blocks[0].att
    x = torch.randn(2, 12, att.d_out)
    with torch.no_grad():
        clean = att.eval()(x)
        att.train()
        mean = sum(att(x) for _ in range(2000)) / 2000
        assert (mean - clean).abs().max() < 0.05 * clean.abs().max()
        later = x.clone()
        later[:, 6:] = torch.randn(2, 6, att.d_out)
        torch.manual_seed(5)
        a = att(x)
        torch.manual_seed(5)
        assert torch.equal(att(later)[:, :6], a[:, :6])
