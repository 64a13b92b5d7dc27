import numpy as np
import pytest
import torch

from explorer.core.gpt.node_types import Kind
from explorer.core.run.batch import PAD_ID, PAD_LABEL, make_batch, split_prompts
from explorer.core.run.capture import Capture
from explorer.core.gpt.config import preset
from explorer.core.gpt.build import build_model
from explorer.core.gpt.nodes import HistRange
from explorer.core.run.stats import tensor_stats
from explorer.core.gpt.tokenizer import encode


@pytest.fixture(scope="module")
def model():
    return build_model(preset("tiny"), seed=4)


PROMPTS = ["Every effort moves you", "Hello"]  # 4 and 1 tokens


def test_prompts_are_padded_on_the_right_and_masked():
    batch = make_batch(PROMPTS, context_length=64)
    assert batch.lengths == (4, 1) and batch.width == 4 and batch.size == 2
    assert batch.ids[0] == tuple(encode(PROMPTS[0]))
    assert batch.ids[1] == (15496, PAD_ID, PAD_ID, PAD_ID)
    np.testing.assert_array_equal(batch.mask, [[1, 1, 1, 1], [1, 0, 0, 0]])
    assert batch.padded == 3 and batch.describe() == "2 prompts × 4 positions; 3 padding positions kept out of every statistic"
    assert batch.pieces(1) == ["Hello", PAD_LABEL, PAD_LABEL, PAD_LABEL]
    assert batch.row_labels()[4:6] == ["s1 0: 'Hello'", "s1 1: [pad]"]
    assert batch.sample(1) == [15496]


def test_bad_batches_are_refused_with_the_prompt_named():
    with pytest.raises(ValueError, match="prompt 2 of the batch is empty"):
        make_batch(["ok", ""], 64)
    with pytest.raises(ValueError, match="the batch is empty"):
        make_batch(split_prompts("\n  \n"), 64)
    with pytest.raises(ValueError, match="at most 16"):
        make_batch(["a"] * 17, 64)
    long = make_batch(["word " * 100, "short"], 64)
    assert long.width == 64 and long.lengths[1] == 1
    assert long.notices and long.notices[0].startswith("prompt 1:")
    assert split_prompts("first\n\n second \n") == ["first", " second "]


def run(model, batch, **kw):
    with torch.inference_mode(), Capture(model, tensors=True, attention=True,
                                         mask=batch.mask, **kw) as cap:
        model(torch.tensor(batch.ids))
    return cap


def test_real_tokens_have_the_values_they_have_alone(model):
    """Right padding never changes a real token: attention is causal."""
    batch = make_batch(PROMPTS, 64)
    cap = run(model, batch)
    for b, prompt in enumerate(PROMPTS):
        alone = run(model, make_batch([prompt], 64))
        n = batch.lengths[b]
        for name in ("trf_blocks.0.norm1", "trf_blocks.1.ff.layers.1", "trf_blocks.1.add2", "out_head"):
            np.testing.assert_allclose(cap[name].tensor[b, :n].numpy(),
                                       alone[name].tensor[0].numpy(), atol=1e-5, err_msg=name)


def test_padding_is_never_in_the_statistics(model):
    batch = make_batch(PROMPTS, 64)
    cap = run(model, batch)
    mask = batch.mask
    for rec in cap:
        if rec.node.kind == Kind.PATTERN or rec.name == "pos_emb":
            continue
        real = rec.tensor.numpy()[mask].astype(np.float64)  # (5, C): the real tokens only
        s = rec.stats
        assert s.count == real.size, rec.name
        assert s.mean == pytest.approx(real.mean(), abs=1e-5), rec.name
        assert s.std == pytest.approx(real.std(), rel=1e-4, abs=1e-6), rec.name
        assert s.max == pytest.approx(real.max(), abs=1e-6) and s.min == pytest.approx(real.min(), abs=1e-6)
        assert np.isnan(s.token_l2[~mask]).all() and np.isfinite(s.token_l2[mask]).all()
        np.testing.assert_allclose(s.token_l2[mask], np.linalg.norm(real, axis=-1), rtol=1e-5)
    # the attention pattern: only the real queries' rows count
    pat = cap["trf_blocks.0.att.attn_weights"]
    assert pat.shape == (2, 4, 4, 4)
    real_rows = pat.tensor.numpy()[np.broadcast_to(mask[:, None, :], (2, 4, 4))]
    assert pat.stats.count == real_rows.size == 5 * 4 * 4
    assert pat.stats.mean == pytest.approx(real_rows.mean(), abs=1e-6)
    # the views carry the mask, so views can leave the padding out too
    view = cap.views()["trf_blocks.0.norm1"]
    np.testing.assert_array_equal(view.valid, mask)
    assert view.real_rows().shape == (5, 32)


