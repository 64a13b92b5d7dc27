"""The device-generic path: the same model, pass and generation on another device give
the CPU's numbers. Runs on the CPU here; ``GPT_EXPLORER_TEST_DEVICE=cuda`` (or mps) runs it
on a GPU (benchmarks/gpu.sh does, with the speed benchmarks)."""

import dataclasses
import os

import numpy as np
import pytest
import torch

from explorer.core.gpt import layers
from explorer.core.gpt.config import preset
from explorer.core.base.devices import resolve_device
from explorer.core.run.generation import GenerationSettings, generate_stream
from explorer.core.gpt.build import build_model
from explorer.core.run.capture import Capture
from explorer.core.run.passes import EVERYTHING, run_prompt

DEVICE = os.environ.get("GPT_EXPLORER_TEST_DEVICE", "cpu")
IDS = list(range(300, 400))  # more than one chunk of pattern rows


def models():
    cfg = dataclasses.replace(preset("tiny"), context_length=128)
    cpu = build_model(cfg, seed=4)
    there = build_model(cfg, seed=4).to(resolve_device(DEVICE))
    there.tie_weights()
    return cpu, there


def test_logits_and_every_node_match_the_cpu():
    cpu, there = models()
    ours = run_prompt(cpu, IDS, dataclasses.replace(EVERYTHING, later=False))
    theirs = run_prompt(there, IDS, EVERYTHING)
    theirs.complete()
    assert theirs.views["out_head"].device.startswith(DEVICE)
    assert set(ours.views) == set(theirs.views)
    for name, view in ours.views.items():
        other = theirs.views[name]
        assert other.shape == view.shape, name
        np.testing.assert_allclose(other.array, view.array, atol=2e-4, rtol=1e-4, err_msg=name)
        for stat in ("mean", "std", "absmax", "rms"):
            assert getattr(other.stats, stat) == pytest.approx(getattr(view.stats, stat),
                                                               rel=1e-3, abs=1e-5), (name, stat)
        np.testing.assert_allclose(other.stats.token_l2, view.stats.token_l2, rtol=1e-3)
    assert ours.top_ids[:3] == theirs.top_ids[:3]


def test_the_capture_there_keeps_on_the_device_and_copies_once_giving_the_cpus_numbers():
    """On a GPU a capture is resident: statistics computed there in each hook, the kept
    tensors copied into one pinned buffer as the pass ends (the CPU runs the same code)."""
    cpu, there = models()
    ids = torch.tensor([IDS])
    with torch.inference_mode(), Capture(cpu, tensors=True, inside=True) as ours:
        cpu(ids)
    with torch.inference_mode(), Capture(there, tensors=True, inside=True,
                                         resident=True if DEVICE == "cpu" else None) as theirs:
        there(ids.to(resolve_device(DEVICE)))
    assert theirs.resident and list(theirs.records) == list(ours.records)
    for name, record in theirs.records.items():
        mine = ours[name]
        assert record.tensor.device.type == "cpu", name
        if DEVICE == "cuda":
            assert record.tensor.is_pinned(), name
        np.testing.assert_allclose(record.tensor, mine.tensor, atol=2e-4, rtol=1e-4, err_msg=name)
        assert (record.stats.count, record.stats.n_inf) == (mine.stats.count, mine.stats.n_inf)
        for stat in ("mean", "std", "absmax", "rms"):
            assert getattr(record.stats, stat) == pytest.approx(
                getattr(mine.stats, stat), rel=1e-3, abs=1e-5), (name, stat)
        assert abs(int(record.stats.hist.sum()) - int(mine.stats.hist.sum())) <= 2, name


def test_generation_with_capture_gives_the_cpu_tokens():
    cpu, there = models()
    settings = GenerationSettings(max_new_tokens=12, stop_at_eot=False, capture_steps=True)
    ours = [s.token_id for s in generate_stream(cpu, IDS[:20], settings)]
    steps = list(generate_stream(there, IDS[:20], settings))
    assert [s.token_id for s in steps] == ours
    assert steps[-1].capture.views()["trf_blocks.1.add2"].array.shape == (1, 1, 32)


def test_bfloat16_runs_and_stays_close():
    _, there = models()
    half = there.to(torch.bfloat16)
    half.tie_weights()
    ids = torch.tensor([IDS], device=resolve_device(DEVICE))
    _, full = models()
    with torch.inference_mode():
        diff = (half(ids).float() - full(ids)).abs().max().item()
    assert diff < 0.1
    result = run_prompt(half, IDS, EVERYTHING)
    assert result.views["out_head"].dtype == "bfloat16" and np.isfinite(result.views["out_head"].stats.std)


def test_the_chunked_pattern_is_causal_there():
    device = resolve_device(DEVICE)
    q, k = (torch.randn(1, 2, 150, 8, generator=torch.Generator().manual_seed(i)).to(device)
            for i in (1, 2))
    pattern = layers.causal_softmax(q, k)
    assert torch.all(pattern.triu(1) == 0)
    torch.testing.assert_close(pattern.sum(-1), torch.ones(1, 2, 150, device=device))


def test_training_on_the_device_starts_as_on_the_cpu_and_its_checkpoint_opens_anywhere(tmp_path):
    """The same seed gives the same start on every device (the weights drawn on the CPU);
    a few steps there follow the CPU's losses; the checkpoint reads back on the CPU and a
    resumed run trains on the device again."""
    from explorer.core.experiments.train_text import default_text
    from explorer.core.experiments.training import Trainer, TrainSettings
    from explorer.core.weights.checkpoints import load_checkpoint

    def run(device, out):
        settings = TrainSettings(preset="tiny", max_steps=4, batch_size=2, eval_every=4,
                                 eval_batches=1, sample_tokens=2, seed=5, snapshots=0,
                                 precision="float32", drop_rate=0.0, warmup_steps=1,
                                 device=device)
        trainer = Trainer(default_text(), settings, out)
        steps = [e.loss for e in trainer.run() if type(e).__name__ == "StepEvent"]
        return trainer, steps

    cpu, cpu_steps = run("cpu", tmp_path / "cpu")
    there, steps = run(DEVICE, tmp_path / "there")
    assert str(next(there.model.parameters()).device).startswith(DEVICE)
    assert there.model.out_head.weight is there.model.tok_emb.weight  # still tied
    first = (cpu.state.history[0], there.state.history[0])
    assert first[1]["val_loss"] == pytest.approx(first[0]["val_loss"], abs=1e-4)
    assert steps == pytest.approx(cpu_steps, abs=1e-3) and steps[-1] < steps[0]
    opened = load_checkpoint(tmp_path / "there" / "model.safetensors").model  # on the CPU
    for (name, a), b in zip(opened.state_dict().items(), there.model.state_dict().values()):
        assert torch.equal(a, b.cpu()), name
    again = Trainer.resume(tmp_path / "there", default_text(), max_steps=6)
    assert str(next(again.model.parameters()).device).startswith(DEVICE)
    assert [type(e).__name__ for e in again.run()].count("StepEvent") == 2


def test_a_device_the_machine_has_not_is_refused_with_what_it_has():
    from explorer.core.experiments.training import Trainer, TrainSettings
    if torch.cuda.is_available():
        pytest.skip("this machine has a CUDA device")
    with pytest.raises(ValueError, match="cpu"):
        Trainer("x " * 2000, TrainSettings(preset="tiny", device="cuda"))
