"""Statistics when read: a capture that keeps every tensor computes no statistic in the
pass, and each group (moments, shares of signs, histogram, top dimensions, norms) the
first time something reads it: the same numbers, field by field, as the eager pass, for
every node of both orders, attention's steps, a padded batch and the Llama block. The
command line computes only what it prints."""

import dataclasses
import math

import numpy as np
import pytest
import torch

from explorer.cli.inspect import PRINTED, line
from explorer.core.gpt.config import preset
from explorer.core.gpt.build import build_model
from explorer.core.run.batch import make_batch
from explorer.core.run.capture import Capture
from explorer.core.run.passes import Keep, run_prompt
from explorer.core.run.stats import ALL_GROUPS, GROUPS

IDS = list(range(300, 300 + 70))
FIELDS = [f for names in GROUPS.values() for f in names] + ["count"]


def same(a, b) -> bool:
    if isinstance(a, np.ndarray):
        return a.shape == b.shape and np.array_equal(a, b, equal_nan=True)
    return a == b or (isinstance(a, float) and math.isnan(a) and math.isnan(b))


def model_of(name: str, seed: int = 4):
    """A small random model: "pre" (GPT-2's order), "post" (Post-LN) or "llama"."""
    cfg = dataclasses.replace(preset("llama-tiny" if name == "llama" else "tiny"),
                              context_length=128)
    if name == "post":
        cfg = dataclasses.replace(cfg, norm_position="post")
    return build_model(cfg, seed=seed)


def every_group_untouched(stats) -> bool:
    return not any(stats.has(g) for g in ALL_GROUPS)


@pytest.mark.parametrize("name", ["pre", "post", "llama"])
def test_statistics_read_later_equal_the_eager_ones_for_every_node_and_attention_step(name):
    model = model_of(name)
    keep = Keep(inside=True, gelu_shares=True)  # every node, the patterns, attention's steps
    eager = run_prompt(model, IDS, keep)
    lazy = run_prompt(model, IDS, dataclasses.replace(keep, on_read=True))
    assert set(lazy.views) == set(eager.views)
    assert any(".att.masked_scores" in n for n in lazy.views)  # the steps are there
    assert all(every_group_untouched(v.stats) for v in lazy.views.values())
    assert not lazy.gelu_shares and bool(lazy.shares_later) == (name != "llama")  # GELU's wait
    order = list(lazy.views)[::-1]  # read back to front, one group at a time
    for group in reversed(ALL_GROUPS):
        for n in order:
            stats, want = lazy.views[n].stats, eager.views[n].stats
            for field in GROUPS[group]:
                assert same(getattr(stats, field), getattr(want, field)), (n, field)
            assert stats.has(group)
    lazy.complete()
    assert lazy.ready and lazy.gelu_shares == eager.gelu_shares


def test_a_padded_batch_reads_its_statistics_without_the_padding_as_the_eager_pass_does():
    model = model_of("pre")
    batch = make_batch([IDS[:20], IDS[:7], IDS[30:41]], 128)
    eager = run_prompt(model, batch, Keep(inside=True))
    lazy = run_prompt(model, batch, Keep(inside=True, on_read=True))
    assert all(every_group_untouched(v.stats) for v in lazy.views.values())
    for n, v in lazy.views.items():
        for field in FIELDS:
            assert same(getattr(v.stats, field), getattr(eager.views[n].stats, field)), (n, field)
    # the padding positions count nowhere: their norms are NaN
    assert np.isnan(lazy.views["trf_blocks.0.add2"].stats.token_l2[1, 7:]).all()


def test_a_capture_without_tensors_computes_only_the_groups_asked_and_says_so():
    model = model_of("pre")
    with torch.inference_mode(), Capture(model, groups=("moments", "top")) as cap:
        model(torch.tensor([IDS]))
    with torch.inference_mode(), Capture(model) as whole:
        model(torch.tensor([IDS]))
    for record in cap:
        assert record.tensor is None
        assert record.stats.has("moments") and record.stats.has("top")
        assert not record.stats.has("hist") and not record.stats.ready
        assert record.stats.std == whole[record.name].stats.std
        assert np.array_equal(record.stats.top_dims, whole[record.name].stats.top_dims)
    with pytest.raises(AttributeError, match="hist of this capture were not computed"):
        cap["trf_blocks.0.norm1"].stats.hist
    with pytest.raises(ValueError, match="no statistics named hst"):
        Capture(model, groups=("hst",))


@pytest.mark.parametrize("save", [False, True])
def test_inspect_computes_only_what_its_lines_print(save):
    """``gpt-explorer inspect`` (with --save: every tensor kept) reads the moments, the
    share of negatives and the top dimensions; the histogram and the norms are never
    computed, and each line's numbers are the eager pass's."""
    model = model_of("pre")
    keep = Keep(tensors=save, attention=True, inside=True, on_read=True, groups=PRINTED)
    run = run_prompt(model, IDS, keep)
    eager = run_prompt(model, IDS, Keep(tensors=False, attention=True, inside=True))
    for n, view in run.views.items():
        assert (view.array is not None) == save
        assert line(view) == line(eager.views[n])
        assert all(view.stats.has(g) for g in PRINTED), n
        assert not view.stats.has("hist") and not view.stats.has("norms"), n


def test_completing_on_two_threads_gives_the_eager_numbers_and_stops_when_asked():
    from explorer.core.base.cancel import Cancelled

    model = model_of("post")
    ids = torch.tensor([IDS])
    with torch.inference_mode(), Capture(model, tensors=True, inside=True) as eager:
        model(ids)
    with torch.inference_mode(), Capture(model, tensors=True, inside=True, on_read=True) as cap:
        model(ids)
    asked = []
    with pytest.raises(Cancelled):
        cap.complete(should_stop=lambda: asked.append(1) or len(asked) > 8, workers=2)
    left = sum(not r.stats.ready for r in cap)
    assert 0 < left < len(cap.records) - 4  # stopped part way, between nodes
    threads = torch.get_num_threads()
    cap.complete(workers=2)
    assert torch.get_num_threads() == threads  # the caller's torch threads are as they were
    for record in cap:
        assert record.stats.ready
        for field in FIELDS:
            assert same(getattr(record.stats, field), getattr(eager[record.name].stats, field)), \
                (record.name, field)
