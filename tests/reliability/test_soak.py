"""Soak: 300 consecutive runs as the app makes them (a captured prompt pass, then
generation with per-token capture), in one process."""

import pytest

import gc

from explorer.core.gpt.config import preset
from explorer.core.run.generation import GenerationSettings
from explorer.core.gpt.build import build_model
from explorer.core.run.passes import prompt_then_generate

pytestmark = pytest.mark.slow  # the whole module: ./test.sh -m "not slow" leaves it out


def rss() -> int:
    with open("/proc/self/statm") as fh:
        return int(fh.read().split()[1]) * 4096


def hooks_left(model) -> int:
    return sum(len(m._forward_hooks) + len(m._forward_pre_hooks) for m in model.modules())


def test_three_hundred_generations_leave_no_hooks_and_flat_memory(capsys):
    model = build_model(preset("tiny"), seed=0)
    settings = GenerationSettings(max_new_tokens=4, capture_steps=True, stop_at_eot=False)

    def one(i: int) -> None:
        passes = []
        prompt_then_generate(model, [1 + i % 50, 2, 3, 4], settings, passes.append)
        assert len(passes) == 6 and passes[0].views["trf_blocks.1.add2"].array.shape == (1, 4, 32)
        assert passes[-1].views["trf_blocks.1.add2"].stats.count == 32
        assert hooks_left(model) == 0

    for i in range(30):  # warm-up: allocator pools, lazy imports
        one(i)
    gc.collect()
    start = rss()
    for i in range(300):
        one(i)
    gc.collect()
    growth = rss() - start
    with capsys.disabled():
        print(f"\nsoak: 300 generate runs with captures, resident memory growth {growth / 2**20:.1f} MiB")
    assert growth < 20 * 2**20
