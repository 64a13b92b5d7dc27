"""Batches in the app: several prompts in one pass, the batch dimension at every view,
padding shown as such and left out of the statistics."""

import numpy as np
import pytest
import torch
from PySide6.QtCore import Qt
from PySide6.QtTest import QTest

from explorer.core.run.batch import make_batch
from explorer.core.run.capture import Capture
from explorer.core.gpt.config import preset
from explorer.core.gpt.build import build_model
from explorer.ui.widgets.values_table import ValuesModel

PROMPTS = "Every effort moves you\nHello"  # 4 and 1 tokens: padded to 2 x 4


def run_batch(qtbot, window, text=PROMPTS):
    panel = window.prompt
    panel.batch.setChecked(True)
    panel.prompt.setPlainText(text)
    panel.update_chips()
    QTest.keyClick(panel.prompt, Qt.Key_Return, Qt.ControlModifier)
    qtbot.waitUntil(lambda: not window.running and window.session.prompt is not None, timeout=60_000)


def test_batch_mode_shows_each_prompt_and_its_padding_before_running(make_window):
    window = make_window()
    panel = window.prompt
    panel.batch.setChecked(True)
    panel.prompt.setPlainText(PROMPTS)
    panel.update_chips()
    assert "Batch of 2 × 4 tokens (lengths 4, 1; 3 padding)" in panel.token_count.text()
    chips = panel.chips.toPlainText()
    assert chips.count("[pad]") == 3 and "s1" in chips
    assert not panel.settings_box.isEnabled() and "Run batch" in panel.generate_button.text()
    panel.prompt.setPlainText("\n \n")
    panel.request_run()
    assert "The batch is empty" in panel.token_count.text() and not window.running


def test_a_batch_pass_shows_the_batch_dimension_and_keeps_padding_out(qtbot, make_window):
    window = make_window()
    run_batch(qtbot, window)
    session = window.session
    assert session.steps == []  # a batch runs one forward pass, no generation
    assert session.prompt.batch.lengths == (4, 1)
    assert "batch (2 prompts × 4 tokens)" in window.prompt.output.toPlainText()
    assert "3 padding positions kept out" in window.status_text.text()
    # the graph's edges and the inspector say (2, 4, C)
    label = window.graph.edge_labels["trf_blocks.0.norm2"]  # views redraw in queued events
    qtbot.waitUntil(lambda: label.text() == "(2, 4, 32)", timeout=60_000)
    window.session.set_node("trf_blocks.0.norm2")
    title = window.view("inspector").title.text()
    assert "(2, 4, 32)" in title and "statistics over the 5 real vectors of 8; the 3 padding rows" in title
    # the numbers shown are those of the real tokens only (the core with the same mask)
    model = build_model(preset("tiny"), seed=0)
    batch = make_batch(PROMPTS.splitlines(), 64)
    with torch.inference_mode(), Capture(model, "trf_blocks.0.norm2", tensors=True) as cap:
        model(torch.tensor(batch.ids))
    real = cap["trf_blocks.0.norm2"].tensor.numpy()[batch.mask].astype(np.float64)
    shown = window.view("inspector").statistics()
    assert float(shown["mean"]) == pytest.approx(real.mean(), abs=1e-5)
    assert float(shown["max"]) == pytest.approx(real.max(), rel=1e-5)
    with_padding = cap["trf_blocks.0.norm2"].tensor.numpy().astype(np.float64)
    def kurtosis(x):
        return float(((x - x.mean()) ** 4).mean() / x.var() ** 2 - 3)
    # with the padding rows counted the fourth moment differs (each row is normalised, so
    # the mean and the spread say little): the statistics shown are the real rows'
    assert float(shown["kurtosis (excess)"]) == pytest.approx(kurtosis(real), rel=1e-3, abs=1e-3)
    assert abs(kurtosis(with_padding) - kurtosis(real)) > 0.01
    # the values table labels every row with its sample and greys the padding
    inspector = window.view("inspector")
    inspector.tabs.setCurrentIndex(inspector.values_tab)
    values: ValuesModel = inspector.values
    labels = [values.headerData(r, Qt.Vertical) for r in range(values.rowCount())]
    assert labels == ["s0 0: 'Every'", "s0 1: ' effort'", "s0 2: ' moves'", "s0 3: ' you'",
                      "s1 0: 'Hello'", "s1 1: [pad]", "s1 2: [pad]", "s1 3: [pad]"]
    assert values.data(values.index(5, 0), Qt.BackgroundRole) is ValuesModel.PAD_BRUSH
    assert values.data(values.index(4, 0), Qt.BackgroundRole) is None
    # the heatmap draws padding rows empty
    inspector.tabs.setCurrentIndex(inspector.heat_tab)
    image = inspector.heat_image.image
    assert image.shape == (8, 32) and np.isnan(image[5:]).all() and np.isfinite(image[:5]).all()


