"""GPT-2 beside Llama: the loaded model's block and a preset of the other family drawn
side by side with the same jobs on one row, their parameters and KV caches from the
models, and on the prompt each role's values in both with RoPE's shifted scores."""

import numpy as np
import pytest
from PySide6.QtCore import Qt
from PySide6.QtWidgets import QGraphicsLineItem, QGraphicsSimpleTextItem

from explorer.core.lessons.compare_blocks import parameter_parts
from explorer.core.sources import random_model
from explorer.ui.views.learn.blocks_view import BlocksView
from explorer.ui.widgets.blocks_drawing import aligned
from tests.ui.alone import Alone


def test_gpt2_beside_llama_tiny_draws_both_blocks_with_the_jobs_joined(qtbot):
    alone = Alone(qtbot)
    alone.run(max_tokens=1)
    view = alone.view(BlocksView)
    assert [view.other.itemText(i) for i in range(2)] == ["llama-tiny", "qwen3-tiny"]
    left, right = view.drawing.boxes
    assert list(left) == ["norm1", "att", "drop1", "add1", "norm2", "ff", "drop2", "add2"]
    assert list(right) == ["norm1", "att", "add1", "norm2", "ff", "add2"]
    for key in right:  # a step both have: on one row
        assert left[key].center().y() == right[key].center().y()
    texts = [i.text() for i in view.drawing.scene().items() if isinstance(i, QGraphicsSimpleTextItem)]
    assert texts.count("no dropout") == 2 and "RMSNorm 1" in texts and "LayerNorm 1" in texts
    joins = [i for i in view.drawing.scene().items() if isinstance(i, QGraphicsLineItem)
             and i.pen().style() == Qt.DashLine]  # the joins, not the lines down a column
    assert len(joins) == 6
    c = view.comparison
    other = random_model("llama-tiny", seed=0).model
    assert c.parts == (parameter_parts(alone.loaded.model), parameter_parts(other))
    text = view.parts_text.text()
    assert f"{sum(c.parts[0].values()):,}" in text and f"{sum(c.parts[1].values()):,}" in text
    assert "128 bytes a token in bfloat16" in text and "256 bytes a token" in text
    assert "RMSNorm: x / √(mean(x²) + 1e-05)" in view.roles_text.text()


def test_on_the_prompt_each_role_in_both_and_ropes_scores(qtbot):
    alone = Alone(qtbot)
    alone.run(max_tokens=1)
    alone.session.show_step(None)
    view = alone.view(BlocksView)
    view.run_button.click()
    alone.settle()
    assert view.values is not None
    roles = [view.role_box.itemText(i) for i in range(view.role_box.count())]
    assert roles == ["normalisation", "positions", "attention", "feed-forward", "non-linearity"]
    view.role_box.setCurrentText("normalisation")
    curves = view.plot.listDataItems()
    assert len(curves) == 2
    mine = alone.session.prompt.views["trf_blocks.0.norm1"].array  # the window's own pass
    assert f"std {mine.std():.4g}" in view.words.text()
    r = view.shift
    assert r.shifts == (0, 1, 7) and max(r.live) - min(r.live) <= 1e-5 * max(1.0, abs(r.live[0]))
    assert f"{r.live[0]:+.6g}" in view.words.text() and "only their distance counts" in \
        view.words.text()
    view.role_box.setCurrentText("non-linearity")
    gelu = view.values[0]["trf_blocks.0.ff.layers.1"].array
    assert f"{np.mean(np.abs(gelu) <= 0.05):.1%} within ±0.05 of 0" in view.words.text()


def test_a_llama_model_is_set_beside_gpt2_presets(qtbot):
    alone = Alone(qtbot, "qwen3-tiny")
    alone.run(max_tokens=1)
    view = alone.view(BlocksView)
    assert view.other.itemText(0) == "tiny"
    c = view.comparison
    assert c.families == ("Qwen3", "GPT-2")
    assert "RMSNorm on each query and key head (Qwen3)" in view.roles_text.text()


@pytest.mark.parametrize("a, b, rows", [
    (["n", "a", "d", "s"], ["n", "a", "s"], [("n", "n"), ("a", "a"), ("d", None), ("s", "s")]),
    # Post-LN's order beside a Pre-LN block: what both keep in order shares a row
    (["a", "d", "s", "n"], ["n", "a", "s"], [(None, "n"), ("a", "a"), ("d", None), ("s", "s"),
                                              ("n", None)]),
])
def test_aligned_rows_keep_each_order(a, b, rows):
    got = aligned(a, b)
    assert [x for x, _ in got if x is not None] == a and [y for _, y in got if y is not None] == b
    assert got == rows


def test_a_checkpoint_is_set_beside_and_compared_on_the_prompt_with_its_own_weights(qtbot, tmp_path):
    """Beside offers any checkpoint, not only presets: a Llama-family checkpoint (its own
    weights) set beside GPT-2, loaded by the engine, drawn, compared, and run on the
    prompt with those weights; long titles are cut to their column, whole in the tooltip."""
    import torch
    from explorer.core.gpt.build import build_model
    from explorer.core.gpt.config import preset
    from explorer.core.weights.checkpoints import save_checkpoint
    other = build_model(preset("llama-tiny"), seed=7)
    path = save_checkpoint(other, tmp_path / ("a-llama-checkpoint-with-a-long-name" * 2 + ".safetensors"))
    alone = Alone(qtbot)
    alone.run(max_tokens=1)
    alone.session.show_step(None)
    view = alone.view(BlocksView)
    assert view.other.itemText(view.other.count() - 1) == "Other checkpoint or folder…"
    view.choose_checkpoint(str(path))
    alone.settle()
    assert view._other is not None and view.comparison.parts[1] == parameter_parts(other)
    heads = [i for i in view.drawing.scene().items() if isinstance(i, QGraphicsSimpleTextItem)
             and i.toolTip()]
    assert len(heads) == 2 and any(path.stem[:20] in h.toolTip() for h in heads)
    left, right = sorted(heads, key=lambda h: h.pos().x())
    assert left.sceneBoundingRect().right() < right.sceneBoundingRect().left()  # no overprint
    view.run_button.click()
    alone.settle()
    view.role_box.setCurrentText("normalisation")
    ids = list(alone.session.prompt.ids)
    with torch.no_grad():  # the checkpoint's own norm1 on the prompt, not a random preset's
        x = other.eval().tok_emb(torch.tensor([ids]))
        want = other.trf_blocks[0].norm1(x).numpy()
    got = view.values[1]["trf_blocks.0.norm1"].array
    np.testing.assert_allclose(got, want, atol=1e-6)
