"""The app under stress: closing mid-work, out-of-memory loads."""

import time

from explorer.core import checkpoints
from explorer.ui.engine import ModelSpec


def test_closing_the_window_during_generation_exits_cleanly(qtbot, make_window):
    window = make_window()
    window.generation.max_tokens.setValue(1000)
    window.generation.request_run()
    qtbot.waitUntil(lambda: len(window.session.steps) >= 1, timeout=60_000)
    start = time.monotonic()
    window.close()
    assert window.thread.isFinished()
    assert time.monotonic() - start < 10  # stopped before the next token, not after 1000


def test_closing_during_training_exits_cleanly(qtbot, make_window, tmp_path):
    window = make_window()
    window.train_panel.preset.setCurrentText("tiny")
    window.train_panel.steps.setValue(10_000)
    window.train_panel.out_dir.setText(str(tmp_path / "run"))
    window.train_panel.start_button.click()
    qtbot.waitUntil(lambda: len(window.train_panel.steps_seen) >= 1, timeout=60_000)
    window.close()
    assert window.thread.isFinished()


def test_out_of_memory_load_is_reported_and_the_model_kept(qtbot, make_window, warnings, monkeypatch):
    window = make_window()
    before = window.session.model
    monkeypatch.setattr(checkpoints, "free_memory_bytes", lambda device: 10 * 2**20)
    window.load_model(ModelSpec(preset="gpt2-xl"))
    qtbot.waitUntil(lambda: bool(warnings), timeout=30_000)
    assert "GiB" in warnings[-1][1] and "gpt2-xl" in warnings[-1][1]
    assert window.session.model is before


def test_stopping_a_model_load_keeps_the_previous_model(qtbot, make_window, warnings):
    from PySide6.QtCore import Qt
    from PySide6.QtTest import QTest
    window = make_window()
    before = window.session.model
    window.load_model(ModelSpec(preset="gpt2-small"))
    QTest.keyClick(window, Qt.Key_Escape)
    qtbot.waitUntil(lambda: not window.loading, timeout=60_000)
    assert warnings and "was stopped" in warnings[-1][1]
    assert window.session.model is before
    from tests.ui.conftest import run_and_wait
    run_and_wait(qtbot, window, max_tokens=2)  # the next action works
    assert len(window.session.steps) == 2
