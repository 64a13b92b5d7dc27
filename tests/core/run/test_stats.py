import math

import numpy as np
import pytest
import torch

from explorer.core.gpt.nodes import _HIST_BY_KIND as HIST_BY_KIND, HistRange
from explorer.core.run.row_stats import row_stats
from explorer.core.run.stats import SCALAR_NAMES, tensor_stats

H = HistRange(-4.0, 4.0, 80)


def numpy_reference(a: np.ndarray, hist: HistRange, topk: int = 5) -> dict:
    a = a.astype(np.float64)
    flat = a.reshape(-1)
    fin = flat[np.isfinite(flat)]
    mean = fin.mean()
    var = ((fin - mean) ** 2).mean()
    m4 = ((fin - mean) ** 4).mean()
    counts, _ = np.histogram(fin, bins=np.linspace(hist.lo, hist.hi, hist.bins + 1))
    rows = a.reshape(-1, a.shape[-1])
    per_dim = np.nan_to_num(np.abs(rows), nan=0.0, posinf=0.0).max(axis=0)
    return dict(
        mean=mean, std=math.sqrt(var), min=fin.min(), max=fin.max(),
        absmax=np.abs(fin).max(), rms=math.sqrt((fin ** 2).mean()),
        kurtosis=m4 / var ** 2 - 3.0, frac_neg=(fin < 0).mean(), frac_zero=(fin == 0).mean(),
        hist=counts, under=int((fin < hist.lo).sum()) + int(np.isneginf(flat).sum()),
        over=int((fin > hist.hi).sum()) + int(np.isposinf(flat).sum()),
        top_dims=np.argsort(-per_dim, kind="stable")[:topk],
        token_l2=np.sqrt((a ** 2).sum(-1)),
        n_nan=int(np.isnan(flat).sum()), n_inf=int(np.isinf(flat).sum()))


def known_tensor(seed=0, shape=(2, 7, 16)):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(shape, generator=g) * 1.7 + 0.3
    x[0, 1, :4] = 0.0  # exact zeros
    x[1, 2, 5] = 9.0  # above the histogram
    x[0, 3, 6] = -6.5  # below it
    x[1, 6, 11] = 7.5  # the largest |value| of its dim
    return x


def check(stats, ref, rtol=1e-5):
    for name in SCALAR_NAMES:
        assert getattr(stats, name) == pytest.approx(ref[name], rel=rtol, abs=1e-6), name
    np.testing.assert_array_equal(stats.hist, ref["hist"])
    assert (stats.under, stats.over, stats.n_nan, stats.n_inf) == (
        ref["under"], ref["over"], ref["n_nan"], ref["n_inf"])


def test_tensor_stats_match_numpy():
    x = known_tensor()
    stats = tensor_stats(x, H, topk=3)
    ref = numpy_reference(x.numpy(), H, topk=3)
    check(stats, ref)
    assert stats.count == x.numel()
    assert stats.frac_zero == pytest.approx(4 / x.numel())
    assert stats.hist.sum() + stats.under + stats.over == x.numel()
    np.testing.assert_array_equal(stats.top_dims, ref["top_dims"])
    assert stats.top_dims[0] == 5 and stats.top_values[0] == pytest.approx(9.0)
    assert stats.token_l2.shape == (2, 7)
    np.testing.assert_allclose(stats.token_l2, ref["token_l2"], rtol=1e-5)


def test_kurtosis_of_known_distributions():
    g = torch.Generator().manual_seed(1)
    gauss = tensor_stats(torch.randn(200_000, generator=g).reshape(-1, 100), H)
    uniform = tensor_stats(torch.rand(200_000, generator=g).reshape(-1, 100), H)
    assert abs(gauss.kurtosis) < 0.05  # excess kurtosis of a Gaussian is 0
    assert uniform.kurtosis == pytest.approx(-1.2, abs=0.03)
    assert gauss.std == pytest.approx(1.0, abs=0.01)


