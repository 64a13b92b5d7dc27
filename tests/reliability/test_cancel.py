"""Stopping long work: between blocks of a forward pass, between tokens, between
training steps; the next action works afterwards."""

import pytest
import torch

from explorer.core.capture import Cancelled, StopCheck
from explorer.core.config import preset
from explorer.core.model import build_model
from explorer.ui.engine import Engine, ModelSpec


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


def test_engine_stop_during_the_prompt_pass_skips_the_generation_and_recovers(qtbot):
    engine = Engine()
    loaded, prompts, done = [], [], []
    engine.modelLoaded.connect(loaded.append)
    engine.promptDone.connect(prompts.append)
    engine.generationDone.connect(done.append)
    engine.load(ModelSpec(preset="tiny"))
    assert loaded
    engine.stop_event.set()  # Esc pressed while the prompt pass runs
    engine.analyse("Every effort moves you")
    from explorer.core.generation import GenerationSettings
    engine.generate("Every effort moves you", GenerationSettings(max_new_tokens=3))
    assert prompts == [] and done == ["stopped"]
    assert hooks_left(engine.loaded.model) == 0
    engine.analyse("Every effort moves you")  # the next action works
    engine.generate("Every effort moves you", GenerationSettings(max_new_tokens=3))
    assert len(prompts) == 1 and done[-1] == "max_new_tokens"
