"""No numbers outlive their model: after a divergence search, a generation, a Pre-LN /
Post-LN comparison and the logit lens, loading another model clears every view, and the
status line speaks of the load, not of the last run."""

import pytest

import numpy as np

from explorer.core.sources import ModelSpec
from explorer.ui.plots.plot_text import empty_message
from tests.ui.conftest import run_and_wait
from tests.ui.conftest import show


@pytest.mark.slow
def test_loading_another_model_leaves_no_number_of_the_old_one(qtbot, make_window):
    window = make_window()
    session = window.session
    run_and_wait(qtbot, window, max_tokens=3)
    assert len(session.steps) == 3
    assert window.status_text.text().startswith("Generated 3 tokens")  # done, not "Generating"
    assert "reached the token limit" in window.status_text.text()

    divergence = show(qtbot, window, "Divergence")
    divergence.kind.setCurrentIndex(divergence.kind.findData("relu"))
    divergence.layer.setValue(2)  # block 2 of 2 (trf_blocks.1)
    divergence.request()
    qtbot.waitUntil(lambda: divergence.result is not None, timeout=60_000)
    marked = session.mark
    assert marked and window.graph.items[marked].diverged and divergence.table.rowCount() > 0

    compare = show(qtbot, window, "Where the norm sits")
    compare.compare_button.click()
    qtbot.waitUntil(lambda: bool(compare.runs), timeout=60_000)
    assert empty_message(compare.plots["hist"]) is None and compare.top_label.text()

    lens = show(qtbot, window, "Logit lens")
    qtbot.waitUntil(lambda: lens.table.rowCount() > 0, timeout=60_000)
    chart = show(qtbot, window, "Next token")
    topk_ticks = chart.plot.getAxis("left")._tickLevels[0]
    assert len(topk_ticks) == len(session.current.top_ids) > 0
    old_tokens = window.prompt.output.toPlainText()
    assert "prompt" in old_tokens

    window.models.load(ModelSpec(preset="tiny", seed=7))
    qtbot.waitUntil(lambda: session.model.spec.seed == 7 and not window.models.loading, timeout=60_000)
    qtbot.waitUntil(lambda: session.pending() == 0, timeout=60_000)

    # the session: no pass, no steps, no mark
    assert session.prompt is None and session.steps == [] and session.current is None
    assert session.mark == ""
    assert not any(item.diverged for item in window.graph.items.values())
    # the divergence tab, the comparison, the lens: emptied
    assert divergence.result is None and divergence.table.rowCount() == 0
    assert compare.runs == {} and compare.top_label.text() == ""
    assert empty_message(compare.plots["hist"]) == "Press “Compare on the prompt”"
    assert empty_message(compare.plots["residual"]) == "Press “Compare on the prompt”"
    assert compare.plots["hist"].listDataItems() == []
    lens = show(qtbot, window, "Logit lens")
    assert lens.table.rowCount() == 0 and lens.rows == [] and "Run a prompt" in lens.note.text()
    # the next-token chart: no bars, no labels of the old pass, one line instead
    chart = show(qtbot, window, "Next token")
    assert chart.plot.getAxis("left")._tickLevels == [[]]
    assert empty_message(chart.plot.getPlotItem()).startswith("Run a prompt")
    assert np.sum(chart.bars.opts["width"]) == 0
    assert window.prompt.output.toPlainText() == ""
    # the plots of every other view: their one-line instruction, no data
    inspector = show(qtbot, window, "Tensor inspector")
    assert empty_message(inspector.hist_plot.getPlotItem()) is not None
    distributions = show(qtbot, window, "Distributions")
    assert distributions.table is None
    assert all(empty_message(p) == "Run a prompt (Ctrl+Enter)"
               for p in distributions.small_plots.values())
    attention = show(qtbot, window, "Attention")
    assert attention.pattern is None and empty_message(attention.plot) is not None
    # the status line speaks of the load
    assert window.status_text.text().startswith("Model loaded")
    assert "Generat" not in window.status_text.text()