def test_nan_and_inf_are_counted_not_dropped_silently():
    x = known_tensor(2)
    x[0, 0, 0] = float("nan")
    x[1, 1, 1] = float("inf")
    x[1, 1, 2] = float("-inf")
    stats = tensor_stats(x, H)
    ref = numpy_reference(x.numpy(), H)
    check(stats, ref)
    assert (stats.n_nan, stats.n_inf) == (1, 2)
    assert math.isnan(stats.token_l2[0, 0]) and math.isinf(stats.token_l2[1, 1])


def test_constant_and_bfloat16_tensors():
    zeros = tensor_stats(torch.zeros(3, 4), H)
    assert zeros.std == 0 and zeros.frac_zero == 1 and math.isnan(zeros.kurtosis)
    x = known_tensor(3).bfloat16()
    check(tensor_stats(x, H), numpy_reference(x.float().numpy(), H), rtol=1e-4)


def test_row_stats_match_numpy_row_by_row():
    X = known_tensor(4).reshape(14, 16)[:6].clone()
    X[2, 3] = float("nan")
    X[4, 0] = float("inf")
    ranges = [HistRange(-4.0, 4.0, 80), HistRange(-2.0, 2.0, 80)] * 3
    lo = torch.tensor([r.lo for r in ranges])
    hi = torch.tensor([r.hi for r in ranges])
    rs = row_stats(X, lo, hi, 80, topk=4)
    for r, hist in enumerate(ranges):
        stats = rs.node_stats(r, hist)
        ref = numpy_reference(X[r:r + 1].numpy(), hist, topk=4)
        check(stats, ref)
        assert float(stats.token_l2) == pytest.approx(float(ref["token_l2"][0]), rel=1e-5, nan_ok=True)
        if np.isfinite(X[r].numpy()).all():
            np.testing.assert_array_equal(np.sort(stats.top_dims), np.sort(ref["top_dims"]))


@pytest.mark.parametrize("lowest", [0.0, 0.25])
def test_a_tensor_with_nothing_negative_matches_numpy(lowest):
    """Attention weights (exact zeros above the diagonal) and an all-positive tensor:
    their shares and top dimensions come from one pass each."""
    x = torch.softmax(known_tensor(6, (2, 12, 12)), dim=-1).tril() + lowest
    stats = tensor_stats(x, HistRange(0.0, 1.0, 20), topk=3)
    ref = numpy_reference(x.numpy(), HistRange(0.0, 1.0, 20), topk=3)
    check(stats, ref)
    assert stats.frac_neg == 0.0
    assert stats.frac_zero == pytest.approx(ref["frac_zero"]) and (stats.frac_zero > 0) == (lowest == 0)
    np.testing.assert_array_equal(np.sort(stats.top_dims), np.sort(ref["top_dims"]))
    np.testing.assert_allclose(stats.top_values, np.sort(np.abs(x.numpy()).reshape(-1, 12).max(0))[::-1][:3],
                               rtol=1e-6)


def test_row_stats_of_finite_rows_match_numpy_row_by_row():
    X = known_tensor(5).reshape(14, 16)[:6].clone()  # every value finite: the fast path
    X[1, :4] = 0.0
    ranges = [HistRange(-4.0, 4.0, 80), HistRange(-1.0, 1.0, 80)] * 3
    rs = row_stats(X, torch.tensor([r.lo for r in ranges]), torch.tensor([r.hi for r in ranges]),
                   80, topk=4)
    assert rs.n_nan.tolist() == rs.n_inf.tolist() == [0] * 6
    for r, hist in enumerate(ranges):
        stats = rs.node_stats(r, hist)
        ref = numpy_reference(X[r:r + 1].numpy(), hist, topk=4)
        check(stats, ref)
        np.testing.assert_array_equal(np.sort(stats.top_dims), np.sort(ref["top_dims"]))


def test_values_on_bin_edges_follow_histc():
    x = torch.tensor([[-4.0, -3.95, 0.0, 3.95, 4.0, 4.5]])
    t = tensor_stats(x, H)
    r = row_stats(x, torch.tensor([H.lo]), torch.tensor([H.hi]), H.bins).node_stats(0, H)
    np.testing.assert_array_equal(t.hist, r.hist)
    assert t.hist[0] == 2 and t.hist[-1] == 2 and t.over == r.over == 1  # hi is in the last bin


