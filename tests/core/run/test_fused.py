"""The statistics' compiled kernels (core/run/fused.py) give the numbers of the groups one
by one for every kind of tensor a pass makes; a shape they were not compiled for, a
machine without a compiler and GPT_EXPLORER_COMPILE=0 take the sweep's way, with the
same numbers."""

import os
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import numpy as np
import pytest
import torch

from explorer.core.gpt.nodes import HistRange
from explorer.core.run import fused

from explorer.core.run.stats import Group, NodeStats, Source

from .same_stats import MASKED, cases, differences, group_by_group

ROWS = 1100  # every case past fused.SMALLEST values
pytestmark = pytest.mark.slow  # compiling runs the C++ compiler


@pytest.fixture(scope="module")
def kernels():
    if not fused.warm(force=True):
        compilers = [c for c in ("cc", "gcc", "g++", "clang", "clang++") if shutil.which(c)]
        headers = Path(sysconfig.get_paths()["include"], "Python.h").exists()
        if not compilers or not headers:  # what torch.compile needs on a CPU
            pytest.skip(f"no C++ compiler or no Python headers here: {fused.error()}")
        pytest.fail(f"the kernels were not made, with {compilers} here: {fused.error()}")
    made = fused._STATE["kernels"]
    fused._STATE["kernels"] = None  # the other tests' statistics as they had them
    return made


@pytest.fixture
def ready(kernels, monkeypatch):
    monkeypatch.setitem(fused._STATE, "kernels", kernels)
    calls = []
    real = fused.statistics

    def counted(rows, hist):
        out = real(rows, hist)
        calls.append(out is not None)
        return out

    monkeypatch.setattr(fused, "statistics", counted)
    return calls


@pytest.mark.parametrize("name", sorted(cases(3)))
def test_the_kernels_give_every_group_as_alone_or_leave_it(ready, name):
    case = cases(ROWS)[name]
    assert differences(case.x, case.hist) == []
    used = case.kernels and case.x.numel() >= fused.SMALLEST
    assert ready[-1] == used, "the kernels were used or not"


def test_a_batch_mask_leaves_the_same_positions_out(ready):
    case = cases(ROWS)[MASKED]
    x, hist = case.x, case.hist
    valid = torch.rand(x.shape[:-1], generator=torch.Generator().manual_seed(1)) > 0.3
    assert differences(x, hist, valid) == [] and ready[-1]


def test_the_details_after_the_moments_come_from_the_kernels(ready):
    # the app's pass: the moments in the pass (the sweep), the rest before generating
    case = cases(ROWS)[MASKED]
    x, hist = case.x, case.hist
    stats = NodeStats.of(Source(x, hist), now=(Group.MOMENTS,))
    mean, std = stats.mean, stats.std
    assert ready == []  # the moments alone: the sweep's way
    stats.complete()
    assert ready == [True] and (stats.mean, stats.std) == (mean, std)
    want = group_by_group(x, hist)
    assert np.array_equal(stats.hist, want["hist"]) and (stats.under, stats.over) == (
        want["under"], want["over"])
    assert np.array_equal(stats.top_dims, want["top_dims"])
    assert stats.frac_neg == want["frac_neg"] and stats.frac_zero == want["frac_zero"]
    assert np.allclose(stats.token_l2, want["token_l2"], rtol=1e-6)


def test_a_shape_not_compiled_takes_the_sweep(ready):
    x = torch.randn(70000, 1, generator=torch.Generator().manual_seed(3))  # one feature
    assert differences(x, HistRange(-10.0, 10.0, 100)) == []
    assert ready and not any(ready)


def test_turned_off_nothing_is_compiled(monkeypatch):
    monkeypatch.setenv("GPT_EXPLORER_COMPILE", "0")
    monkeypatch.setitem(fused._STATE, "started", False)
    monkeypatch.setitem(fused._STATE, "kernels", None)
    assert fused.warm() is False and not fused._STATE["started"] and not fused.ready()


def test_the_kernels_let_go_of_the_lock_while_they_run(kernels):
    from torch._inductor import codecache

    call = codecache.CppPythonBindingsCodeCache.call_entry_function
    assert "PyEval_SaveThread()" in call and "kernel(a...)" in call


