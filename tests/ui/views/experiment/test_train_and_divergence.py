"""Experiment's Train and Divergence: a small model trained here, stopped and loaded;
model B changed in one place and the first node where the two part."""

import pytest

from tests.ui.conftest import show


def start_training(window, steps, out):
    panel = window.view("train")
    panel.preset.setCurrentText("tiny")
    panel.batch.setValue(2)  # a small batch: the steps, not their size, are tested
    panel.steps.setValue(steps)
    panel.out_dir.setText(str(out))
    panel.start_button.click()
    return panel


@pytest.mark.slow
def test_train_panel_trains_shows_the_curve_and_loads_the_result(qtbot, make_window, tmp_path):
    window = make_window()
    panel = start_training(window, 6, tmp_path / "run")
    assert window.running and not window.prompt.generate_button.isEnabled()
    qtbot.waitUntil(lambda: not window.running, timeout=120_000)
    assert [s for s, _ in panel.steps_seen] == list(range(1, 7))
    assert [e.step for e in panel.evals] == [0, 6]
    assert "step 6 (validation loss" in panel.samples.toPlainText()
    assert window.status_text.text() == "Training finished: saved model.safetensors"
    # a sample that starts with blank lines shows them (⏎), so it does not look empty, on
    # its step's line: many line breaks are not a column of marks without their step
    from explorer.core.experiments.training import EvalEvent
    panel.on_event(EvalEvent(step=7, train_loss=1.0, val_loss=2.0, sample="\n\nHello"))
    assert panel.samples.toPlainText().endswith("step 7 (validation loss 2.00): ⏎ ⏎ Hello\n")
    panel.on_event(EvalEvent(step=8, train_loss=1.0, val_loss=2.0, sample="\n" * 40 + "end"))
    last = [line for line in panel.samples.toPlainText().splitlines() if line][-1]
    assert last.startswith("step 8 (validation loss 2.00): ⏎ ⏎") and last.endswith("end")
    panel.evals.pop()
    panel.evals.pop()
    assert panel.load_button.isEnabled() and panel.checkpoint.endswith("model.safetensors")
    panel.load_button.click()
    qtbot.waitUntil(lambda: window.session.model.spec.checkpoint == panel.checkpoint, timeout=30_000)
    assert window.session.model.trained and "UNTRAINED" not in window.windowTitle()
    assert window.prompt.generate_button.isEnabled()


@pytest.mark.slow
@pytest.mark.parametrize("how", ["Stop", "Esc"])
def test_stopping_training_saves_a_checkpoint(qtbot, make_window, tmp_path, how):
    window = make_window()
    panel = start_training(window, 10_000, tmp_path / "run")
    qtbot.waitUntil(lambda: len(panel.steps_seen) >= 2, timeout=60_000)
    if how == "Stop":
        panel.stop_button.click()
    else:  # the window's Esc stops the engine's job: the same stop, said the same way
        from PySide6.QtCore import Qt
        from PySide6.QtTest import QTest
        QTest.keyClick(window, Qt.Key_Escape)
    qtbot.waitUntil(lambda: not window.running, timeout=60_000)
    assert len(panel.steps_seen) < 100 and (tmp_path / "run" / "model.safetensors").is_file()
    import json
    assert json.loads((tmp_path / "run" / "trainer.json").read_text())["step"] == len(panel.steps_seen)
    # said as a stop, not as a finished run, and not remembered as a model trained here
    assert panel.status.text().startswith(f"Stopped at step {len(panel.steps_seen)}. Saved ")
    assert window.session.status.startswith("Training stopped: saved")
    from explorer.core.base import state
    assert state.trained_models() == []


def test_divergence_tab_finds_and_marks_the_first_diverging_node(qtbot, ran):
    view = show(qtbot, ran, "Divergence")
    graph = ran.graph  # the block graph outlines what the finder marks in the session
    view.kind.setCurrentIndex(view.kind.findData("relu"))
    assert not view.ff_width.isVisible()
    assert view.layer.text() == "Block 1 of 2" and "where do you look first?" in view.question.text()
    view.layer.setValue(2)  # block 2 of 2: trf_blocks.1
    view.request()
    qtbot.waitUntil(lambda: view.result is not None, timeout=30_000)
    assert view.result.first == "trf_blocks.1.ff.layers.1"
    assert "First divergence: <b>trf_blocks.1.ff.layers.1</b>" in view.summary.text()
    assert ran.session.mark == "trf_blocks.1.ff.layers.1" and ran.session.layer == 1
    item = graph.items["trf_blocks.1.ff.layers.1"]
    assert item.diverged and item.pen().color().name() == "#d40000"
    ff = next(i for i in range(view.kind.count()) if str(view.kind.itemData(i)).startswith("ff-"))
    view.kind.setCurrentIndex(ff)  # ff-N: the width as the user types it
    assert view.ff_width.isVisible() and view.ff_width.value() == 1024
    view.ff_width.setValue(48)
    view.request()
    qtbot.waitUntil(lambda: "48 values per token instead of 32" in view.summary.text(), timeout=30_000)
