"""Experiment's Train and Divergence: a small model trained here, stopped and loaded;
model B changed in one place and the first node where the two part."""

import pytest

from tests.ui.conftest import TRAINING, show


def start_training(window, steps, out, snapshots=0, follow=False, preset="tiny"):
    panel = window.view("train")
    panel.preset.setCurrentText(preset)
    assert panel.preset.currentText() == preset
    panel.batch.setValue(2)  # a small batch: the steps, not their size, are tested
    panel.steps.setValue(steps)
    panel.snapshots.setValue(snapshots)
    panel.follow.setChecked(follow)
    panel.out_dir.setText(str(out))
    panel.start_button.click()
    return panel


@pytest.mark.slow
def test_train_panel_trains_shows_the_curve_and_loads_the_result(qtbot, make_window, tmp_path):
    window = make_window()
    before = window.session.model.spec
    panel = start_training(window, 6, tmp_path / "run")
    assert panel.job is not None and not window.running  # the explorer stays usable
    assert window.prompt.generate_button.isEnabled()
    qtbot.waitUntil(lambda: panel.job is None, timeout=TRAINING)
    assert [s for s, _ in panel.steps_seen] == list(range(1, 7))
    assert [e.step for e in panel.evals] == [0, 6]
    assert "step 6 (validation loss" in panel.samples.toPlainText()
    assert "estimated on 4 batches" in panel.samples.toPlainText()  # an estimate, and said
    assert panel.curves.val.name() == "validation (estimated on 4 batches)"
    # the end hands over: the trained model is loaded, named with its validation loss
    path = str(tmp_path / "run" / "model.safetensors")
    qtbot.waitUntil(lambda: window.session.model.spec.checkpoint == path, timeout=60_000)
    loss = panel.evals[-1].val_loss
    assert window.session.model.label == f"trained here: tiny, 6 steps, validation loss {loss:.2f} ({tmp_path / 'run'})"
    assert window.session.model.trained and "UNTRAINED" not in window.windowTitle()
    assert f"validation loss {loss:.2f}" in window.windowTitle()
    assert panel.status.text().endswith("Saved model.safetensors: loaded into the explorer.")
    # a sample that starts with blank lines shows them (⏎), so it does not look empty, on
    # its step's line: many line breaks are not a column of marks without their step
    from explorer.core.experiments.training import EvalEvent
    panel.on_event(EvalEvent(step=7, train_loss=1.0, val_loss=2.0, sample="\n\nHello"))
    assert panel.samples.toPlainText().endswith("step 7 (validation loss 2.00, estimated on 4 batches): ⏎ ⏎ Hello\n")
    panel.on_event(EvalEvent(step=8, train_loss=1.0, val_loss=2.0, sample="\n" * 40 + "end"))
    last = [line for line in panel.samples.toPlainText().splitlines() if line][-1]
    assert last.startswith("step 8 (validation loss 2.00, estimated on 4 batches): ⏎ ⏎") and last.endswith("end")
    assert panel.load_button.isEnabled() and panel.checkpoint == path
    # the model before is one click away
    assert panel.back_button.isEnabled()
    panel.back_button.click()
    qtbot.waitUntil(lambda: window.session.model.spec == before, timeout=60_000)
    assert window.prompt.generate_button.isEnabled() and not panel.back_button.isEnabled()


