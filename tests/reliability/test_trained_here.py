"""A model trained here is remembered: a finished run becomes the default model when no
trained GPT-2 is in the cache — for the window, `info` and `generate` in a fresh process —
and Choose model lists it with its date, loss and path. A stopped run is not."""

import pytest

import os
import subprocess
import sys

from explorer.cli import main
from explorer.core.base import state
from explorer.core.experiments.training import StepEvent, Trainer, TrainSettings, default_text
from explorer.core.sources import load_default_model

pytestmark = pytest.mark.slow  # the whole module: ./test.sh -m "not slow" leaves it out


def train_tiny(capsys, out, steps="2"):
    assert main(["train", "--preset", "tiny", "--steps", steps, "--eval-every", "1", "--batch-size", "2",
                 "--out", str(out)]) == 0
    capsys.readouterr()
    return out / "model.safetensors"


def test_a_finished_run_is_the_default_when_no_gpt2_is_cached(capsys, tmp_path, hf_cache):
    assert state.trained_models() == [] and not load_default_model().trained
    model = train_tiny(capsys, tmp_path / "run")
    (run,) = state.trained_models()
    assert run.path == str(model.resolve()) and run.step == 2 and run.preset == "tiny"
    assert run.val_loss is not None and 0 < run.val_loss < 12
    loaded = load_default_model()
    assert loaded.trained and loaded.config.emb_dim == 32
    said = f"trained here: tiny, 2 steps, validation loss {run.val_loss:.2f} ({model.parent})"
    assert loaded.label == said  # the run's own trainer.json's words
    # a fresh process with the same state folder names it too, for info and generate
    env = dict(os.environ, QT_QPA_PLATFORM="offscreen")
    info = subprocess.run([sys.executable, "-m", "explorer", "info"], env=env,
                          capture_output=True, text=True, timeout=300)
    assert info.returncode == 0 and said in info.stdout
    assert "UNTRAINED" not in info.stdout
    made = subprocess.run([sys.executable, "-m", "explorer", "generate", "Every effort",
                           "--max-new-tokens", "2"], env=env, capture_output=True, text=True,
                          timeout=300)
    assert made.returncode == 0 and "trained here: tiny" in made.stderr


def test_the_latest_run_comes_first_and_a_stopped_one_is_not_remembered(capsys, tmp_path):
    first = train_tiny(capsys, tmp_path / "a")
    second = train_tiny(capsys, tmp_path / "b", steps="3")
    assert [r.path for r in state.trained_models()] == [str(second.resolve()), str(first.resolve())]
    trainer = Trainer(default_text(), TrainSettings(preset="tiny", max_steps=50, eval_every=10,
                                                    batch_size=2), tmp_path / "c")
    for event in trainer.run():  # stopped after step 3, as Stop does
        if isinstance(event, StepEvent) and event.step == 3:
            trainer.save()
            break
    assert len(state.trained_models()) == 2
    second.unlink()  # a run whose model is gone is not offered
    assert [r.path for r in state.trained_models()] == [str(first.resolve())]


def test_a_new_window_opens_it_and_choose_model_lists_it(qtbot, capsys, tmp_path, hf_cache):
    from PySide6.QtCore import QSettings

    from explorer.ui.window.main_window import MainWindow
    from explorer.ui.window.model_dialog import ModelDialog
    model = train_tiny(capsys, tmp_path / "run")
    window = MainWindow(None, QSettings(str(tmp_path / "s.ini"), QSettings.IniFormat))
    qtbot.addWidget(window)
    window.warn = lambda *a: None
    window.show()
    qtbot.waitUntil(lambda: window.session.model is not None, timeout=60_000)
    info = window.session.model
    assert info.trained and "trained here: tiny" in info.label
    assert not window.banner.isVisible()  # the first-run banner stays away
    dialog = ModelDialog(window, info.spec)
    assert dialog.use_trained.isChecked() and dialog.use_trained.isEnabled()
    text = dialog.trained_box.currentText()
    assert text.startswith("trained here: tiny, 2 steps, validation loss ")
    assert f"({model.resolve().parent}) · " in text
    assert dialog.spec().checkpoint == str(model.resolve())
    window.close()


def _remember(runs) -> None:
    import json
    folder = state.state_dir()
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "trained-models.json").write_text(json.dumps({"runs": runs}))


@pytest.mark.parametrize("entry, first", [
    ({"path": "/" + "a" * 5000, "step": 2, "date": "2026-12-06T10:00:00", "preset": "tiny"},
     "File name too long"),
    ({"path": "/x/model.safetensors", "step": 1e300, "date": "2026-12-06T10:00:00",
      "preset": "tiny"}, "a step of 1e+300, not a count up to 1,000,000,000"),
    ({"path": "/x/model.safetensors", "step": 10**29, "date": "2026-12-06", "preset": "tiny"},
     "a step of 30 digits, not a count up to 1,000,000,000"),
    ({"path": "/x/model.safetensors", "step": 2, "date": "2026-12-06", "preset": "\x1b[2Jmini"},
     "a preset named '\\x1b[2Jmini'"),
    ({"path": "relative/model.safetensors", "step": 2, "date": "2026-12-06", "preset": "tiny"},
     "a path that is not an absolute file name"),
    ({"path": "/x/model.safetensors", "step": 2, "date": "yesterday", "preset": "tiny"},
     "Invalid isoformat string: 'yesterday'"),
    ({"path": "/x/model.safetensors", "step": 2, "preset": "tiny"}, "no 'date'"),
])
def test_an_unusable_remembered_run_is_skipped_with_one_notice(capsys, tmp_path, hf_cache,
                                                               entry, first):
    """Every command and the window start; the entry is named in one escaped line."""
    model = train_tiny(capsys, tmp_path / "run")
    (good,) = state.trained_models()
    _remember([entry, entry, {"path": good.path, "step": 2, "date": good.date,
                              "val_loss": good.val_loss, "preset": "tiny"}])
    notices = []
    assert [r.path for r in state.trained_models(notices)] == [str(model.resolve())]
    assert notices == [f"2 of the models remembered as trained here in "
                       f"{state.state_dir() / 'trained-models.json'} could not be used and were "
                       f"skipped (the first: {first})"]
    assert "\x1b" not in notices[0]
    loaded = load_default_model()
    assert loaded.trained and loaded.label.startswith("trained here: tiny, 2 steps")
    assert notices[0] in loaded.notices
    assert main(["info"]) == 0 and "trained here: tiny, 2 steps" in capsys.readouterr().out


def test_a_remembered_label_is_the_runs_own_not_the_entrys(capsys, tmp_path, hf_cache):
    """An entry that calls a tiny run "mini, 200 steps" is shown with the run's own words;
    one whose file is not a training run's model is skipped, said."""
    from explorer.core.gpt.build import build_model
    from explorer.core.gpt.config import preset
    from explorer.core.weights.checkpoints import save_checkpoint
    model = train_tiny(capsys, tmp_path / "run")
    other = save_checkpoint(build_model(preset("llama-tiny"), seed=0), tmp_path / "other.safetensors")
    lying = {"path": str(model.resolve()), "step": 200, "date": "2026-12-06T10:00:00",
             "val_loss": 1.0, "preset": "mini"}
    _remember([{**lying, "path": str(other.resolve())}, lying])
    loaded = load_default_model()
    assert loaded.label.startswith("trained here: tiny, 2 steps, validation loss ")
    assert "mini" not in loaded.label and "200" not in loaded.label
    assert loaded.notices[0] == (f"skipped the model remembered as trained here at "
                                 f"{other.resolve()}: it is not a training run's model (no "
                                 "trainer.json beside it)")