@pytest.mark.parametrize("n,features", [(2, 5), (3, 200000), (341, 768), (342, 768),
                                        (343, 768), (5000, 20), (1024, 1536), (9, 2 ** 20)])
@pytest.mark.parametrize("threads", [1, 2, 15])
def test_blocks_cover_every_row_and_none_has_one(n, features, threads):
    spans = fused.blocks(n, features, threads)
    assert spans[0][0] == 0 and spans[-1][1] == n
    assert all(a[1] == b[0] for a, b in zip(spans, spans[1:]))
    assert all(stop - start >= 2 for start, stop in spans)


def test_a_tensor_is_shared_among_threads_only_where_each_share_is_worth_it():
    """Two blocks a thread where every thread's share holds SHARE values or more; one
    thread's blocks are of BLOCK values."""
    assert len(fused.blocks(512, 576, 2)) == 1  # 295 k values: the caller alone
    assert len(fused.blocks(1024, 768, 1)) == 2  # 786 k: two blocks of BLOCK, one thread
    assert len(fused.blocks(1024, 768, 2)) == 4  # two threads, two blocks each
    assert len(fused.blocks(1024, 3072, 15)) == 16  # 3.1 M: eight threads of fifteen
    assert len(fused.blocks(12 * 12 * 1024, 1024, 2)) == 288  # blocks of BLOCK values


def test_blocks_deviations_are_the_whole_tensors():
    g = torch.Generator().manual_seed(4)
    x = (torch.randn(10, 500, generator=g) * 3 + torch.arange(10)[:, None] * 2).double()
    centres = x.mean(1) + torch.randn(10, generator=g, dtype=torch.float64) * 0.01
    d = x - centres[:, None]
    sums = torch.stack([centres, x.amin(1), x.amax(1), d.sum(1), (d ** 2).sum(1),
                        (d ** 3).sum(1), (d ** 4).sum(1)], 1)
    mean, s2, s4 = fused.deviations(sums.tolist(), [500] * 10)
    want = x.mean()
    assert mean == pytest.approx(float(want), rel=1e-12)
    assert s2 == pytest.approx(float(((x - want) ** 2).sum()), rel=1e-10)
    assert s4 == pytest.approx(float(((x - want) ** 4).sum()), rel=1e-10)


RACE = """
import sys, threading, time
from explorer.core.run import fused
from explorer.core.sources import random_model
seen = {}
def load():
    try:
        random_model("llama-mini", seed=0)
        seen["load"] = "loaded"
    except Exception as exc:
        seen["load"] = f"{type(exc).__name__}: {exc}"
loading = threading.Thread(target=load)
loading.start()
time.sleep(float(sys.argv[1]))
fused.warm(wait=False, force=True)
loading.join()
while not (fused.ready() or fused.error()):
    time.sleep(0.05)
print(seen["load"], "|", fused.error())
"""


@pytest.mark.parametrize("delay", [0.01, 0.03, 0.06])
def test_kernels_made_while_a_model_is_built_leave_both_whole(delay, tmp_path):
    """The window compiles the kernels on a thread of its own while its first model is
    being built; building one imports torch's compiler front end on first use. Both in a
    fresh process, the compiling started as the model's build is under way: the model
    loads and the kernels are made (importing torch's compiler from two ends at once, each
    thread waited on the other's half-made module: the load failed with an ImportError)."""
    script = tmp_path / "race.py"
    script.write_text(RACE)
    root = Path(__file__).resolve().parents[3]
    done = subprocess.run([sys.executable, str(script), str(delay)], cwd=root, capture_output=True,
                          text=True, env={**os.environ, "PYTHONPATH": str(root),
                                          "GPT_EXPLORER_COMPILE": "1"})
    assert done.returncode == 0, done.stderr[-2000:]
    loaded, error = done.stdout.strip().splitlines()[-1].split(" | ")
    assert loaded == "loaded"
    assert "Deadlock" not in error and "ImportError" not in error  # (no compiler: said so)
