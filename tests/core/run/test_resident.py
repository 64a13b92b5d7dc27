"""The GPU's way of capturing, run with the CPU as the device: statistics computed with
tensor operations only inside each hook, kept tensors held where they are, and one copy
of everything as the pass ends (``resident.py``). It must give what the CPU's capture
gives: the same tensors, the same counts, histograms and top dimensions, moments equal to
float32 rounding, for every node of both orders and the Llama block, attention's steps,
a padded batch, half precision, NaN and infinities."""

import math

import numpy as np
import pytest
import torch

from explorer.core.gpt.nodes import HistRange
from explorer.core.run.capture import Capture
from explorer.core.run import resident
from explorer.core.run.resident import batch_numbers, unpack
from explorer.core.run.stats import tensor_stats
from tests.core.run.test_on_read import model_of

IDS = list(range(500, 500 + 40))
EXACT = ("count", "n_nan", "n_inf", "under", "over", "frac_neg", "frac_zero")
CLOSE = ("mean", "std", "min", "max", "absmax", "rms")


def assert_same(got, want, where=""):
    for field in EXACT:
        a, b = getattr(got, field), getattr(want, field)
        assert a == b or (math.isnan(a) and math.isnan(b)), (where, field, a, b)
    for field in CLOSE:
        a, b = getattr(got, field), getattr(want, field)
        assert a == pytest.approx(b, rel=1e-5, abs=1e-6, nan_ok=True), (where, field)
    # m4 / var^2 = kurtosis + 3: the CPU sums fourth powers in float32, the device in float64
    assert got.kurtosis + 3 == pytest.approx(want.kurtosis + 3, rel=2e-5, nan_ok=True), where
    np.testing.assert_array_equal(got.hist, want.hist, err_msg=where)
    np.testing.assert_array_equal(got.top_dims, want.top_dims, err_msg=where)
    np.testing.assert_allclose(got.top_values, want.top_values, rtol=1e-6, err_msg=where)
    np.testing.assert_allclose(got.token_l2, want.token_l2, rtol=1e-6, err_msg=where)


def both(model, ids, **kw):
    caps = []
    for resident in (False, True):
        with torch.inference_mode(), Capture(model, resident=resident, **kw) as cap:
            model(torch.tensor(ids))
        caps.append(cap)
    return caps


@pytest.mark.parametrize("name", ["pre", "post", "llama"])
def test_the_device_path_on_the_cpu_equals_the_cpu_capture_node_for_node(name):
    model = model_of(name, seed=6)
    cpu, resident = both(model, [IDS], tensors=True, inside=True)
    assert list(cpu.records) == list(resident.records)
    assert any(".att.masked_scores" in n for n in resident.records)
    for n, record in resident.records.items():
        assert torch.equal(record.tensor, cpu[n].tensor), n
        assert (record.shape, record.dtype) == (cpu[n].shape, cpu[n].dtype)
        assert_same(record.stats, cpu[n].stats, n)
    assert resident.kept_bytes == cpu.kept_bytes and not resident.dropped


def test_a_padded_batch_half_precision_and_a_budget_go_the_same_way():
    model = model_of("pre", seed=6)
    mask = torch.tensor([[True] * 40, [True] * 9 + [False] * 31])
    ids = [IDS, IDS[:9] + [0] * 31]
    cpu, resident = both(model, ids, tensors=True, attention=True, mask=mask, float16=True,
                         budget_bytes=200_000)
    assert resident.dropped == cpu.dropped and resident.dropped  # the budget ran out
    for n, record in resident.records.items():
        assert (record.tensor is None) == (cpu[n].tensor is None), n
        if record.tensor is not None:
            assert record.tensor.dtype == torch.float16 and torch.equal(record.tensor, cpu[n].tensor)
        assert_same(record.stats, cpu[n].stats, n)
    assert np.isnan(resident["trf_blocks.0.add2"].stats.token_l2[1, 9:]).all()
    cpu, resident = both(model, [IDS])  # statistics only
    for n, record in resident.records.items():
        assert record.tensor is None and cpu[n].tensor is None
        assert_same(record.stats, cpu[n].stats, n)


@pytest.mark.parametrize("case", ["nan", "neg-inf", "both-inf", "all-inf", "zeros", "one-vector"])
def test_the_device_numbers_of_awkward_tensors_are_tensor_stats(case):
    g = torch.Generator().manual_seed(1)
    x = torch.randn(6, 9, 12, generator=g) * 2
    if case == "nan":
        x[0, 0, :3] = math.nan
        x[1, 2, 4] = math.inf
    elif case == "neg-inf":
        x = x.masked_fill(torch.ones(9, 12, dtype=torch.bool).triu(1), -math.inf)
    elif case == "both-inf":
        x[2, 3, 5], x[4, 1, 1] = math.inf, -math.inf
    elif case == "all-inf":
        x.fill_(-math.inf)
    elif case == "zeros":
        x.zero_()
    else:
        x = x[0, 0].reshape(1, 12)
    hist = HistRange(-3.0, 3.0, 30)
    rows = x.reshape(1, -1, x.shape[-1])  # one node, its vectors, their features
    numbers = batch_numbers(rows, torch.tensor([hist.lo]), torch.tensor([hist.hi]), hist.bins, 5)
    got = unpack(numbers[0].numpy(), hist, 5, tuple(x.shape))
    assert_same(got, tensor_stats(x, hist, 5), case)


@pytest.mark.slow  # compiles: a C++ compiler's process
def test_compiled_the_device_statistics_are_the_same(monkeypatch):
    """What a CUDA device runs (``batch_numbers`` compiled, fused kernels), compiled here
    for the CPU: every node of a padded batch, attention's steps included, and awkward
    tensors, as the CPU's capture and ``tensor_stats`` give them."""
    monkeypatch.setenv("GPT_EXPLORER_COMPILE", "1")
    monkeypatch.setattr(resident, "COMPILED_ON", ("cpu",))
    model = model_of("llama", seed=6)
    mask = torch.tensor([[True] * 40, [True] * 9 + [False] * 31])
    cpu, there = both(model, [IDS, IDS[:9] + [0] * 31], tensors=True, inside=True, mask=mask)
    assert resident.how() == "compiled"
    for n, record in there.records.items():
        assert_same(record.stats, cpu[n].stats, n)
    x = torch.randn(3, 9, 12, generator=torch.Generator().manual_seed(1)) * 2
    x[0, 0, :3], x[1, 2, 4], x[2] = math.nan, math.inf, -math.inf
    hist = HistRange(-3.0, 3.0, 30)
    lo, hi = torch.full((3,), hist.lo), torch.full((3,), hist.hi)
    numbers = resident.compiled()(x, lo, hi, hist.bins, 5)
    for r in range(3):
        got = unpack(numbers[r].numpy(), hist, 5, tuple(x[r].shape))
        assert_same(got, tensor_stats(x[r], hist, 5), r)
