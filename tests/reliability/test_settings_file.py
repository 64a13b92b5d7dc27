"""A corrupted or hand-edited settings file: every bad value falls back to its default,
and the app always starts (it aborted or hung at every launch)."""

import pytest

import os

from PySide6.QtCore import QSettings

from explorer.ui.window.main_window import MainWindow


def open_window(qtbot, path):
    window = MainWindow(None, QSettings(str(path), QSettings.IniFormat))
    qtbot.addWidget(window)
    window.show()
    qtbot.waitUntil(lambda: window.session.model is not None, timeout=60_000)
    return window


@pytest.mark.slow
def test_garbage_values_fall_back_to_their_defaults(qtbot, tmp_path, warnings):
    path = tmp_path / "settings.ini"
    path.write_text(
        "[generation]\n"
        "max_new_tokens=abc\n"
        "temperature=nan\n"
        "seed=99999999999999999999999\n"
        "top_k=-7\n"
        "top_p=1e400\n"
        "sample=maybe\n"
        "prompt=Every effort\n"
        "[window]\n"
        "geometry=not a geometry\n"
        "state=@ByteArray(\\x1\\x2)\n"
        "[model]\n"
        "spec=@Variant(\\0\\0\\0\\x7f)\n")
    window = open_window(qtbot, path)
    panel = window.prompt
    assert panel.max_tokens.value() == 20 and panel.temperature.value() == 1.0
    assert panel.seed.value() == panel.seed.maximum()  # clamped to what the box can hold
    assert panel.top_k.value() == 0 and 0 < panel.top_p.value() <= 1
    assert panel.prompt.toPlainText() == "Every effort"
    assert window.width() > 0 and not warnings
    window.close()


@pytest.mark.slow
def test_a_remembered_model_that_is_gone_or_a_fifo_starts_the_default(qtbot, tmp_path, warnings):
    fifo = tmp_path / "model.pth"
    os.mkfifo(fifo)
    path = tmp_path / "settings.ini"
    settings = QSettings(str(path), QSettings.IniFormat)
    settings.setValue("model/spec", {"checkpoint": str(fifo), "preset": None, "device": "cpu",
                                     "dtype": "float32", "seed": 0, "norm_position": "pre"})
    settings.sync()
    window = open_window(qtbot, path)
    assert "FIFO" in warnings[0][1] and "Loading the default model instead" in warnings[0][1]
    assert window.session.model.spec.checkpoint is None  # the default, not nothing
    window.close()


def test_a_model_is_remembered_by_its_absolute_path_and_read_back(tmp_path, monkeypatch):
    """A folder typed as a relative path is remembered (and saved in run files) as its
    absolute, resolved path: started from another folder, the app opens the same model,
    not whatever answers to that relative path there; every field reads back."""
    from explorer.core.sources import ModelSpec
    (tmp_path / "models" / "mine").mkdir(parents=True)
    monkeypatch.chdir(tmp_path / "models")
    spec = ModelSpec(checkpoint="mine", own_tokenizer=True)
    saved = spec.to_dict()
    assert saved["checkpoint"] == str((tmp_path / "models" / "mine").resolve())
    monkeypatch.chdir(tmp_path)
    back = ModelSpec.from_dict(saved)
    assert back.checkpoint == str((tmp_path / "models" / "mine").resolve()) and back.own_tokenizer
    run = ModelSpec(checkpoint="mine@step12").resolved()
    assert run.checkpoint == f"{(tmp_path / 'mine').resolve()}@step12"
    assert ModelSpec(checkpoint="hf:gpt2").to_dict()["checkpoint"] == "hf:gpt2"


@pytest.mark.slow
def test_a_remembered_folder_that_now_holds_another_model_is_said(qtbot, tmp_path, warnings):
    """The window remembers the model it opened (its config and name); reopened from the
    same path at the next start, a folder that now holds another model is said on the
    status line, and the same model is not."""
    from explorer.core.gpt.build import build_model
    from explorer.core.gpt.config import preset
    from explorer.core.sources import ModelSpec
    from explorer.core.weights.checkpoints import save_checkpoint
    model = tmp_path / "model.safetensors"
    save_checkpoint(build_model(preset("tiny"), seed=0), model)
    path = tmp_path / "settings.ini"
    first = MainWindow(ModelSpec(checkpoint=str(model)), QSettings(str(path), QSettings.IniFormat))
    qtbot.addWidget(first)
    first.show()
    qtbot.waitUntil(lambda: first.session.model is not None, timeout=60_000)
    was = first.session.model.label
    first.close()
    def reopened():
        window = MainWindow(None, QSettings(str(path), QSettings.IniFormat))
        qtbot.addWidget(window)
        said = []
        window.session.statusChanged.connect(said.append)
        window.show()
        qtbot.waitUntil(lambda: window.session.model is not None, timeout=60_000)
        window.close()
        return window, " | ".join(said)

    _again, said = reopened()  # the same file: nothing said
    assert said.startswith("Model loaded") and "remembered" not in said
    save_checkpoint(build_model(preset("llama-tiny"), seed=0), model)  # replaced in place
    third, said = reopened()
    assert f"{model} now holds another model than the one remembered ({was})" in said
    assert third.session.model.config.family is preset("llama-tiny").family and not warnings
