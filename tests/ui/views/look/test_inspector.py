"""The inspector's plots read as what they show: a histogram on this tensor's range (the
fixed range one click away), the Token box driving the statistics and the histogram,
heatmap axes in the tensor's own terms, and an instruction instead of empty axes."""

import numpy as np
import pytest
import torch
from PySide6.QtGui import QFontMetrics

from explorer.core.run.stats import tensor_stats
from explorer.ui.views.look.inspector_view import ALL_TOKENS, InspectorView
from explorer.ui.plots.plot_text import empty_message
from tests.ui.alone import Alone
from tests.ui.conftest import settle


@pytest.fixture
def alone(qtbot):
    alone = Alone(qtbot)
    return alone


def bars(inspector):
    hist = inspector.histogram.shown
    return hist, int((hist.counts > 0).sum())


def test_before_a_pass_the_plots_say_what_fills_them(alone):
    inspector = alone.view(InspectorView)
    for plot in (inspector.hist_plot, inspector.heat_plot, inspector.norm_plot):
        item = plot.getPlotItem()
        assert empty_message(item) == "Run a prompt (Ctrl+Enter) to see its values"
        assert not item.getAxis("left").isVisible() and not item.getAxis("bottom").isVisible()


def test_a_small_tensor_fills_its_histogram_and_the_fixed_range_is_one_click_away(alone):
    alone.run("Every effort moves you, and every effort counts", max_tokens=1)
    alone.session.show_step(None)
    inspector = alone.view(InspectorView)
    alone.session.set_node("trf_blocks.0.att")  # attention output: std ~0.05
    hist, filled = bars(inspector)
    view = alone.session.view()
    assert not hist.fixed and filled >= 40  # its values spread over the plot
    assert hist.below + hist.above + hist.counts.sum() == view.stats.count
    assert "range of this tensor" in inspector.hist_plot.getPlotItem().titleLabel.text
    assert f"below {hist.lo:.3g}: {hist.below:,}" in inspector.histogram.note.toPlainText()
    inspector.range_box.setCurrentIndex(1)  # fixed: comparable, and one or two bars here
    fixed, filled_fixed = bars(inspector)
    assert fixed.fixed and filled_fixed <= 3 and (fixed.lo, fixed.hi) == (-10.0, 10.0)
    np.testing.assert_array_equal(fixed.counts, view.stats.hist)
    assert "fixed range for this kind of node" in inspector.hist_plot.getPlotItem().titleLabel.text
    assert empty_message(inspector.hist_plot.getPlotItem()) is None


def test_the_token_box_drives_the_statistics_and_the_histogram(alone):
    alone.run(max_tokens=1)
    alone.session.show_step(None)
    inspector = alone.view(InspectorView)
    alone.session.set_node("trf_blocks.1.ff.layers.1")
    view = alone.session.view()
    cell = lambda label: inspector.statistics()[label]  # noqa: E731
    assert inspector.token_box.value() == ALL_TOKENS and inspector.token_box.text() == "all tokens"
    assert float(cell("mean")) == pytest.approx(view.stats.mean, rel=1e-5)
    inspector.token_box.setValue(2)
    row = view.array.reshape(-1, view.array.shape[-1])[2]
    expected = tensor_stats(torch.from_numpy(row).reshape(1, -1), view.node.hist)
    assert float(cell("mean")) == pytest.approx(expected.mean, rel=1e-5)
    assert cell("values") == f"{row.size:,} (token row 2)"
    hist = inspector.histogram.shown
    assert hist.counts.sum() + hist.below + hist.above == row.size
    assert "token row 2" in inspector.hist_plot.getPlotItem().titleLabel.text


