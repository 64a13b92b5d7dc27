"""The output head and the loss applied together (core.experiments.head_loss) equal the
logits' cross-entropy, and a run trained with it keeps the loss curve of one without."""

import pytest
import torch
import torch.nn.functional as F

from explorer.core.experiments import head_loss as module, training
from explorer.core.experiments.head_loss import head_loss
from explorer.core.experiments.training import Trainer, TrainSettings, default_text


def _inputs(n, c=24, v=1000, seed=0):
    g = torch.Generator().manual_seed(seed)
    hidden = torch.randn(n, c, generator=g, dtype=torch.float64)
    weight = torch.randn(v, c, generator=g, dtype=torch.float64) * 0.3
    targets = torch.randint(0, v, (n,), generator=g)
    return hidden, weight, targets


def _grads(fn, hidden, weight, dtype):
    h = hidden.to(dtype, copy=True).requires_grad_()
    w = weight.to(dtype, copy=True).requires_grad_()
    loss = fn(h, w)
    loss.backward()
    return loss.double(), h.grad.double(), w.grad.double()


@pytest.mark.parametrize("n,chunk", [(1, 128), (37, 8), (128, 128), (300, 128)])
def test_float32_equals_the_float64_cross_entropy(n, chunk):
    hidden, weight, targets = _inputs(n)
    want = _grads(lambda h, w: F.cross_entropy(h @ w.t(), targets), hidden, weight, torch.float64)
    got = _grads(lambda h, w: head_loss(h, w, targets, chunk=chunk), hidden, weight, torch.float32)
    assert got[0].item() == pytest.approx(want[0].item(), rel=1e-6)
    for a, b in zip(got[1:], want[1:]):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-7)


def test_bfloat16_equals_the_autocast_cross_entropy():
    """The same products in bfloat16 as autocast makes (logits rounded to bfloat16)."""
    hidden, weight, targets = _inputs(200, c=64, v=3000)

    def autocast(h, w):
        with torch.autocast("cpu", dtype=torch.bfloat16):
            logits = h @ w.t()
        return F.cross_entropy(logits.float(), targets)

    want = _grads(autocast, hidden, weight, torch.float32)
    got = _grads(lambda h, w: head_loss(h, w, targets, bfloat16=True, chunk=64),
                 hidden, weight, torch.float32)
    exact = _grads(lambda h, w: F.cross_entropy(h @ w.t(), targets), hidden, weight, torch.float64)
    assert got[0].item() == pytest.approx(want[0].item(), abs=1e-5)
    assert got[0].item() == pytest.approx(exact[0].item(), abs=0.02)  # bfloat16's rounding
    for a, b in zip(got[1:], want[1:]):
        torch.testing.assert_close(a, b, rtol=0.02, atol=2e-4)


def test_without_gradients_the_same_loss_and_the_backward_scales_by_its_gradient():
    hidden, weight, targets = _inputs(50)
    with torch.no_grad():
        loss = head_loss(hidden.float(), weight.float(), targets, chunk=16)
    assert loss.item() == pytest.approx(F.cross_entropy(hidden @ weight.t(), targets).item(), rel=1e-6)
    h = hidden.float().requires_grad_()
    (3.0 * head_loss(h, weight.float(), targets)).backward()
    h1 = hidden.float().requires_grad_()
    F.cross_entropy(h1 @ weight.float().t(), targets).mul(3.0).backward()
    torch.testing.assert_close(h.grad, h1.grad, rtol=1e-5, atol=1e-7)


def _plain(hidden, weight, targets, bfloat16=False):
    """The logits whole, then the loss: what head_loss stands in for."""
    with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bfloat16):
        logits = hidden @ weight.t()
    return F.cross_entropy(logits.flatten(0, 1).float(), targets.flatten())


@pytest.mark.slow
@pytest.mark.parametrize("precision", ["float32", "bfloat16"])
def test_a_run_keeps_the_loss_curve_of_the_logits_whole(monkeypatch, precision):
    settings = TrainSettings(preset="tiny", max_steps=30, eval_every=10, batch_size=4,
                             warmup_steps=5, snapshots=0, precision=precision)

    def curve():
        trainer = Trainer(default_text(), settings)
        return [(e.step, e.train_loss, e.val_loss) for e in trainer.run()
                if isinstance(e, training.EvalEvent)]

    fused = curve()
    monkeypatch.setattr(module, "head_loss", _plain)
    plain = curve()
    assert [s for s, _, _ in fused] == [s for s, _, _ in plain] == [0, 10, 20, 30]
    assert plain[-1][2] < plain[0][2] - 0.5  # it learned
    for (_, ft, fv), (_, pt, pv) in zip(fused, plain):
        assert abs(ft - pt) < 0.1 and abs(fv - pv) < 0.1
