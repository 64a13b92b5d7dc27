"""Stopping long work: between blocks of a forward pass, between tokens, between
training steps; the next action works afterwards."""

import pytest
import torch

from explorer.core.base.cancel import Cancelled
from explorer.core.run.capture import StopCheck
from explorer.core.gpt.config import preset
from explorer.core.gpt.build import build_model
from explorer.core.sources import ModelSpec
from explorer.ui.base.engine import Engine


def hooks_left(model):
    return sum(len(m._forward_hooks) + len(m._forward_pre_hooks) for m in model.modules())


def test_stop_check_stops_a_forward_within_one_block():
    model = build_model(preset("tiny", n_layers=6), seed=0)
    ran = []
    for block in model.trf_blocks:
        block.register_forward_hook(lambda m, i, o: ran.append(1))
    calls = {"n": 0}

    def stop_after_two():
        calls["n"] += 1
        return calls["n"] > 2

    with pytest.raises(Cancelled):
        with StopCheck(model, stop_after_two):
            model(torch.tensor([[1, 2, 3]]))
    assert len(ran) == 2  # blocks 0 and 1 ran, block 2 never started
    for block in model.trf_blocks:
        block._forward_hooks.clear()
    assert hooks_left(model) == 0


def test_a_stopped_engine_job_skips_its_generation_and_the_next_one_works(qtbot):
    from explorer.core.run.generation import GenerationSettings
    from explorer.core.run.passes import prompt_then_generate

    engine = Engine()
    loaded, reports, ends = [], [], []
    engine.load(ModelSpec(preset="tiny"), finished=loaded.append)
    qtbot.waitUntil(lambda: bool(loaded), timeout=60_000)

    def run(ctx):
        return prompt_then_generate(ctx.model, [6109, 3626, 6100, 345],
                                    GenerationSettings(max_new_tokens=3), ctx.report,
                                    ctx.should_stop)

    calls = {"n": 0}

    def stop_in_block_1(ctx):  # Esc pressed while the prompt pass runs: within a block
        def should_stop():
            calls["n"] += 1
            return calls["n"] > 1
        return prompt_then_generate(ctx.model, [1, 2, 3], GenerationSettings(max_new_tokens=3),
                                    ctx.report, should_stop)

    engine.submit(stop_in_block_1, "stopped run", progress=reports.append, finished=ends.append,
                  cancelled=lambda: ends.append("cancelled"))
    qtbot.waitUntil(lambda: bool(ends), timeout=60_000)
    assert ends == ["cancelled"] and reports == [] and calls["n"] == 2  # block 1 never ran
    assert hooks_left(engine.loaded.model) == 0
    other = engine.submit(run, "queued and cancelled", finished=ends.append,
                          cancelled=lambda: ends.append("cancelled too"))
    other.cancel()  # cancelled before it starts: never runs
    engine.submit(run, "the next run", progress=reports.append, finished=ends.append)
    qtbot.waitUntil(lambda: len(ends) == 3, timeout=60_000)
    assert ends[1:] == ["cancelled too", "max_new_tokens"]
    assert [getattr(r, "step", "completed") for r in reports] == [None, "completed", 0, 1, 2]
    engine.shutdown()



def _stop_after(n: int):
    asked = {"n": 0}

    def should_stop():
        asked["n"] += 1
        return asked["n"] > n
    return should_stop, asked


def test_a_random_init_stops_between_its_parameters():
    from explorer.core.sources import random_model
    should_stop, asked = _stop_after(5)
    with pytest.raises(Cancelled):
        random_model("gpt2-small", should_stop=should_stop)
    from explorer.core.gpt.model import GPTModel
    with torch.device("meta"):
        n_params = len(list(GPTModel(preset("gpt2-small")).parameters()))
    assert asked["n"] == 6 and n_params == 196  # the sixth ask stopped it: 190 never drawn


def test_a_large_safetensors_read_stops_between_its_chunks(tmp_path, monkeypatch):
    from safetensors.torch import save_file

    from explorer.core.weights import hf_files
    path = tmp_path / "w.safetensors"
    save_file({"a": torch.arange(4096, dtype=torch.float32)}, str(path))
    monkeypatch.setattr(hf_files, "READ_CHUNK", 1024)  # 16 KiB file: 17 chunks
    should_stop, asked = _stop_after(3)
    with pytest.raises(Cancelled):
        hf_files.read_safetensors(path, should_stop)
    assert asked["n"] == 4
    tensors, _ = hf_files.read_safetensors(path, lambda: False)  # whole, chunk by chunk
    assert torch.equal(tensors["a"], torch.arange(4096, dtype=torch.float32))