def test_heatmap_axes_speak_in_the_tensors_terms(alone, qtbot):
    alone.run("one two three four five six seven eight nine ten eleven twelve", max_tokens=1)
    alone.session.show_step(None)
    inspector = alone.view(InspectorView, height=520)
    inspector.tabs.setCurrentIndex(inspector.heat_tab)
    alone.session.set_node("trf_blocks.0.att.attn_weights")
    settle(qtbot, alone)
    plot = inspector.heat_plot.getPlotItem()
    assert plot.getAxis("left").labelText == "head · query token"
    assert plot.getAxis("bottom").labelText == "key token"
    assert inspector.heatmap.bar.levels()[0] == 0.0  # probabilities: sequential, from 0
    ticks = plot.getAxis("bottom")._tickLevels[0]
    assert all(float(v).is_integer() for v, _ in ticks)  # whole key positions
    left = plot.getAxis("left")
    shown = left._tickLevels[0]
    line = QFontMetrics(left.font()).height()
    assert len(shown) * line <= inspector.heat_plot.getViewBox().height() + line  # no overlap
    alone.session.set_node("out_head")
    settle(qtbot, alone)
    assert plot.getAxis("bottom").labelText == "vocabulary id"
    assert inspector.heatmap.bar.levels()[0] < 0  # logits: diverging around 0
    inspector.tabs.setCurrentIndex(2)
    norm_ticks = inspector.norm_plot.getAxis("bottom")._tickLevels[0]
    assert [v for v, _ in norm_ticks] == list(range(len(norm_ticks)))  # 0, 1, 2, … never 0.5


def test_details_that_come_after_the_pass_show_when_they_come(alone, qtbot):
    """A pass computes the details (top dimensions, norms) of the selected node only;
    another node says they are being computed, and shows them once the engine reports
    them, with the numbers of a pass that computed everything at once."""
    from dataclasses import replace

    from explorer.core.run.passes import EVERYTHING, run_prompt
    from tests.ui.alone import encode

    ids = encode("Every effort moves you")
    model = alone.loaded.model
    eager = run_prompt(model, ids, replace(EVERYTHING, later=False))
    lazy = run_prompt(model, ids, replace(EVERYTHING, now=("trf_blocks.0.norm1",)))
    inspector = alone.view(InspectorView)
    alone.session.set_node("trf_blocks.0.norm1")
    alone.session.set_prompt(lazy)
    alone.settle()
    cell = lambda label: inspector.statistics()[label]  # noqa: E731
    top = lambda name: ", ".join(f"{int(d)} ({v:.3g})" for d, v in zip(  # noqa: E731
        eager.views[name].stats.top_dims, eager.views[name].stats.top_values))
    assert cell("top dims by |value|") == top("trf_blocks.0.norm1")
    alone.session.set_node("trf_blocks.1.ff.layers.1")
    assert cell("top dims by |value|") == cell("share negative") == "computing…"
    assert cell("std") == f"{eager.views['trf_blocks.1.ff.layers.1'].stats.std:.6g}"
    assert empty_message(inspector.norm_plot.getPlotItem()) == "Computing the vectors' norms…"
    assert not lazy.views["trf_blocks.1.ff.layers.1"].stats.ready  # the GUI computed nothing
    lazy.complete()
    alone.session.pass_completed(lazy)
    assert cell("top dims by |value|") == top("trf_blocks.1.ff.layers.1")
    assert cell("share negative") == f"{eager.views['trf_blocks.1.ff.layers.1'].stats.frac_neg:.6g}"
    assert empty_message(inspector.norm_plot.getPlotItem()) is None
    heights = inspector.norm_bars.opts["height"]
    np.testing.assert_array_equal(heights, eager.views["trf_blocks.1.ff.layers.1"].stats.token_l2.reshape(-1))


