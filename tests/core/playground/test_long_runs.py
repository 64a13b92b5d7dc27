"""Runs of any length the window makes are saved and read back equal: the file's header
grows by a few entries a pass (docs/RUN_FORMAT.md, version 2), the writer refuses before
writing what the reader would refuse, and a file of version 1 still opens."""

import dataclasses
from pathlib import Path

import numpy as np
import pytest
import torch
from hypothesis import example, given, settings
from hypothesis import strategies as st

from explorer.core.gpt.config import PRESETS, preset
from explorer.core.gpt.nodes import HistRange, all_hook_names, node_for_hook, order_of
from explorer.core.playground.run_file import (MAX_PASSES, RunFileError, SavedRun, read_run,
                                               run_tensors, save_run)
from explorer.core.playground.run_pack import MAX_HEADER_BYTES, header_bytes
from explorer.core.run.capture import NodeView
from explorer.core.run.generation import RUN_STEPS, GenerationSettings
from explorer.core.run.passes import Pass
from explorer.core.run.stats import NodeStats

DATA = Path(__file__).resolve().parents[2] / "data"


def _stats(shape, rng) -> NodeStats:
    """Statistics a node of ``shape`` could have: counts that fit its values, random numbers
    elsewhere (what is checked here is that each comes back as written)."""
    size, width = int(np.prod(shape)), shape[-1]
    bins = int(rng.integers(1, 90))
    k = min(5, width)
    return NodeStats(count=size, mean=float(rng.uniform(-1, 1)), std=float(rng.random()),
                     min=-1.0, max=1.0, absmax=1.0, rms=float(rng.random()),
                     kurtosis=float(rng.random() * 9), frac_neg=0.5, frac_zero=0.0, n_nan=0,
                     n_inf=0, top_dims=rng.choice(width, k, replace=False).astype(np.int64),
                     top_values=rng.random(k).astype(np.float32),
                     token_l2=rng.random(shape[:-1]).astype(np.float32),
                     hist=(np.arange(bins) < size // 2).astype(np.int64), under=0, over=0,
                     hist_range=HistRange(-1.0, 1.0, bins))


def _views(cfg, tokens: int, keys: int, rng, kept: bool) -> dict[str, NodeView]:
    """Every node of the block, attention's steps included, for a pass of ``tokens``
    positions reading ``keys`` keys."""
    views = {}
    for name in all_hook_names(cfg, inside=True):
        node = node_for_hook(name, order_of(cfg))
        shape = node.shape(cfg, 1, tokens)
        if node.width == "ctx" and len(shape) == 4:
            shape = shape[:3] + (keys,)
        array = rng.standard_normal(shape).astype(np.float32) if kept and \
            np.prod(shape) <= 4096 else None
        if array is not None and len(shape) == 4:  # causal: no query sees a later key
            array *= np.tril(np.ones(shape[-2:], np.float32), k=shape[-1] - shape[-2])
        views[name] = NodeView(name, node, shape, "float32", "cpu", _stats(shape, rng), array)
    _turned(cfg, views, keys)
    return views


def _turned(cfg, views: dict[str, NodeView], keys: int) -> None:
    """Each kept rotated query and key made its kept input turned by the block's angles
    at its positions (the last of ``keys``), as a genuine run's are (the reader checks)."""
    from explorer.core.gpt.family import Role
    from explorer.core.gpt.nodes import input_node, parse_hook, role
    from explorer.core.gpt.rope import apply_rope, layer_rotary
    order = order_of(cfg)
    rotated = {role(order, Role.QUERIES_ROPE), role(order, Role.KEYS_ROPE)} - {None}
    for name, view in views.items():
        layer, key = parse_hook(name)
        source = views.get(input_node(name, order) or "") if key in rotated else None
        if view.array is None or source is None or source.array is None or \
                source.array.shape != view.array.shape:
            continue
        tokens = view.array.shape[-2]
        cos, sin = layer_rotary(cfg, layer)(keys - tokens, keys, torch.device("cpu"))
        view.array[...] = apply_rope(torch.from_numpy(source.array), cos, sin).numpy()


def long_config(name: str, passes: int):
    """The preset's config with a context its steps fit in from the cache (past the
    context a genuine run's steps are recomputed whole)."""
    cfg = preset(name)
    return cfg.replace(context_length=max(cfg.context_length, passes + 3))


def long_run(name: str, passes: int, kept: bool, seed: int = 0) -> SavedRun:
    """A run of the preset ``name``'s block: a prompt of 3 tokens, then ``passes - 1``
    steps, each with every node of the block."""
    cfg, rng = long_config(name, passes), np.random.default_rng(seed)
    prompt = [int(i) for i in rng.integers(0, 50257, 3)]
    made, ids = [Pass(ids=prompt, pieces=[], views=_views(cfg, 3, 3, rng, kept), token_id=7,
                      prob=0.25, top_ids=(7, 9), top_probs=(0.25, 0.125))], list(prompt)
    for step in range(passes - 1):
        token = int(rng.integers(0, 50257))
        ids = [*ids, token]
        keys = min(len(ids), cfg.context_length)
        made.append(Pass(ids=ids, pieces=[], views=_views(cfg, 1, keys, rng, kept), step=step,
                         token_id=token, prob=0.5, top_ids=(token,), top_probs=(0.5,)))
    from explorer.core.gpt.tokenizer import gpt2_tokenizer
    text = b"".join(gpt2_tokenizer().token_bytes(i) for i in prompt).decode("utf-8", "replace")
    return SavedRun(text, prompt, {"label": name, "sha256": "", "config": cfg.to_dict()},
                    GenerationSettings(max_new_tokens=max(1, passes - 1)), made)


def nodes_a_pass(name: str) -> int:
    return len(all_hook_names(preset(name), inside=True))


SIZES = [n for n in PRESETS if preset(n).vocab_size <= 50304]  # GPT-2's token ids drawn


@pytest.mark.slow  # a million values written and read: half a minute
@settings(max_examples=8)
@given(name=st.sampled_from(SIZES), passes=st.integers(1, RUN_STEPS + 1), kept=st.booleans())
@example(name="tiny", passes=RUN_STEPS + 1, kept=True)  # the longest run, tensors kept
@example(name="gpt2-xl", passes=2, kept=False)
def test_a_run_of_any_length_reads_back_equal(tmp_path_factory, name, passes, kept):
    """Each model size, up to the window's longest run: every pass, node and statistic
    comes back as written. (Long runs of the largest blocks — a million nodes — are
    checked by their header below; here the nodes read back are at most 20,000, and the
    tiny block's 1,025 passes.)"""
    passes = passes if name == "tiny" else min(passes, max(2, 20_000 // nodes_a_pass(name)))
    run = long_run(name, passes, kept)
    path = save_run(tmp_path_factory.mktemp("long") / "run.gbrun", run, 10**6 if kept else 0)
    back = read_run(path)
    assert back.notice == "" and len(back.passes) == passes
    assert back.tokens == run.tokens and back.config == long_config(name, passes)
    for a, b in zip(run.passes, back.passes):
        assert b.ids == a.ids and (b.step, b.prob, b.top_ids) == (a.step, a.prob, a.top_ids)
        assert list(b.views) == list(a.views)
        for node, view in a.views.items():
            x, y = view.stats, b.views[node].stats
            assert (x.mean, x.std, x.kurtosis, x.count) == (y.mean, y.std, y.kurtosis, y.count)
            for f in ("hist", "top_dims", "top_values", "token_l2"):
                got = getattr(y, f)
                assert got.shape == getattr(x, f).shape and np.array_equal(got, getattr(x, f))
            if b.views[node].array is not None:  # kept while the budget lasted
                np.testing.assert_array_equal(b.views[node].array,
                                              view.array.astype(np.float16).astype(np.float32))
    assert kept == any(v.array is not None for v in back.passes[0].views.values())


@pytest.mark.parametrize("name", list(PRESETS))
def test_the_longest_run_the_window_makes_fits_the_header_the_reader_reads(name):
    """The header of a run of 1,025 passes with every node of the block, attention's
    steps and kept tensors included, computed by the writer's own packing: the prompt
    pass and one step packed, the step's entries repeated for every step."""
    run = long_run(name, 2, kept=True)
    tensors, metadata = run_tensors(run, 10**6)
    steps = {k: v for k, v in tensors.items() if k.startswith("p1.")}
    for i in range(2, MAX_PASSES):
        tensors.update({f"p{i}." + k[3:]: v for k, v in steps.items()})
    import json
    meta = json.loads(metadata["run"])
    meta["passes"] += [meta["passes"][1]] * (MAX_PASSES - 2)
    n = header_bytes(tensors, {**metadata, "run": json.dumps(meta)})
    assert len(tensors) == 7 * MAX_PASSES  # a pass's table and six packed fields
    assert n < MAX_HEADER_BYTES / 4, n  # 1,025 passes of any block: a few hundred KB
    assert nodes_a_pass(name) >= 28


def test_a_header_the_reader_would_refuse_is_refused_by_the_writer(tmp_path):
    """The writer's own check, on a run's real tensors with a description past the limit
    (a prompt is capped at 1,000,000 characters, so no run the window makes gets there)."""
    from explorer.core.playground.run_pack import check_header
    tensors, metadata = run_tensors(long_run("tiny", 1, kept=False))
    check_header(tmp_path / "ok.gbrun", tensors, metadata)  # a real run's: far under
    metadata["run"] += " " * MAX_HEADER_BYTES
    with pytest.raises(RunFileError, match="not saved: this run's description takes") as caught:
        check_header(tmp_path / "big.gbrun", tensors, metadata)
    assert "\n" not in str(caught.value)


def test_a_version_1_run_file_still_opens_with_its_numbers():
    """A file an earlier explorer wrote (the tiny preset, seed 0, "Hello" and one greedy
    token, tensors kept): read back, the prompt pass's statistics are those the same
    model gives again."""
    from explorer.core.gpt.build import build_model
    from explorer.core.playground.run_file import weights_sha256
    from explorer.core.run.passes import EVERYTHING, prompt_then_generate

    back = read_run(DATA / "run-v1.gbrun")
    model = build_model(preset("tiny"), seed=0)
    assert back.notice == "" and back.model["sha256"] == weights_sha256(model)
    again = []
    prompt_then_generate(model, back.prompt_ids, back.settings, again.append, keep=EVERYTHING)
    again = [p for p in again if hasattr(p, "views")]
    assert back.tokens == [p.token_id for p in again[1:]] and len(back.tokens) == 1
    for node, view in back.passes[0].views.items():
        if node in again[0].views:
            assert view.stats.mean == pytest.approx(again[0].views[node].stats.mean, abs=1e-6)
    kept = [v for v in back.passes[0].views.values() if v.array is not None]
    assert len(kept) >= 20 and "trf_blocks.0.att.attn_weights" in back.passes[0].views


def test_a_version_1_file_without_its_config_opens_read_as_gpt2s_and_says_so(tmp_path):
    """The earliest files kept no model config: read as GPT-2's, with a notice that their
    shapes were not checked (a version 2 file without one is refused: test_run_file.py)."""
    import json
    import struct

    from safetensors.torch import load, save_file

    from explorer.core.playground.run_file import NO_CONFIG, seal
    raw = (DATA / "run-v1.gbrun").read_bytes()
    (n,) = struct.unpack("<Q", raw[:8])
    meta = json.loads(raw[8:8 + n])["__metadata__"]
    run = json.loads(meta["run"])
    del run["model"]["config"]
    path = tmp_path / "early.gbrun"
    save_file(load(raw), str(path), metadata={**meta, "run": json.dumps(run)})
    seal(path)
    back = read_run(path)
    assert back.config is None and back.notice == NO_CONFIG and len(back.tokens) == 1
    assert "trf_blocks.0.att.attn_weights" in back.passes[0].views


def _edit(path, change):
    """The file's tensors changed by ``change`` as they are packed, its checksum again."""
    import json
    import struct

    from safetensors.torch import load, save_file

    from explorer.core.playground.run_file import seal
    raw = path.read_bytes()
    (n,) = struct.unpack("<Q", raw[:8])
    meta = json.loads(raw[8:8 + n])["__metadata__"]
    tensors = load(raw)
    change(tensors)
    save_file(tensors, str(path), metadata=meta)
    seal(path)


@pytest.mark.parametrize("change, words", [
    (lambda t: t.__setitem__("p0.nodes", t["p0.nodes"][:, :-1].contiguous()), "p0.nodes must be int64 rows of 19 columns"),
    (lambda t: t.__setitem__("p0.hist", torch.cat([t["p0.hist"], torch.zeros(3, dtype=torch.int64)])),
     "pass 0's packed tensors hold values no node's row names"),
    (lambda t: t.__setitem__("p0.token_l2", t["p0.token_l2"][:-1].contiguous()), "p0.token_l2 holds fewer values"),
    (lambda t: t.pop("p1.scalars"), "p1.scalars is missing"),
    (lambda t: t.__setitem__("p7.nodes", t["p0.nodes"].clone()), "a tensor 'p7.nodes', which the format does not name"),
    (lambda t: t["p0.nodes"].__setitem__((0, 0), 10_000), "p0.nodes row 0 is not a node's row"),
    (lambda t: t["p0.nodes"].__setitem__((0, 2), -1), "p0.nodes row 0 is not a node's row"),
])
def test_a_packed_pass_that_does_not_add_up_is_refused(tmp_path, change, words):
    path = save_run(tmp_path / "run.gbrun", long_run("tiny", 3, kept=True), 10**6)
    read_run(path)  # genuine: opens
    _edit(path, change)
    with pytest.raises(RunFileError) as caught:
        read_run(path)
    assert words in str(caught.value) and "\n" not in str(caught.value), str(caught.value)
