"""A tensor's statistics in one sweep (core/run/sweep.py) are those of its groups one by
one: the same counts and bins, the same sums to float32's rounding, for every kind of
tensor a pass makes (infinities, NaN, one bin, a histogram's edges)."""

import numpy as np
import pytest
import torch

from explorer.core.gpt.nodes import HistRange
from explorer.core.run import fused
from explorer.core.run.stats import Group, NodeStats, Source
from explorer.core.run.sweep import PAIRS, fold, pair_counts

from .same_stats import MASKED, cases, differences, group_by_group


@pytest.fixture(autouse=True)
def no_kernels(monkeypatch):
    monkeypatch.setitem(fused._STATE, "kernels", None)  # the sweep's own numbers


@pytest.mark.parametrize("name", sorted(cases(3)))
def test_one_sweep_gives_every_group_as_alone(name):
    case = cases(40)[name]
    assert differences(case.x, case.hist) == []


@pytest.mark.parametrize("name", ["residual", MASKED, "NaN"])
def test_a_batch_mask_leaves_the_same_positions_out(name):
    case = cases(40)[name]
    x, hist = case.x, case.hist
    x = x.reshape(4, 10, -1) if x.dim() == 2 else x
    valid = torch.rand(x.shape[:-1], generator=torch.Generator().manual_seed(1)) > 0.3
    assert differences(x, hist, valid) == []


def test_blocks_of_a_tensor_larger_than_one_add_up():
    # 700 rows of 1001: several blocks and a short last one
    x = torch.randn(700, 1001, generator=torch.Generator().manual_seed(2)) * 5
    x[650:, :] = float("-inf")  # the last blocks hold the infinity
    assert differences(x, HistRange(-10.0, 10.0, 100)) == []


def test_a_group_read_first_and_the_others_later_are_the_same():
    case = cases(40)[MASKED]
    x, hist = case.x, case.hist
    stats = NodeStats.of(Source(x, hist), now=())
    assert stats.hist.sum() == int((x.isfinite() & (x >= -100) & (x <= 100)).sum())
    assert not stats.has(Group.TOP) and stats.has(Group.MOMENTS)  # moments with the hist
    stats.complete()
    want = group_by_group(x, hist)
    assert stats.under == want["under"] and np.array_equal(stats.top_dims, want["top_dims"])
    assert stats.n_inf == int(torch.isinf(x).sum())


@pytest.mark.parametrize("n", [1, 2, 7, 4096, 4099])
@pytest.mark.parametrize("skew", [False, True])
def test_pair_counts_are_bincounts(n, skew):
    g = torch.Generator().manual_seed(n)
    codes = torch.zeros(n, dtype=torch.uint8) + 1 if skew else \
        torch.randint(0, 102, (n,), dtype=torch.uint8, generator=g)
    striped = codes.clone()
    striped[::4] += 128  # the low byte of every other pair
    table = torch.zeros(PAIRS + 128, dtype=torch.int64)
    pair_counts(striped, table)
    assert torch.equal(fold(table, 102), torch.bincount(codes.long(), minlength=102))
