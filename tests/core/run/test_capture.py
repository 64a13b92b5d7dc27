import gc

import numpy as np
import pytest
import torch

from explorer.core.gpt.node_types import Kind
from explorer.core.run.capture import Capture
from explorer.core.run.steps import StepRecorder
from explorer.core.gpt.config import preset
from explorer.core.run.generation import GenerationSettings, generate_stream
from explorer.core.gpt.build import build_model
from explorer.core.gpt.nodes import all_hook_names, block_nodes, node_for_hook
from explorer.core.run.stats import tensor_stats


@pytest.fixture(scope="module")
def model():
    return build_model(preset("tiny"), seed=4)


def ids(n=9, seed=0):
    return torch.randint(0, 50257, (1, n), generator=torch.Generator().manual_seed(seed))


def hooks_left(model):
    return sum(len(m._forward_hooks) + len(m._forward_pre_hooks) for m in model.modules())


def test_every_node_is_captured_with_its_shape(model):
    cfg = model.cfg
    with Capture(model, attention=True) as cap:
        model(ids(9))
    assert list(cap.records) == all_hook_names(cfg)  # forward order, the table's names
    assert cap["tok_emb"].shape == (1, 9, 32) and cap["pos_emb"].shape == (9, 32)
    assert cap["trf_blocks.1.ff.layers.1"].shape == (1, 9, 128)
    assert cap["trf_blocks.0.att.attn_weights"].shape == (1, 4, 9, 9)
    assert cap["out_head"].shape == (1, 9, cfg.vocab_size)
    assert all(r.tensor is None for r in cap)  # statistics only by default
    assert hooks_left(model) == 0


@pytest.mark.parametrize("norm_position", ["pre", "post"])
def test_statistics_are_those_of_the_real_tensors(norm_position):
    model = build_model(preset("tiny", norm_position=norm_position), seed=5)
    with Capture(model, tensors=True) as cap:
        model(ids(6))
    for rec in cap:
        expected = tensor_stats(rec.tensor, rec.node.hist)
        assert rec.stats.mean == pytest.approx(expected.mean, abs=1e-6)
        assert rec.stats.std == pytest.approx(expected.std, rel=1e-5)
        np.testing.assert_array_equal(rec.stats.hist, expected.hist)
    # a Pre-LN norm1 output is normalised per token; a Post-LN block's output (norm2) is too
    normed = cap["trf_blocks.0.norm1"] if norm_position == "pre" else cap["trf_blocks.1.norm2"]
    assert normed.stats.token_l2.shape == (1, 6)


def test_capture_does_not_change_the_logits_bit_for_bit(model):
    x = ids(12)
    with torch.no_grad():
        plain = model(x)
        with Capture(model, tensors=True):
            captured = model(x)
        with Capture(model, attention=True):  # the explicit softmax path: same maths
            explicit = model(x)
    assert torch.equal(plain, captured)
    torch.testing.assert_close(plain, explicit, atol=1e-5, rtol=1e-5)


def test_attention_pattern_only_when_asked(model):
    with Capture(model) as cap:
        model(ids(5))
    assert not any(n.endswith("attn_weights") for n in cap.records)
    with Capture(model, "trf_blocks.*.att.attn_weights", attention=True, tensors=True) as cap:
        model(ids(5))
    p = cap["trf_blocks.1.att.attn_weights"].tensor
    torch.testing.assert_close(p.sum(-1), torch.ones(1, 4, 5))
    assert torch.all(p.triu(1) == 0)


def test_hooks_are_removed_when_the_forward_raises(model):
    with pytest.raises(ValueError, match="context length"):
        with Capture(model, tensors=True):
            model(torch.zeros(1, 100, dtype=torch.long))  # longer than the context
    assert hooks_left(model) == 0


def test_selection_by_pattern_layer_and_list(model):
    with Capture(model, "trf_blocks.*.add2") as cap:
        model(ids())
    assert list(cap.records) == ["trf_blocks.0.add2", "trf_blocks.1.add2"]
    with Capture(model, layer=1) as cap:
        model(ids())
    assert [n.split(".", 2)[2] for n in cap.records] == [
        n.key for n in block_nodes("pre") if n.kind != Kind.PATTERN]
    with Capture(model, ["final_norm", "tok_emb"], tensors="final_norm") as cap:
        model(ids())
    assert cap["final_norm"].tensor is not None and cap["tok_emb"].tensor is None