def test_attention_and_learn_mode_see_the_batch(qtbot, make_window):
    window = make_window()
    run_batch(qtbot, window)
    attention = window.view("attention")
    attention.redraw()
    assert attention.sample_box.isVisibleTo(window) and attention.sample_box.count() == 2
    attention.sample_box.setCurrentIndex(1)
    attention.redraw()
    assert attention.pieces == ["Hello", "[pad]", "[pad]", "[pad]"]
    real = window.session.prompt.views["trf_blocks.0.att.attn_weights"].array[1]
    np.testing.assert_array_equal(attention.pattern, real)
    learn = window.view("learn")
    learn.enabled.setChecked(True)
    learn.ask("trf_blocks.0.ff.layers.0")  # first: how wide; then: what shape
    assert learn.question.options[learn.question.answer] == "128"
    learn.ask("trf_blocks.0.ff.layers.0")
    question = learn.question
    assert "What shape comes out of" in question.text
    assert question.options[question.answer] == "(2, 4, 128)"  # the batch's live shape
    learn.enabled.setChecked(False)


def test_switching_back_to_one_prompt_generates_again(qtbot, make_window):
    window = make_window()
    run_batch(qtbot, window)
    window.prompt.batch.setChecked(False)
    window.prompt.prompt.setPlainText("Every effort moves you")
    window.prompt.max_tokens.setValue(2)
    window.prompt.request_run()
    qtbot.waitUntil(lambda: not window.running and len(window.session.steps) == 2, timeout=60_000)
    assert window.session.prompt.batch is None
    assert window.session.prompt.views["trf_blocks.0.norm1"].valid is None


def test_batch_mode_and_its_prompts_are_remembered(qtbot, tmp_path, warnings):
    from PySide6.QtCore import QSettings

    from explorer.core.sources import ModelSpec
    from explorer.ui.window.main_window import MainWindow
    path = str(tmp_path / "remember.ini")
    first = MainWindow(ModelSpec(preset="tiny"), QSettings(path, QSettings.IniFormat))
    qtbot.addWidget(first)
    first.show()
    qtbot.waitUntil(lambda: first.session.model is not None, timeout=60_000)
    run_batch(qtbot, first)
    first.close()
    second = MainWindow(ModelSpec(preset="tiny"), QSettings(path, QSettings.IniFormat))
    qtbot.addWidget(second)
    assert second.prompt.batch.isChecked()
    assert second.prompt.prompts() == PROMPTS.splitlines()
    assert "Run batch" in second.prompt.generate_button.text()
    qtbot.waitUntil(lambda: second.session.model is not None, timeout=60_000)
    second.close()


def test_a_stopped_or_refused_batch_keeps_the_shown_pass(qtbot, make_window, warnings):
    window = make_window()
    run_batch(qtbot, window)
    shown = window.session.prompt
    runs = window.prompt.runs
    import threading
    gate = threading.Event()  # the engine held, so that Stop comes before the batch starts
    window.engine.submit(lambda ctx: gate.wait(30), "hold")
    job = runs.start_batch(["Every effort moves you", "Hello"])
    job.cancel()  # Stop pressed: checked before the first block runs
    gate.set()
    qtbot.waitUntil(lambda: not window.running, timeout=60_000)
    assert window.session.prompt is shown and "stopped by you" in window.status_text.text()
    assert runs.start_batch(["fine", ""]) is None  # bypassing the panel's own check
    assert "prompt 2 of the batch is empty" in warnings[-1][1]
    assert window.session.prompt is shown and not window.running
    runs.start_batch(["Every effort moves you", "Hello"])  # and the next one works
    qtbot.waitUntil(lambda: not window.running, timeout=60_000)
    assert window.session.prompt is not shown
    assert window.session.prompt.batch.lengths == (4, 1)


def test_a_big_batch_draws_a_bounded_number_of_chips(make_window):
    from explorer.ui.widgets.token_chips import MAX_CHIPS
    window = make_window()
    panel = window.prompt
    panel.batch.setChecked(True)
    panel.prompt.setPlainText("\n".join(["word " * 60] * 15 + ["short"]))  # 16 prompts
    panel.update_chips()
    text = panel.chips.toPlainText()
    rows = text.splitlines()
    assert len(rows) == 16 and all(r.endswith("…") for r in rows)
    drawn = text.count("·word") + text.count("[pad]")
    assert drawn <= 2 * MAX_CHIPS + 16 * 8  # not 16 x 60 tokens
    assert "Batch of 16 × 61 tokens" in panel.token_count.text()


def test_the_divergence_tab_runs_the_seeds_exercise_on_the_batch(qtbot, make_window):
    window = make_window()
    run_batch(qtbot, window, "Every effort moves\nEvery day holds")
    view = window.view("divergence")
    view.kind.setCurrentIndex(view.kind.findData("ff-1024"))
    view.request()
    qtbot.waitUntil(lambda: view.result is not None, timeout=60_000)
    rows = [view.table.verticalHeaderItem(i).text() for i in range(view.table.rowCount())]
    i = rows.index("trf_blocks.0.ff.layers.2")
    assert view.table.item(i, 1).text() == "(2, 3, 1024)"  # the seed's shape, on its batch
    assert view.table.item(i, 2).text() == "shapes differ"
    assert "shape mismatch, A (2, 3, 32) vs B (2, 3, 1024)" in view.summary.text()
    assert "inf" not in view.summary.text()
    assert "instead of 32" in view.summary.text()