@pytest.mark.parametrize("kind", sorted(HIST_BY_KIND))
def test_histograms_bin_exactly_as_histc_for_every_node_kind(kind):
    """The fast byte-code histogram must put every value where torch.histc does, also
    values on and next to every bin edge, at the ends, and outside the range."""
    h = HIST_BY_KIND[kind]
    edges = torch.linspace(h.lo, h.hi, h.bins + 1, dtype=torch.float32)
    near = torch.cat([edges, torch.nextafter(edges, edges + 1), torch.nextafter(edges, edges - 1)])
    spread = torch.empty(20_000).uniform_(h.lo - 0.2 * (h.hi - h.lo), h.hi + 0.2 * (h.hi - h.lo))
    x = torch.cat([near, spread, torch.tensor([-0.0, 0.0])]).reshape(1, -1)
    s = tensor_stats(x, h)
    expected = torch.histc(x, bins=h.bins, min=h.lo, max=h.hi).long().numpy()
    np.testing.assert_array_equal(s.hist, expected)
    assert s.under == int((x < h.lo).sum()) and s.over == int((x > h.hi).sum())
    assert s.hist.sum() + s.under + s.over == x.numel()
    r = row_stats(x, torch.tensor([h.lo]), torch.tensor([h.hi]), h.bins).node_stats(0, h)
    np.testing.assert_array_equal(r.hist, expected)
    assert (r.under, r.over) == (s.under, s.over)
    assert s.frac_neg == pytest.approx(float((x < 0).float().mean()))  # -0.0 is not negative


@pytest.mark.parametrize("threads", [1, 2])
def test_small_tensors_run_on_one_thread_and_give_the_thread_count_back(threads):
    """Small tensors' statistics run with one torch thread (quicker than waking the
    others for each small operation); the caller's thread count is restored, also when
    the statistics fail, and the figures are those of the numpy reference."""
    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        x = known_tensor(3, shape=(3, 50, 64))
        seen = []
        real = torch.linalg.vector_norm

        def spy(*args, **kwargs):
            seen.append(torch.get_num_threads())
            return real(*args, **kwargs)

        torch.linalg.vector_norm = spy
        try:
            s = tensor_stats(x, H)
        finally:
            torch.linalg.vector_norm = real
        from explorer.core.base.cpu_work import _OPENMP

        # OpenMP builds switch to one thread; the native pool cannot, and is left alone
        assert seen == [1 if _OPENMP else threads]
        assert torch.get_num_threads() == threads
        ref = numpy_reference(x.numpy(), H)
        assert (s.min, s.max) == (pytest.approx(ref["min"]), pytest.approx(ref["max"]))
        np.testing.assert_array_equal(s.top_dims, ref["top_dims"])
        with pytest.raises(ValueError, match="mask"):
            tensor_stats(x, H, valid=torch.ones(2, 2, dtype=torch.bool))
        assert torch.get_num_threads() == threads
    finally:
        torch.set_num_threads(before)


def test_several_chunks_give_the_numbers_of_one_pass():
    """Large tensors go through the statistics a chunk at a time (cpu_work.chunks): over
    three chunks and a part, the histogram is torch.histc's and the moments numpy's."""
    from explorer.core.base.cpu_work import CHUNK

    x = torch.randn(3 * CHUNK + 17, generator=torch.Generator().manual_seed(5)) * 3
    x[:1000] = 0.0
    x[-5:] = 25.0  # above the range
    s = tensor_stats(x.reshape(-1, 1), H)
    expected = torch.histc(x[(x >= H.lo) & (x <= H.hi)], bins=H.bins, min=H.lo, max=H.hi)
    np.testing.assert_array_equal(s.hist, expected.long().numpy())
    assert (s.under, s.over) == (int((x < H.lo).sum()), int((x > H.hi).sum()))
    ref = x.double().numpy()
    assert s.std == pytest.approx(ref.std(), rel=1e-6)
    kurtosis = ((ref - ref.mean()) ** 4).mean() / ref.var() ** 2 - 3
    assert s.kurtosis == pytest.approx(kurtosis, rel=1e-3)  # float32 sums of 4th powers
    assert s.frac_zero == 1000 / x.numel() and s.frac_neg == pytest.approx((ref < 0).mean())