@pytest.mark.slow
@pytest.mark.parametrize("how", ["Stop", "Esc"])
def test_stopping_training_saves_a_checkpoint(qtbot, make_window, tmp_path, how):
    window = make_window()
    panel = start_training(window, 10_000, tmp_path / "run")
    qtbot.waitUntil(lambda: len(panel.steps_seen) >= 2, timeout=TRAINING)
    if how == "Esc":  # the window's Esc stops the explorer's own work, not the training
        from PySide6.QtCore import Qt
        from PySide6.QtTest import QTest
        QTest.keyClick(window, Qt.Key_Escape)
        seen = len(panel.steps_seen)
        qtbot.waitUntil(lambda: len(panel.steps_seen) > seen + 2, timeout=TRAINING)
        assert panel.job is not None
    panel.stop_button.click()
    qtbot.waitUntil(lambda: panel.job is None, timeout=TRAINING)
    assert len(panel.steps_seen) < 500 and (tmp_path / "run" / "model.safetensors").is_file()
    import json
    assert json.loads((tmp_path / "run" / "trainer.json").read_text())["step"] == len(panel.steps_seen)
    # said as a stop, not as a finished run, and not remembered as a model trained here
    assert panel.status.text().startswith(f"Stopped at step {len(panel.steps_seen)}. Saved ")
    assert window.session.status.startswith("Training stopped: saved")
    from explorer.core.base import state
    assert state.trained_models() == []
    if how == "Stop":  # Start again with the same folder: the new run goes beside the first
        first = (tmp_path / "run" / "trainer.json").read_bytes()
        start_training(window, 2, tmp_path / "run")
        assert panel.out_dir.text() == str(tmp_path / "run-2")
        assert f"{tmp_path / 'run'} holds an earlier run, kept" in window.session.status
        qtbot.waitUntil(lambda: panel.job is None, timeout=TRAINING)
        assert (tmp_path / "run" / "trainer.json").read_bytes() == first
        assert json.loads((tmp_path / "run-2" / "trainer.json").read_text())["step"] == 2


def test_divergence_tab_finds_and_marks_the_first_diverging_node(qtbot, ran):
    view = show(qtbot, ran, "Divergence")
    graph = ran.graph  # the block graph outlines what the finder marks in the session
    view.kind.setCurrentIndex(view.kind.findData("relu"))
    assert not view.ff_width.isVisible()
    assert view.layer.text() == "Block 0 of 2" and "where do you look first?" in view.question.text()
    view.layer.setValue(1)  # block 1 of 2: trf_blocks.1
    view.request()
    qtbot.waitUntil(lambda: view.result is not None, timeout=60_000)
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
    qtbot.waitUntil(lambda: "48 values per token instead of 32" in view.summary.text(), timeout=60_000)


def direct_end_std(out):
    from explorer.core.gpt.tokenizer import encode
    from explorer.core.run.passes import EVERYTHING, run_prompt
    from explorer.core.sources import ModelSpec, open_model
    run = run_prompt(open_model(ModelSpec(checkpoint=f"{out}@step12")).model,
                     encode("Every effort moves you"), EVERYTHING)
    return run.views["trf_blocks.1.ff"].stats.std


