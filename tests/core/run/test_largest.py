"""The largest entries of a long row: the same as torch.topk and torch.argmax."""

import pytest
import torch

from explorer.core.run.largest import LONG, ROW, arg_max, top_k

LENGTHS = [7, LONG - 1, LONG, 50257, 151936, 262144, 262144 + 37]


def rows(n: int, seed: int) -> list[torch.Tensor]:
    """Distinct values; integers with many ties; -inf over most of it; NaN in a whole
    row, in the values past the last row, and both."""
    g = torch.Generator().manual_seed(seed)
    plain = torch.randn(n, generator=g)
    ties = torch.randint(0, 5, (n,), generator=g).float()
    masked = torch.full((n,), float("-inf"))
    masked[torch.randint(0, n, (3,), generator=g)] = torch.randn(3, generator=g)
    out = [plain, ties, masked]
    for at in (n // 3, n - 1):
        nan = plain.clone()
        nan[at] = float("nan")
        out.append(nan)
    return out


@pytest.mark.parametrize("n", LENGTHS)
def test_arg_max_is_argmax_ties_and_nan_included(n):
    for x in rows(n, n):
        assert arg_max(x) == int(torch.argmax(x))


@pytest.mark.parametrize("n", LENGTHS)
@pytest.mark.parametrize("k", [1, 5, 10, 40])
def test_top_k_is_topk(n, k):
    k = min(k, n)
    for i, x in enumerate(rows(n, n + k)):
        values, ids = top_k(x, k)
        want = torch.topk(x, k)
        torch.testing.assert_close(values, want.values, rtol=0, atol=0, equal_nan=True)
        if i == 0:  # distinct values: the very same ids
            assert torch.equal(ids, want.indices)
        assert len(set(ids.tolist())) == k
        same = (x[ids] == values) | (x[ids].isnan() & values.isnan())
        assert bool(same.all())


def test_the_best_value_past_the_last_row_counts():
    x = torch.zeros(ROW * 100 + 3)
    x[-2] = 5.0
    x[7] = 4.0
    assert arg_max(x) == len(x) - 2
    values, ids = top_k(x, 2)
    assert values.tolist() == [5.0, 4.0] and ids.tolist() == [len(x) - 2, 7]
    x[3] = 5.0  # equal maxima: the first
    assert arg_max(x) == 3 == int(torch.argmax(x))
