"""Statistics computed ahead on a spare core: the side thread (cpu_work.AHEAD) computes a
pass's moments and then its details while the forward goes on; the numbers are those of
a pass that computes everything at once; the moments are all there when the pass is,
whatever the side thread has done; work nobody keeps holds no memory; a failing job
does not stop the thread; urgent jobs go first; the thread runs below the window's."""

import dataclasses
import gc
import math
import os
import sys
import threading
import weakref

import numpy as np
import pytest
import torch

from explorer.core.base.cpu_work import AHEAD, NICE, Ahead, spare_core
from explorer.core.base.devices import usable_cores
from explorer.core.gpt.config import preset
from explorer.core.gpt.build import build_model
from explorer.core.run.passes import EVERYTHING, run_prompt
from explorer.core.run.stats import DETAILS, MOMENTS

IDS = list(range(100, 100 + 150))
AHEAD_KEEP = dataclasses.replace(EVERYTHING, ahead=True, now=("trf_blocks.1.norm1",))


def model_of(norm_position: str):
    cfg = dataclasses.replace(preset("tiny"), context_length=256, norm_position=norm_position)
    return build_model(cfg, seed=5)


def same(a, b) -> bool:
    if isinstance(a, np.ndarray):
        return a.shape == b.shape and np.array_equal(a, b, equal_nan=True)
    return a == b or (isinstance(a, float) and math.isnan(a) and math.isnan(b))


class Held:
    """The side thread kept busy until ``release()``."""

    def __init__(self) -> None:
        self.go = threading.Event()
        self.started = threading.Event()
        AHEAD.submit(lambda: (self.started.set(), self.go.wait(30)), urgent=True)
        assert self.started.wait(10)

    def release(self) -> None:
        self.go.set()
        assert AHEAD.wait(60)


@pytest.mark.parametrize("order", ["pre", "post"])
def test_the_side_thread_computes_every_statistic_as_a_pass_at_once_would(order):
    model = model_of(order)
    eager = run_prompt(model, IDS, dataclasses.replace(EVERYTHING, later=False))
    ahead = run_prompt(model, IDS, AHEAD_KEEP)
    assert all(v.stats.moments_ready for v in ahead.views.values())
    assert AHEAD.wait(60)
    # nobody read a detail or called complete(): the side thread computed them all
    assert all(v.stats.ready for v in ahead.views.values())
    assert len(ahead.shares_later) == model.cfg.n_layers  # the GELU shares: complete()'s
    ahead.complete()
    assert ahead.ready and set(ahead.views) == set(eager.views)
    for n, v in ahead.views.items():
        for field in DETAILS + MOMENTS + ("count",):
            assert same(getattr(v.stats, field), getattr(eager.views[n].stats, field)), (n, field)
    assert ahead.gelu_shares == eager.gelu_shares


def test_the_moments_are_there_when_the_pass_is_though_the_side_thread_did_none():
    model = model_of("pre")
    eager = run_prompt(model, IDS, dataclasses.replace(EVERYTHING, later=False))
    held = Held()
    try:
        ahead = run_prompt(model, IDS, AHEAD_KEEP)
        views = ahead.views.values()
        assert all(v.stats.moments_ready for v in views)  # computed as the pass ended
        pending = [n for n, v in ahead.views.items() if not v.stats.ready]
        assert len(pending) == len(ahead.views) - 1  # all but the node asked for now
        for n, v in ahead.views.items():
            assert v.stats.std == eager.views[n].stats.std and v.stats.max == eager.views[n].stats.max
        stats = ahead.views["trf_blocks.0.ff.layers.1"].stats  # a read computes its group
        assert np.array_equal(stats.hist, eager.views["trf_blocks.0.ff.layers.1"].stats.hist)
        assert stats.has("hist") and not stats.ready
    finally:
        held.release()
    assert all(v.stats.ready for v in views)  # and the side thread did the rest


def test_work_on_a_pass_nobody_keeps_holds_no_memory():
    model = model_of("pre")
    held = Held()
    try:
        ahead = run_prompt(model, IDS, AHEAD_KEEP)
        assert not ahead.views["out_head"].stats.ready
        logits = weakref.ref(ahead.views["out_head"].stats.__dict__["_source"].tensor)
        assert logits() is not None and tuple(logits().shape) == (1, len(IDS), 50257)
        del ahead
        gc.collect()
        assert logits() is None  # the queued jobs did not keep the 150 × 50,257 logits
    finally:
        held.release()


def test_a_failing_job_leaves_the_thread_working_and_urgent_jobs_go_first():
    side = Ahead()
    done = []
    go = threading.Event()
    side.submit(lambda: go.wait(30))
    side.submit(lambda: done.append("later"))
    side.submit(lambda: 1 / 0, urgent=True)
    side.submit(lambda: done.append("urgent"), urgent=True)
    go.set()
    assert side.wait(30)
    assert done == ["urgent", "later"]
    side.stop()
    side.submit(lambda: done.append("after stop"))
    assert side.wait(5) and done == ["urgent", "later"]


def test_a_core_is_spare_when_torch_leaves_one():
    threads = torch.get_num_threads()
    try:
        torch.set_num_threads(usable_cores())
        assert not spare_core()
        if usable_cores() > 1:
            torch.set_num_threads(usable_cores() - 1)
            assert spare_core()
    finally:
        torch.set_num_threads(threads)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="a thread's own niceness is Linux's")
def test_the_side_thread_runs_below_the_window():
    ids = []
    AHEAD.submit(lambda: ids.append(threading.get_native_id()))
    assert AHEAD.wait(30) and ids
    assert ids[0] != threading.get_native_id()
    assert os.getpriority(os.PRIO_PROCESS, ids[0]) >= NICE > os.getpriority(
        os.PRIO_PROCESS, threading.get_native_id())


def test_a_pass_with_every_statistic_in_it_has_them_all_when_it_ends():
    """Without ``later`` (a recomputed step, the book's way of generating), the side
    thread computes the statistics during the forward and the pass's end the rest: all
    there, equal to a pass computed on one thread, whatever the side thread did."""
    model = model_of("post")
    eager = run_prompt(model, IDS, dataclasses.replace(EVERYTHING, later=False))
    held = Held()
    try:
        ahead = run_prompt(model, IDS, dataclasses.replace(EVERYTHING, later=False, ahead=True))
        assert ahead.ready and not ahead.shares_later
    finally:
        held.release()
    again = run_prompt(model, IDS, dataclasses.replace(EVERYTHING, later=False, ahead=True))
    for done in (ahead, again):
        assert done.ready
        for n, v in done.views.items():
            for field in DETAILS + MOMENTS + ("count",):
                assert same(getattr(v.stats, field), getattr(eager.views[n].stats, field)), (n, field)
        assert done.gelu_shares == eager.gelu_shares
