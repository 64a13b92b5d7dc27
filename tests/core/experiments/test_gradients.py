"""Gradient flow with and without the shortcuts: the numbers against hand-built
references, and the hooks gone afterwards."""

import pytest
import torch
import torch.nn.functional as F

from explorer.core.base.cancel import Cancelled
from explorer.core.gpt.config import preset
from explorer.core.experiments.gradients import describe, gradient_report, per_layer
from explorer.core.gpt.build import build_model

IDS = [464, 1049, 11, 290, 262]


@pytest.fixture(scope="module")
def model():
    return build_model(preset("tiny"), seed=4)


def no_hooks(model):
    return all(not m._forward_hooks and not m._forward_pre_hooks for m in model.modules())


def test_with_shortcuts_the_norms_are_the_autograd_gradients(model):
    report = gradient_report(model, IDS, without=False)
    run, = report.runs
    seen = {}

    def keep(i):
        def hook(module, args, out):
            out.retain_grad()
            seen[i] = out
        return hook

    for i, block in enumerate(model.trf_blocks):
        block.add2.register_forward_hook(keep(i))
    try:
        ids = torch.tensor([IDS])
        loss = F.cross_entropy(model(ids)[0, :-1], ids[0, 1:])
        loss.backward()
    finally:
        for block in model.trf_blocks:
            block.add2._forward_hooks.clear()
    assert run.loss == pytest.approx(float(loss.detach()), rel=1e-6)
    for i in range(model.cfg.n_layers):
        assert run.norms[f"trf_blocks.{i}.add2"] == pytest.approx(float(seen[i].grad.norm()), rel=1e-5)
        assert run.residual[i + 1] == run.norms[f"trf_blocks.{i}.add2"]
        block_grad = torch.sqrt(sum((p.grad ** 2).sum() for p in model.trf_blocks[i].parameters()))
        assert run.blocks[i] == pytest.approx(float(block_grad), rel=1e-5)
    assert per_layer(run, "add2", 2) == [run.norms["trf_blocks.0.add2"], run.norms["trf_blocks.1.add2"]]
    model.zero_grad(set_to_none=True)


def test_without_shortcuts_it_is_the_model_whose_adds_return_the_branch(model):
    report = gradient_report(model, IDS)
    with_, without = report.runs
    ids = torch.tensor([IDS])
    x = model.drop_emb(model.tok_emb(ids) + model.pos_emb(torch.arange(len(IDS))))
    x = x.detach().requires_grad_(True)
    h = x
    for block in model.trf_blocks:  # x = branch only, twice per block
        h = block.att(block.norm1(h))
        h = block.ff(block.norm2(h))
    loss = F.cross_entropy(model.out_head(model.final_norm(h))[0, :-1], ids[0, 1:])
    (grad,) = torch.autograd.grad(loss, x)
    assert without.loss == pytest.approx(float(loss.detach()), rel=1e-5)
    assert without.residual[0] == pytest.approx(float(grad.norm()), rel=1e-4)
    assert with_.loss != pytest.approx(without.loss, rel=1e-6)
    assert report.ratio() == pytest.approx(with_.blocks[0] / without.blocks[0])
    text = "\n".join(describe(report, 2))
    assert f"{report.ratio():.3g}" in text and "shortcuts removed" in text
    assert no_hooks(model) and all(p.grad is None for p in model.parameters())


def test_hooks_go_also_when_stopped_and_short_prompts_are_refused(model):
    with pytest.raises(Cancelled):
        gradient_report(model, IDS, should_stop=lambda: True)
    assert no_hooks(model)
    calls = []
    with pytest.raises(Cancelled):  # stopped between the two runs
        gradient_report(model, IDS, should_stop=lambda: len(calls) > 0,
                        progress=lambda d, t: calls.append(d))
    assert no_hooks(model)
    with pytest.raises(ValueError, match="at least 2 tokens"):
        gradient_report(model, IDS[:1])
    for _ in range(50):
        gradient_report(model, IDS[:3], without=True)
    assert no_hooks(model)


def test_without_the_blocks_norms_the_gradient_vanishes_without_shortcuts():
    """The book's plain deep network: no LayerNorm in the blocks, no shortcuts — the
    gradient reaching the first block is orders of magnitude below the last's; with the
    shortcuts it stays within a factor of 2 (GPT-2-shaped, 8 blocks)."""
    model = build_model(preset("tiny", n_layers=8, emb_dim=64, n_heads=4), seed=0)
    report = gradient_report(model, IDS, norms=False)
    with_, without = report.runs
    assert not with_.norms_kept and not without.norms_kept
    assert 0.5 < with_.blocks[0] / with_.blocks[-1] < 2
    assert without.blocks[0] < 1e-3 * without.blocks[-1]
    assert "fades on its way down" in "\n".join(describe(report, 8))
    assert no_hooks(model)
    kept = gradient_report(model, IDS)  # the norms back: the same model, other numbers
    assert kept.runs[0].norms_kept and kept.runs[0].loss != with_.loss


def test_stop_is_asked_after_every_block_forward_and_backward():
    model = build_model(preset("tiny"), seed=4)  # 2 blocks
    asked = []

    def stop_at(n):
        def should_stop():
            asked.append(1)
            return len(asked) >= n
        return should_stop

    with pytest.raises(Cancelled):  # during the backward pass: the 5th question
        gradient_report(model, IDS, without=False, should_stop=stop_at(5))
    assert len(asked) == 5 and no_hooks(model)
    asked.clear()
    gradient_report(model, IDS, without=False, should_stop=stop_at(10**9))
    # before the run, then after each of 2 blocks forward and 2 blocks backward
    assert len(asked) == 1 + 2 + 2


def test_gradients_that_would_not_fit_are_refused_before_they_run(monkeypatch):
    from explorer.core.base import devices
    from explorer.core.experiments.gradients import gradient_bytes
    cfg = preset("gpt2-xl")
    need = gradient_bytes(cfg, 1024)
    assert 15 * 2**30 < need < 40 * 2**30  # logits, 48 blocks of activations, a gradient each
    model = build_model(preset("tiny"), seed=4)
    monkeypatch.setattr(devices, "free_memory_bytes", lambda device: 2**20)
    with pytest.raises(MemoryError, match="computing the gradients of a 5-token prompt needs about"):
        gradient_report(model, IDS)


@pytest.mark.parametrize("name,words", [
    ("tiny", "the blocks' LayerNorms (Pre-LN, x + f(norm(x))) rescale what flows back"),
    ("gemma3-tiny", "the blocks' RMSNorms (Peri-LN, x + norm_out(f(norm_in(x)))) rescale"),
    ("olmo2-tiny", "the blocks' RMSNorms (Branch norm, x + norm(f(x))) rescale")])
def test_the_verdict_names_the_norms_the_block_has_where_they_sit(name, words):
    """Why the gradient does not fade with the norms kept, in the words of the block's own
    norms; without them, the runs say which were removed."""
    import dataclasses
    model = build_model(preset(name), seed=0)
    report = gradient_report(model, IDS)
    # the verdict a block gets when its gradient keeps its size down the stack
    even = tuple(dataclasses.replace(r, blocks=(1.0, 1.0)) for r in report.runs)
    text = "\n".join(describe(dataclasses.replace(report, runs=even), 2))
    assert words in text and "does not fade" in text
    bare = gradient_report(model, IDS, norms=False)
    assert f"blocks' {report.norm}s removed" in "\n".join(describe(bare, model.cfg.n_layers))