def test_a_step_inside_attention_shows_per_head_rows_and_masked_scores_as_masked(alone, qtbot):
    from explorer.core.run.opened import attention_input, open_attention
    alone.run("Every effort moves you", max_tokens=1)
    alone.session.show_step(None)
    current = alone.session.current
    x = current.views[attention_input(0, "pre")].array
    current.views.update(open_attention(alone.loaded.model, x, 0))  # as the graph's opener does
    inspector = alone.view(InspectorView, height=520)
    inspector.tabs.setCurrentIndex(inspector.heat_tab)
    alone.session.set_node("trf_blocks.0.att.masked_scores")
    settle(qtbot, alone)
    heads, t = 4, len(current.ids)
    image = inspector.heatmap.image.image
    assert image.shape == (heads * t, t)
    assert int(np.isnan(image).sum()) == heads * t * (t - 1) // 2  # the masked cells: no colour
    assert inspector.heatmap.masked.isVisible()  # … but the grey of "masked" under them
    assert inspector.heatmap.bar.levels()[0] < 0  # scores: diverging around 0
    assert inspector.heatmap.labels[:2] == [f"h0 0: {current.pieces[0]!r}", f"h0 1: {current.pieces[1]!r}"]
    assert inspector.heatmap.labels[t] == f"h1 0: {current.pieces[0]!r}"
    alone.session.set_node("trf_blocks.0.att.keys")
    settle(qtbot, alone)
    assert inspector.heatmap.image.image.shape == (heads * t, 8)  # head_dim features per head
    assert not inspector.heatmap.masked.isVisible()
    assert inspector.heat_plot.getPlotItem().getAxis("bottom").labelText == "feature (of head_dim)"


def test_the_masked_scores_say_their_statistics_are_over_the_kept_entries(alone):
    """A causal mask sets T(T−1)/2 scores of each head to −inf: the table's mean, std …
    are over the finite ones, and the values row says how many those are."""
    from explorer.core.gpt.tokenizer import encode
    from explorer.core.run.passes import EVERYTHING, run_prompt
    import dataclasses
    ids = encode("Every effort moves you")
    alone.session.set_prompt(run_prompt(alone.loaded.model, ids,
                                        dataclasses.replace(EVERYTHING, inside=True)))
    inspector = alone.view(InspectorView)
    alone.session.set_node("trf_blocks.0.att.masked_scores")
    alone.settle()
    shown = inspector.statistics()
    t, heads = len(ids), alone.loaded.config.n_heads
    finite = heads * t * (t + 1) // 2
    assert shown["NaN / Inf"] == f"0 / {heads * t * (t - 1) // 2}"
    assert shown["values"] == f"{heads * t * t}; the statistics are over its {finite} finite"
    view = alone.session.prompt.views["trf_blocks.0.att.masked_scores"]
    kept = view.array[np.isfinite(view.array)]
    assert float(shown["mean"]) == pytest.approx(float(kept.mean()), rel=1e-4, abs=1e-6)
    alone.session.set_node("trf_blocks.0.att")  # nothing masked: the count alone
    alone.settle()
    assert inspector.statistics()["values"] == f"{t * 32:,}"


def test_the_tabs_behind_the_histogram_come_a_turn_later_or_when_first_read(alone, qtbot):
    message = "Run a prompt (Ctrl+Enter) to see its values"
    inspector = InspectorView(alone.session, alone.engine)  # one turn: the histogram alone
    qtbot.addWidget(inspector)
    assert [inspector.tabs.tabText(i) for i in range(inspector.tabs.count())] == ["Histogram"]
    assert not inspector.built() and "norm_plot" not in inspector.__dict__
    qtbot.waitUntil(inspector.built, timeout=10_000)  # the next turn makes the rest
    assert [inspector.tabs.tabText(i) for i in range(inspector.tabs.count())] == \
        ["Histogram", "Heatmap", "Token norms", "Branch / shortcut", "Values"]
    for plot in (inspector.heat_plot, inspector.norm_plot, inspector.ratio_plot):
        assert empty_message(plot.getPlotItem()) == message  # as empty as the histogram
    other = InspectorView(alone.session, alone.engine)
    qtbot.addWidget(other)
    assert other.heat_tab == 1 and other.built()  # read first: made at once
    assert other.values.rowCount() == 0
    with pytest.raises(AttributeError):
        other.not_a_part  # noqa: B018 - any other missing name is still missing
