"""Statistics when something shows them: a pass that computes only the moments and leaves
the details (histogram, top dimensions, token norms, GELU shares) for later gives exactly
the numbers of a pass that computes everything at once; kept tensors are the module
outputs themselves, never changed afterwards; the causal pattern computed in chunks is
the book's."""

import dataclasses
import math

import numpy as np
import pytest
import torch

from explorer.core.gpt import layers
from explorer.core.base.cancel import Cancelled
from explorer.core.run.capture import Capture
from explorer.core.gpt.config import preset
from explorer.core.gpt.build import build_model
from explorer.core.gpt.nodes import all_hook_names
from explorer.core.run.passes import EVERYTHING, Keep, run_prompt
from explorer.core.run.stats import DETAILS, SCALAR_NAMES

IDS = list(range(100, 100 + 150))  # more than one chunk of pattern rows (64)


def tiny(**changes):
    return dataclasses.replace(preset("tiny"), context_length=256, **changes)


def configs():
    tiny_ = tiny()
    return {"tiny pre-LN": tiny_,
            "tiny post-LN": tiny(norm_position="post"),
            "wider, 3 layers": tiny(emb_dim=48, n_heads=3, n_layers=3)}


def same(a, b) -> bool:
    if isinstance(a, np.ndarray):
        return a.shape == b.shape and np.array_equal(a, b, equal_nan=True)
    return a == b or (isinstance(a, float) and math.isnan(a) and math.isnan(b))


@pytest.mark.parametrize("name", list(configs()))
def test_later_details_equal_eager_ones_for_every_node(name):
    model = build_model(configs()[name], seed=3)
    eager = run_prompt(model, IDS, dataclasses.replace(EVERYTHING, later=False))
    lazy = run_prompt(model, IDS, dataclasses.replace(EVERYTHING, now=("trf_blocks.1.norm1",)))
    assert eager.ready and not lazy.ready and not lazy.notices  # nothing cropped
    assert lazy.views["trf_blocks.1.norm1"].stats.ready  # asked for now
    pending = [n for n, v in lazy.views.items() if not v.stats.ready]
    assert "out_head" in pending and "trf_blocks.0.att.attn_weights" in pending
    assert list(lazy.gelu_shares) == [] and len(lazy.shares_later) == model.cfg.n_layers
    for n, v in lazy.views.items():  # the moments are there before anything completes
        for field in [f for f in SCALAR_NAMES if f not in DETAILS] + ["count", "n_nan", "n_inf"]:
            assert same(getattr(v.stats, field), getattr(eager.views[n].stats, field)), (n, field)
    assert "out_head" in [n for n, v in lazy.views.items() if not v.stats.ready]  # reading
    lazy.complete()                                                           # moments: no work
    assert lazy.ready
    assert set(lazy.views) == set(eager.views)
    for n, v in lazy.views.items():
        for field in DETAILS:
            assert same(getattr(v.stats, field), getattr(eager.views[n].stats, field)), (n, field)
    for n, shares in eager.gelu_shares.items():
        assert lazy.gelu_shares[n] == shares


def test_reading_a_detail_computes_it_and_complete_stops_between_nodes():
    model = build_model(tiny(), seed=1)
    eager = run_prompt(model, IDS, dataclasses.replace(EVERYTHING, later=False))
    lazy = run_prompt(model, IDS, EVERYTHING)
    stats = lazy.views["trf_blocks.0.ff.layers.1"].stats
    assert not stats.ready and stats.has("moments") and not stats.has("hist")
    assert np.array_equal(stats.hist, eager.views["trf_blocks.0.ff.layers.1"].stats.hist)
    assert stats.has("hist") and not stats.has("norms") and not stats.ready  # its group only
    assert np.array_equal(stats.token_l2, eager.views["trf_blocks.0.ff.layers.1"].stats.token_l2)
    assert stats.has("norms") and not stats.has("top")
    stats.complete()
    assert stats.ready
    asked = []
    with pytest.raises(Cancelled):
        lazy.complete(should_stop=lambda: asked.append(1) or len(asked) > 5)
    assert len(asked) == 6 and not lazy.ready  # five nodes done, then stopped
    left = sum(not v.stats.ready for v in lazy.views.values())
    assert 0 < left < len(lazy.views) - 5
    lazy.complete()
    assert lazy.ready


def test_statistics_only_and_float16_and_batches_stay_eager():
    model = build_model(tiny(), seed=1)
    for keep in (Keep(tensors=False, later=True), Keep(float16=True, later=True)):
        result = run_prompt(model, IDS[:9], keep)
        assert result.ready, keep  # nothing kept in float32: the details were computed at once
    with torch.inference_mode(), Capture(model, tensors=True, later=True,
                                         mask=torch.tensor([[True] * 5 + [False] * 4])) as cap:
        model(torch.tensor([IDS[:9]]))
    assert all(r.stats.ready for r in cap)


@pytest.mark.parametrize("position", ["pre", "post"])
def test_kept_outputs_are_never_changed_after_their_hook(position):
    """Capture keeps each module's output itself (no copy): every kept tensor must equal a
    copy taken the moment the module returned it."""
    model = build_model(tiny(norm_position=position), seed=2)
    copies, where = {}, {}
    modules = dict(model.named_modules())
    names = all_hook_names(model.cfg, include_pattern=True)

    def hook(name):
        def record(module, inputs, output):
            copies[name], where[name] = output.detach().clone(), output.data_ptr()
        return record

    handles = [modules[n].register_forward_hook(hook(n)) for n in names]
    try:
        with torch.inference_mode(), Capture(model, tensors=True, attention=True) as cap:
            model(torch.tensor([IDS]))
    finally:
        for h in handles:
            h.remove()
    for name in names:
        kept = cap[name].tensor
        assert kept.data_ptr() == where[name], name  # the output itself, not a copy
        assert torch.equal(kept, copies[name]), name


def test_chunked_causal_pattern_is_the_books():
    torch.manual_seed(0)
    b, h, t, hd = 2, 3, 150, 16
    q, k, v = (torch.randn(b, h, t, hd) for _ in range(3))
    scores = q @ k.transpose(2, 3) / math.sqrt(hd)
    scores = scores.masked_fill(torch.ones(t, t, dtype=torch.bool).triu(1), float("-inf"))
    book = torch.softmax(scores, dim=-1)
    pattern = layers.causal_softmax(q, k)
    torch.testing.assert_close(pattern, book, atol=1e-6, rtol=1e-5)
    assert torch.all(pattern.triu(1) == 0)
    torch.testing.assert_close(layers.causal_matmul(pattern, v), book @ v, atol=1e-5, rtol=1e-5)
    # after 100 cached positions: the last 50 queries against all 150 keys
    tail = layers.causal_softmax(q[:, :, 100:], k)
    torch.testing.assert_close(tail, book[:, :, 100:], atol=1e-6, rtol=1e-5)
    torch.testing.assert_close(layers.causal_matmul(tail, v), (book @ v)[:, :, 100:],
                               atol=1e-5, rtol=1e-5)