def test_chunk_loops_run_on_one_thread_and_give_the_count_back():
    from explorer.core.base.cpu_work import _OPENMP, CHUNK, chunks

    threads = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        inside = [torch.get_num_threads() for _ in chunks(torch.zeros(3 * CHUNK), one_thread=True)]
        assert inside == [1 if _OPENMP else 2] * 3 and torch.get_num_threads() == 2
        assert [torch.get_num_threads() for _ in chunks(torch.zeros(10))] == [2]
    finally:
        torch.set_num_threads(threads)


@pytest.mark.parametrize("seed", range(6))
def test_one_vectors_numpy_statistics_are_tensor_stats(seed):
    """The inspector's one-token statistics are computed with numpy on the GUI thread;
    they are the statistics tensor_stats gives, NaN, Inf and the range's edges included."""
    import numpy as np
    from explorer.core.gpt.nodes import HistRange
    from explorer.core.run.vector_stats import vector_stats
    rng = np.random.default_rng(seed)
    x = (rng.standard_normal(768) * rng.choice([0.1, 1.0, 30.0])).astype(np.float32)
    hist = HistRange(-4.0, 4.0, 80)
    if seed >= 2:
        x[:5] = [4.0, -4.0, 0.0, -0.0, 0.05]  # on the edges, zeros of both signs
    if seed >= 4:
        x[5:9] = [np.nan, np.inf, -np.inf, np.nan]
    ours, theirs = vector_stats(x, hist), tensor_stats(torch.from_numpy(x).reshape(1, -1), hist)
    for key in ("mean", "std", "min", "max", "absmax", "rms", "kurtosis", "frac_neg", "frac_zero"):
        assert getattr(ours, key) == pytest.approx(getattr(theirs, key), rel=1e-5, abs=1e-5), key
    for key in ("count", "n_nan", "n_inf", "under", "over"):
        assert getattr(ours, key) == getattr(theirs, key), key
    np.testing.assert_array_equal(ours.hist, theirs.hist)
    np.testing.assert_array_equal(ours.top_dims, theirs.top_dims)
    np.testing.assert_allclose(ours.top_values, theirs.top_values, rtol=1e-6)
    np.testing.assert_allclose(ours.token_l2, theirs.token_l2, rtol=1e-5)


@pytest.mark.parametrize("fill", [-math.inf, math.inf])
@pytest.mark.parametrize("rows", [7, 1200])  # one chunk, and a causal 12-head block's worth
def test_one_kind_of_infinity_is_left_out_without_a_copy_as_numpy_does(fill, rows):
    """A masked score holds -inf above the diagonal: its moments, shares, histogram and top
    dimensions are those of its finite values (numpy's), the infinities counted as below
    (or above) the range; a tensor of infinities only has NaN moments."""
    g = torch.Generator().manual_seed(rows)
    x = torch.randn(rows, 300, generator=g) * 3 + 0.5
    x[:5, :7] = 0.0
    x[0, 0] = 99.0  # above the range
    x = x.masked_fill(torch.ones(rows, 300, dtype=torch.bool).triu(1), fill)
    s = tensor_stats(x, H, topk=4)
    ref = numpy_reference(x.numpy(), H, topk=4)
    check(s, ref, rtol=1e-4)  # float32 sums of fourth powers: the kurtosis to 1e-4
    np.testing.assert_array_equal(s.top_dims, ref["top_dims"])
    np.testing.assert_allclose(s.token_l2, ref["token_l2"], rtol=1e-5)
    assert s.n_inf == int(np.isinf(x.numpy()).sum()) > 0 and s.n_nan == 0
    only = tensor_stats(torch.full((3, 4), fill), H)
    assert math.isnan(only.mean) and math.isnan(only.frac_neg) and only.n_inf == 12
    assert (only.under, only.over) == ((12, 0) if fill < 0 else (0, 12))
    assert only.hist.sum() == 0
