"""Decoding over a static KV cache (what a CUDA graph replays) against the growing cache's
decode, on every family: the same greedy tokens, the same logits and every recorded node's
vector and statistics, a sliding window passed, the context filled, a branch continued.
On the CPU here the step runs as it is; ``GPT_EXPLORER_TEST_DEVICE=cuda`` (benchmarks/gpu.sh)
runs the same tests with the step recorded as a CUDA graph and replayed."""

from __future__ import annotations

import os

import numpy as np
import pytest
import torch

from explorer.core.base.devices import resolve_device
from explorer.core.gpt.build import build_model
from explorer.core.gpt.config import preset
from explorer.core.gpt.hooks import hooks
from explorer.core.playground.branches import branch_stream
from explorer.core.run import graph_decode
from explorer.core.run.generation import GenerationSettings, generate_stream

DEVICE = resolve_device(os.environ.get("GPT_EXPLORER_TEST_DEVICE", "cpu"))
FAMILIES = ["tiny", "llama-tiny", "qwen3-tiny", "olmo2-tiny", "olmo3-tiny", "gemma3-tiny"]
PROMPT = [5, 17, 99, 301]


def model_of(name: str, seed: int = 7):
    """A tiny preset with weights 20× the initial scale: greedy decoding then wanders
    instead of repeating one token, so that a wrong position shows in the tokens."""
    model = build_model(preset(name), seed=seed)
    with torch.no_grad():
        for p in model.parameters():
            if p.dim() == 2:
                p.mul_(20)
    return model.to(DEVICE).eval()


def streamed(model, monkeypatch, static: bool, **settings):
    monkeypatch.setenv(graph_decode.SWITCH, "1" if static else "0")
    s = GenerationSettings(stop_at_eot=False, capture_steps=True, **settings)
    stream = generate_stream(model, PROMPT, s)
    return stream, list(stream)