@pytest.mark.slow
def test_watching_it_learn_snapshots_followed_picked_and_restored(qtbot, make_window, tmp_path,
                                                                  monkeypatch):
    """While a model trains the explorer works (Generate, node selection); each snapshot
    is shown as it is taken; a snapshot picked on the timeline shows exactly what loading
    it as a checkpoint and running the prompt gives; a fresh window finds the timeline."""
    import numpy as np

    from explorer.core.experiments.snapshots import snapshot_plan
    from explorer.core.gpt.tokenizer import encode
    from explorer.core.run.passes import EVERYTHING, run_prompt
    from explorer.core.sources import ModelSpec, open_model
    monkeypatch.setenv("GPT_EXPLORER_DATA_DIR", str(tmp_path / "data"))
    window = make_window()
    session, out = window.session, tmp_path / "data" / "runs" / "train"
    panel = window.view("train")
    assert panel.out_dir.text() == str(out) and panel.timeline.snapshots == []
    panel = start_training(window, 3000, out, snapshots=4, follow=True)
    qtbot.waitUntil(lambda: len(panel.steps_seen) >= 1, timeout=TRAINING)
    window.prompt.max_tokens.setValue(2)
    window.prompt.request_run()  # generation while it trains
    qtbot.waitUntil(lambda: not window.running and len(session.steps) == 2, timeout=TRAINING)
    session.set_node("trf_blocks.1.ff")
    assert session.node == "trf_blocks.1.ff" and panel.job is not None
    assert " · training tiny at step " in window.windowTitle()  # says a model trains here
    # the snapshots were taken and followed: the explorer shows one of them, not the
    # model that trains
    qtbot.waitUntil(lambda: "snapshot at step " in session.model.label, timeout=TRAINING)
    shown = int(session.model.label.split("snapshot at step ")[1].split()[0].replace(",", ""))
    assert shown in [s.step for s in panel.timeline.snapshots]
    panel.stop_button.click()
    qtbot.waitUntil(lambda: panel.job is None, timeout=TRAINING)
    steps = [s.step for s in panel.timeline.snapshots]
    assert steps[0] == 0 and set(steps) <= set(snapshot_plan(3000, 4))
    # a run to its end: snapshots at the planned steps, the slider picks one
    # (Start again with the same folder: the new run goes beside the stopped one, kept)
    panel = start_training(window, 12, out, snapshots=4, follow=False)
    out = out.parent / "train-2"
    assert panel.out_dir.text() == str(out)
    qtbot.waitUntil(lambda: panel.job is None, timeout=TRAINING)
    assert [s.step for s in panel.timeline.snapshots] == snapshot_plan(12, 4) == [0, 1, 5, 12]
    qtbot.waitUntil(lambda: session.model.spec.checkpoint == str(out / "model.safetensors")
                    and not window.running, timeout=TRAINING)
    window.prompt.prompt.setPlainText("Every effort moves you")
    panel.timeline.slider.setValue(2)  # step 5
    qtbot.waitUntil(lambda: "snapshot at step 5 " in session.model.label and session.prompt
                    is not None and not window.running, timeout=TRAINING)
    assert panel.timeline.label.text().startswith("step 5 (3 of 4 kept)")
    direct = run_prompt(open_model(ModelSpec(checkpoint=f"{out}@step5")).model,
                        encode("Every effort moves you"), EVERYTHING)
    for name in ("trf_blocks.0.norm1", "trf_blocks.1.ff.layers.1", "out_head"):
        shown, alone = session.prompt.views[name], direct.views[name]
        assert shown.stats.std == pytest.approx(alone.stats.std, rel=1e-6), name
        np.testing.assert_allclose(shown.array, alone.array, rtol=1e-5, atol=1e-6)
    # two snapshots node by node on the prompt: what changed from step 0 to step 12
    compare = panel.compare
    assert [compare.first.itemText(i) for i in range(compare.first.count())] == ["0", "1", "5", "12"]
    assert (compare.first.currentText(), compare.second.currentText()) == ("0", "12")
    compare.button.click()
    qtbot.waitUntil(lambda: compare.result is not None, timeout=TRAINING)
    start = run_prompt(open_model(ModelSpec(checkpoint=f"{out}@step0")).model,
                       encode("Every effort moves you"), EVERYTHING)
    row = next(r for r in range(compare.table.rowCount())
               if compare.table.item(r, 0).text() == "B1 ff std")
    assert compare.table.item(r := row, 1).text() == f"{start.views['trf_blocks.1.ff'].stats.std:.4f}"
    assert compare.table.item(r, 2).text() == f"{direct_end_std(out):.4f}"
    assert "the largest change:" in compare.note.text()
    window.close()
    again = make_window()  # the same data folder: the run's timeline comes back
    restored = again.view("train")
    assert restored.out_dir.text() == str(out)  # the latest run of the data folder's
    assert [s.step for s in restored.timeline.snapshots] == [0, 1, 5, 12]
    assert set(restored.timeline.losses) == {0, 12}  # the evaluations' validation losses
    assert restored.timeline.label.text().startswith("step 12 (4 of 4 kept) · validation loss")