def test_memory_budget_is_never_exceeded_and_drops_are_reported(model):
    one = 1 * 9 * 32 * 4  # bytes of one (1, 9, 32) float32 tensor
    with Capture(model, "trf_blocks.0.*", tensors=True, budget_bytes=3 * one) as cap:
        model(ids(9))
    kept = [r for r in cap if r.tensor is not None]
    assert cap.kept_bytes <= 3 * one
    unique = {id(r.tensor): r.tensor for r in kept}.values()  # eval-mode twins share a copy
    assert sum(t.numel() * 4 for t in unique) == cap.kept_bytes
    assert cap["trf_blocks.0.drop1"].tensor is cap["trf_blocks.0.att"].tensor
    assert cap.dropped and all(cap[n].tensor is None for n in cap.dropped)
    assert all(cap[n].stats.count > 0 for n in cap.dropped)  # statistics stay
    with Capture(model, "trf_blocks.0.*", tensors=True, float16=True, budget_bytes=3 * one) as half:
        model(ids(9))
    assert len([r for r in half if r.tensor is not None]) > len(kept)
    assert all(r.tensor.dtype == torch.float16 for r in half if r.tensor is not None)


def test_train_mode_dropout_zeroes_a_share_and_rescales_survivors():
    model = build_model(preset("tiny", drop_rate=0.25), seed=2).train()
    try:
        torch.manual_seed(0)
        with Capture(model, ["trf_blocks.0.att", "trf_blocks.0.drop1"], tensors=True) as cap:
            model(torch.randint(0, 50257, (4, 64)))
    finally:
        model.eval()
    before, after = cap["trf_blocks.0.att"].tensor, cap["trf_blocks.0.drop1"].tensor
    dropped = after == 0
    assert cap["trf_blocks.0.drop1"].stats.frac_zero == pytest.approx(0.25, abs=0.02)
    torch.testing.assert_close(after[~dropped], before[~dropped] / 0.75)


@pytest.mark.slow
def test_two_hundred_captures_leave_no_hooks_and_flat_memory(model):
    def rss():
        with open("/proc/self/statm") as fh:
            return int(fh.read().split()[1]) * 4096

    for _ in range(20):  # warm-up: allocator pools, lazy imports
        with Capture(model, tensors=True):
            model(ids(16))
    gc.collect()
    start = rss()
    for i in range(200):
        with Capture(model, tensors=True, attention=i % 2 == 0) as cap:
            with Capture(model, "trf_blocks.*.add2"):  # nested
                model(ids(16))
        assert hooks_left(model) == 0
    del cap
    gc.collect()
    assert rss() - start < 20 * 2**20  # under 20 MiB of growth over 200 captures


def test_step_capture_matches_a_full_capture_of_the_same_position(model):
    prompt = [11, 22, 33, 44]
    stream = generate_stream(model, prompt, GenerationSettings(max_new_tokens=4, capture_steps=True,
                                                               stop_at_eot=False))
    steps = list(stream)
    assert hooks_left(model) == 0
    full_ids = torch.tensor([prompt + [s.token_id for s in steps]])
    with Capture(model, tensors=True) as cap:
        model(full_ids)
    for step in steps:
        sc = step.capture
        assert sc.position == step.position - 1
        for name in all_hook_names(model.cfg, include_pattern=False):
            if name == "out_head":
                continue
            full = cap[name].tensor
            vec = (full[sc.position] if name == "pos_emb" else full[0, sc.position]).numpy()
            np.testing.assert_allclose(sc.vector(name), vec, atol=1e-5, err_msg=name)
        s = sc.stats("trf_blocks.1.add2")
        assert s.mean == pytest.approx(float(sc.vector("trf_blocks.1.add2").mean()), abs=1e-6)
        logits = sc.stats("out_head")
        assert logits.count == model.cfg.vocab_size and sc.vector("out_head") is None
        row = cap["out_head"].tensor[0, sc.position].numpy()
        assert int(logits.top_dims[0]) in (int(np.argmax(row)), int(np.argmin(row)))
        whole = tensor_stats(torch.from_numpy(step.logits).reshape(1, -1),
                             node_for_hook("out_head").hist)  # the step's own logits
        assert (logits.mean, logits.std, logits.absmax) == (whole.mean, whole.std, whole.absmax)
        np.testing.assert_array_equal(logits.hist, whole.hist)
    # computed when asked, from the logits the step was drawn from: no copy of them kept
    later = steps[-1].capture._pending["out_head"]
    assert later.untyped_storage().data_ptr() == torch.from_numpy(steps[-1].logits).untyped_storage().data_ptr()


def test_step_recorder_in_train_mode_hooks_the_dropouts_themselves():
    model = build_model(preset("tiny", drop_rate=0.5), seed=1).train()
    with StepRecorder(model) as rec:
        model(ids(5))
        sc = rec.snapshot(4)
    model.eval()
    assert not np.array_equal(sc.vector("trf_blocks.0.drop1"), sc.vector("trf_blocks.0.att"))