def assert_same_steps(ours, theirs) -> None:
    assert [s.token_id for s in ours] == [s.token_id for s in theirs]
    for mine, other in zip(ours, theirs):
        np.testing.assert_allclose(mine.logits, other.logits, rtol=1e-4, atol=1e-4)
        a, b = mine.capture.views(), other.capture.views()
        assert list(a) == list(b)
        for name, view in a.items():
            scale = max(1.0, abs(b[name].stats.absmax))
            if view.array is not None or b[name].array is not None:  # the logits: statistics
                np.testing.assert_allclose(view.array, b[name].array, atol=1e-5 * scale,
                                           err_msg=name)
            for stat in ("mean", "std", "absmax", "rms"):
                assert getattr(view.stats, stat) == pytest.approx(
                    getattr(b[name].stats, stat), rel=1e-4, abs=1e-5 * scale), (name, stat)
            moved = abs(view.stats.hist - b[name].stats.hist).sum() / 2  # to a neighbouring bin
            assert moved <= max(1, view.stats.count // 10_000), name


@pytest.mark.parametrize("name", FAMILIES)
def test_static_decode_gives_the_growing_caches_tokens_logits_and_nodes(name, monkeypatch):
    model = model_of(name)
    stream, ours = streamed(model, monkeypatch, True, max_new_tokens=40)
    assert isinstance(stream._decoder, graph_decode.StaticDecoder)
    assert stream._decoder.graph is not None if DEVICE.type == "cuda" else stream._decoder.runs == 39
    _, theirs = streamed(model, monkeypatch, False, max_new_tokens=40)
    assert len({s.token_id for s in theirs}) > 1  # the test can see a token out of place
    assert_same_steps(ours, theirs)
    if model.cfg.sliding_layers:  # the window was passed: keys fell out of it
        assert len(PROMPT) + 40 > model.cfg.window(model.cfg.sliding_layers[0])


def test_a_run_past_the_context_slides_on_as_without_the_static_cache(monkeypatch):
    model = model_of("llama-tiny")
    ctx = model.cfg.context_length  # 64
    stream, ours = streamed(model, monkeypatch, True, max_new_tokens=ctx)
    assert stream._decoder is None and stream.cache is None  # the decoder filled, then slid
    _, theirs = streamed(model, monkeypatch, False, max_new_tokens=ctx)
    assert_same_steps(ours, theirs)


@pytest.mark.parametrize("name", ["tiny", "gemma3-tiny"])
def test_past_the_static_caches_positions_the_keys_and_values_go_on_growing(name, monkeypatch):
    """A long run's static cache is made for ``MOST`` positions past the prompt at most;
    after them the same keys and values grow as without it, with the same tokens and nodes."""
    model = model_of(name)
    monkeypatch.setattr(graph_decode, "MOST", 10)
    stream, ours = streamed(model, monkeypatch, True, max_new_tokens=40)
    assert stream._decoder is None and not isinstance(stream.cache, graph_decode.StaticCache)
    assert stream.cache.length == len(PROMPT) + 39
    _, theirs = streamed(model, monkeypatch, False, max_new_tokens=40)
    assert_same_steps(ours, theirs)


def test_a_static_cache_that_would_take_over_half_the_free_memory_is_not_made(monkeypatch):
    model = model_of("llama-tiny")
    grown = model.new_cache()
    with torch.inference_mode():
        model(torch.tensor([PROMPT], device=DEVICE), cache=grown)
    per_position = 2 * 2 * 2 * 8 * 4  # layers × (keys, values) × key heads × head_dim × float32
    assert (model.cfg.n_layers, model.cfg.kv_heads, model.cfg.head_dim) == (2, 2, 8)
    monkeypatch.setattr(graph_decode, "free_memory_bytes", lambda device: 2 * 40 * per_position)
    assert graph_decode.fits(grown, 40) and not graph_decode.fits(grown, 41)
    stream, ours = streamed(model, monkeypatch, True, max_new_tokens=45)  # 48 positions
    assert stream._decoder is None and not isinstance(stream.cache, graph_decode.StaticCache)
    _, theirs = streamed(model, monkeypatch, False, max_new_tokens=45)
    assert_same_steps(ours, theirs)


@pytest.mark.parametrize("name", ["tiny", "qwen3-tiny"])
def test_a_branch_continues_a_static_runs_cache(name, monkeypatch):
    """A branch forks the run's cache, sized for the run, and grows past it."""
    model = model_of(name)
    stream, steps = streamed(model, monkeypatch, True, max_new_tokens=12)
    assert isinstance(stream.cache, graph_decode.StaticCache)
    ids = PROMPT + [s.token_id for s in steps[:6]]
    settings = GenerationSettings(max_new_tokens=20, stop_at_eot=False)
    monkeypatch.setenv(graph_decode.SWITCH, "0")
    branched = [s.token_id for s in branch_stream(model, ids, 42, settings, stream.cache)]
    fresh = [s.token_id for s in generate_stream(model, ids + [42], settings)]
    assert branched == fresh


def test_the_steps_over_the_static_cache_give_every_logit_and_a_watched_pattern(monkeypatch):
    """The decoder used alone: each step's logits as the growing cache's; the pattern of
    a step (hooked) is the growing cache's row, then zeros where the later positions wait."""
    model = model_of("gemma3-tiny")
    with torch.inference_mode():
        grown = model.new_cache()
        model(torch.tensor([PROMPT], device=DEVICE), cache=grown)
        decoder = graph_decode.StaticDecoder(model, grown, 32, graphs=False)
        grown = model.new_cache()
        expected = model(torch.tensor([PROMPT], device=DEVICE), cache=grown, last_only=True)
        for token in range(40, 60):
            ours = decoder.step(token).clone()
            expected = model(torch.tensor([[token]], device=DEVICE), cache=grown, last_only=True)
            torch.testing.assert_close(ours, expected[0, -1], rtol=1e-4, atol=1e-4)
        assert decoder.cache.length == grown.length == len(PROMPT) + 20
        seen = {}
        with hooks(model, [("trf_blocks.0.att.attn_weights",
                            lambda m, i, out: seen.setdefault("static", out.clone()))]):
            decoder.step(7)
        with hooks(model, [("trf_blocks.0.att.attn_weights",
                            lambda m, i, out: seen.setdefault("grown", out.clone()))]):
            model(torch.tensor([[7]], device=DEVICE), cache=grown)
    n = grown.length
    assert seen["static"].shape[-1] == 32 and seen["grown"].shape[-1] == n
    torch.testing.assert_close(seen["static"][..., :n], seen["grown"], rtol=1e-5, atol=1e-6)
    assert float(seen["static"][..., n:].abs().max()) == 0.0
    window = model.cfg.window(0)
    assert float(seen["grown"][..., :n - window].abs().max()) == 0.0  # outside the window


def test_keys_along_the_cache_are_recorded_at_the_steps_position(monkeypatch):
    """A node along the keys (the repeated keys: every position of the static cache) is
    recorded at the step's own position, as the growing cache's last row."""
    model = model_of("llama-tiny")
    names = ["trf_blocks.1.att.keys_repeated", "trf_blocks.1.att.values_repeated",
             "trf_blocks.1.att.queries_rope", "trf_blocks.1.add2"]
    with torch.inference_mode():
        grown = model.new_cache()
        model(torch.tensor([PROMPT], device=DEVICE), cache=grown)
        decoder = graph_decode.StaticDecoder(model, grown, 24, record=True, nodes=names)
        seen = {}
        for token in (9, 10, 11):
            decoder.step(token)
            capture = decoder.snapshot(decoder.cache.length - 1)
        with hooks(model, [(n, lambda m, i, out, n=n: seen.__setitem__(n, out)) for n in names]):
            for token in (9, 10, 11):
                model(torch.tensor([[token]], device=DEVICE), cache=grown)
    for name in names:
        np.testing.assert_allclose(capture.vector(name), seen[name].select(-2, -1).reshape(-1)
                                   .float().cpu().numpy(), rtol=1e-5, atol=1e-5, err_msg=name)


def test_no_static_cache_for_experts_for_another_hook_or_when_switched_off(monkeypatch):
    monkeypatch.setenv(graph_decode.SWITCH, "1")
    assert not graph_decode.wanted(model_of("qwen3moe-tiny"), DEVICE)  # routing asks the host
    model = model_of("tiny")
    assert graph_decode.wanted(model, DEVICE)
    with hooks(model, [("trf_blocks.0.add1", lambda m, i, out: out)]):  # an intervention
        assert not graph_decode.wanted(model, DEVICE)
    monkeypatch.setenv(graph_decode.SWITCH, "0")
    assert not graph_decode.wanted(model, DEVICE)
    monkeypatch.delenv(graph_decode.SWITCH)
    assert graph_decode.wanted(model, DEVICE) == (DEVICE.type == "cuda")
    with pytest.raises(ValueError, match="cannot continue"):
        graph_decode.StaticCache(model.new_cache(), 8)  # nothing cached yet


def test_a_step_run_twice_before_recording_leaves_one_steps_state():
    """Before a graph is recorded, the step runs twice at one position (its kernels run
    once before recording): the cache, the position, the recorded nodes and the tokens
    after it are those of one step."""
    model = model_of("olmo3-tiny")
    decoders = []
    with torch.inference_mode():
        for twice in (False, True):
            grown = model.new_cache()
            model(torch.tensor([PROMPT], device=DEVICE), cache=grown)
            decoder = graph_decode.StaticDecoder(model, grown, 20, record=True, graphs=False)
            decoder.step(11)
            decoder.token.fill_(12)
            decoder._twice() if twice else decoder._run()
            decoders.append((decoder, decoder.snapshot(len(PROMPT) + 1),
                             [decoder.step(t).clone() for t in (13, 14)]))
    (one, one_nodes, one_logits), (two, two_nodes, two_logits) = decoders
    assert one.cache.length == two.cache.length == len(PROMPT) + 4 == int(two.cache.position)
    for a, b in zip(one.cache.layers, two.cache.layers):
        assert torch.equal(a.k, b.k) and torch.equal(a.v, b.v)
    for name in one_nodes.names:
        assert np.array_equal(one_nodes.vector(name), two_nodes.vector(name)) or one_nodes.vector(name) is None
    for a, b in zip(one_logits, two_logits):
        assert torch.equal(a, b)