@pytest.mark.slow
def test_llama_mini_trains_beside_a_gpt2_run_and_its_snapshots_are_followed(
        qtbot, make_window, tmp_path):
    """The Llama-family preset trains here on the same text, its snapshots followed into
    the explorer (its own block); the GPT-2 run kept beside it is drawn on the same axes,
    dashed, named in the legend, its evaluations the ones on disk."""
    from explorer.core.experiments.snapshots import run_history
    window = make_window()
    out = tmp_path / "runs" / "train"
    panel = start_training(window, 4, out)  # the GPT-2 run first
    qtbot.waitUntil(lambda: panel.job is None, timeout=TRAINING)
    panel = start_training(window, 4, out, snapshots=2, follow=True, preset="llama-mini")
    assert panel.out_dir.text() == str(out.parent / "train-2")
    qtbot.waitUntil(lambda: panel.job is None, timeout=TRAINING)
    qtbot.waitUntil(lambda: (window.session.model.config.family.name == "llama") and "llama-mini, 4 steps" in
                    window.session.model.label, timeout=TRAINING)
    assert [s.step for s in panel.timeline.snapshots] == [0, 4]
    combo = panel.beside.combo
    items = [combo.itemText(i) for i in range(combo.count())]
    assert items[0] == "no other run" and items[1].startswith("tiny, 4 steps, validation ")
    combo.setCurrentIndex(1)
    panel._draw_beside()
    gpt2 = run_history(out)
    dashed = panel.curves.beside
    assert len(dashed) == 2 and list(dashed[1].getData()[1]) == [e["val_loss"] for e in gpt2]
    names = [label.text for _sample, label in panel.curves.legend.items]
    assert "tiny: validation" in names and "tiny: train" in names
    assert "llama-mini: train (evaluation)" in names  # the shown run named after its model
    assert list(panel.curves.val.getData()[1]) == [e.val_loss for e in panel.evals]
    combo.setCurrentIndex(0)
    panel._draw_beside()
    assert panel.curves.beside == [] and "tiny: validation" not in \
        [label.text for _sample, label in panel.curves.legend.items]


def test_a_snapshot_picked_by_hand_unticks_follow_and_says_so(qtbot):
    """Follow training would replace a snapshot picked on the slider with the next one
    taken: the pick unticks it, and the status line says why; a snapshot added by the
    run itself (the slider moved by the panel) leaves Follow as it is."""
    from pathlib import Path

    from PySide6.QtWidgets import QAbstractSlider

    from explorer.core.experiments.snapshots import Snapshot
    from explorer.ui.views.experiment.train_view import TrainPanel
    from tests.ui.alone import Alone
    alone = Alone(qtbot)
    panel = alone.view(TrainPanel)
    panel.follow.setChecked(True)
    panel.timeline.add(Snapshot(0, Path("step000000.safetensors")), show=False)
    panel.timeline.add(Snapshot(5, Path("step000005.safetensors")), show=True)  # the run's
    assert panel.follow.isChecked()
    panel.timeline.slider.triggerAction(QAbstractSlider.SliderAction.SliderSingleStepSub)
    assert not panel.follow.isChecked() and panel.timeline.slider.value() == 0
    assert alone.session.status.startswith("Follow training unticked: the snapshot you picked")
    panel.timeline._rest.stop()  # no model to load these made-up snapshots into


@pytest.mark.parametrize("opened_as", ["folder", "file"])
def test_a_run_opened_from_anywhere_brings_its_name_curve_and_snapshots(qtbot, make_window,
                                                                      tmp_path, opened_as):
    """A run trained elsewhere (not under the data folder), opened as its folder or as its
    model.safetensors: named as trained here, its folder, evaluations and snapshots in
    the Train tab."""
    from explorer.cli import main
    from explorer.core.experiments.snapshots import run_history
    run = tmp_path / "somewhere" / "my-run"
    assert main(["train", "--preset", "tiny", "--steps", "4", "--batch-size", "2",
                 "--snapshots", "2", "--out", str(run)]) == 0
    loss = run_history(run)[-1]["val_loss"]
    window = make_window(preset=None, checkpoint=str(run if opened_as == "folder" else
                                                      run / "model.safetensors"))
    assert window.session.model.label == f"trained here: tiny, 4 steps, validation loss " \
                                         f"{loss:.2f} ({run})"
    panel = window.view("train")
    assert panel.out_dir.text() == str(run)
    assert [s.step for s in panel.timeline.snapshots] == [0, 4]
    assert list(panel.curves.val.getData()[1]) == [e["val_loss"] for e in run_history(run)]