def test_what_the_padding_holds_does_not_change_any_statistic(model):
    batch = make_batch(PROMPTS, 64)
    other = type(batch)(ids=tuple(row[:n] + (1000,) * (batch.width - n)
                                  for row, n in zip(batch.ids, batch.lengths)), lengths=batch.lengths)
    a, b = run(model, batch), run(model, other)
    assert not np.allclose(a["trf_blocks.1.add2"].tensor[1, 1:], b["trf_blocks.1.add2"].tensor[1, 1:])
    for name in a.records:
        assert a[name].stats.mean == pytest.approx(b[name].stats.mean, abs=1e-5), name
        assert a[name].stats.absmax == pytest.approx(b[name].stats.absmax, rel=1e-5), name
        np.testing.assert_array_equal(a[name].stats.hist, b[name].stats.hist)


def test_tensor_stats_mask_and_its_errors():
    x = torch.tensor([[[1.0, -1.0], [100.0, 100.0]]])  # (1, 2, 2): position 1 is padding
    s = tensor_stats(x, HistRange(-2, 2, 4), valid=torch.tensor([[True, False]]))
    assert (s.count, s.mean, s.max, s.over) == (2, 0.0, 1.0, 0)
    assert s.hist.tolist() == [0, 1, 0, 1]
    assert s.token_l2[0, 0] == pytest.approx(2 ** 0.5) and np.isnan(s.token_l2[0, 1])
    empty = tensor_stats(x, HistRange(-2, 2, 4), valid=torch.zeros(1, 2, dtype=torch.bool))
    assert empty.count == 0 and np.isnan(empty.mean)
    with pytest.raises(ValueError, match="does not match"):
        tensor_stats(x, HistRange(-2, 2, 4), valid=torch.ones(2, 2, dtype=torch.bool))


def test_a_mask_that_does_not_fit_the_pass_is_refused(model):
    with pytest.raises(ValueError, match="does not fit"):
        with torch.inference_mode(), Capture(model, mask=np.array([[1, 0, 0]], dtype=bool)):
            model(torch.tensor([[1, 2, 3, 4, 5]]))
    with torch.inference_mode(), Capture(model, mask=np.ones((1, 5), dtype=bool)) as cap:
        model(torch.tensor([[1, 2, 3, 4, 5]]))
    assert cap.mask is None and cap.views()["out_head"].valid is None  # nothing padded


def test_explanations_read_real_tokens_of_a_batch(model):
    from explorer.core.lessons.explain import explain
    batch = make_batch(PROMPTS, 64)
    views = run(model, batch).views()
    pieces = [p for b in range(batch.size) for p in batch.pieces(b)]  # one per vector
    e = explain("trf_blocks.0.norm1", views, pieces)
    # by default the last real token (sample 1's 'Hello'), never a padding position
    after = views["trf_blocks.0.norm1"].array[1, 0].std()
    assert "brought token 'Hello' from" in e.here and f"to {after:.3g}" in e.here
    gelu = explain("trf_blocks.0.ff.layers.1", views, pieces).here
    x = views["trf_blocks.0.ff.layers.0"].array
    real, everything = 100 * float((x[batch.mask] < 0).mean()), 100 * float((x < 0).mean())
    n = int(batch.mask.sum())
    assert f"{real:.0f}% of its inputs (the {n} tokens × {x.shape[-1]} = {n * x.shape[-1]:,} values)" in gelu
    assert f"{real:.0f}" != f"{everything:.0f}"  # (50% vs 49%: the padding would show)
