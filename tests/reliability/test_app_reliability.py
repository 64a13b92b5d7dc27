"""The app under stress: closing mid-work, out-of-memory loads."""

import pytest

from explorer.core.base import devices
from explorer.core.sources import ModelSpec
from tests.ui.conftest import TRAINING


def test_closing_the_window_during_generation_exits_cleanly(qtbot, make_window):
    """1,000 tokens asked of a 124M model (minutes of work): the close stops it at the
    next token and every thread ends."""
    window = make_window("gpt2-small")
    window.prompt.max_tokens.setValue(1000)
    window.prompt.request_run()
    run = next(j for j in window.engine.jobs if j.name == "prompt and generation")
    ends = []
    run.finished.connect(ends.append)  # why it ended
    qtbot.waitUntil(lambda: len(window.session.steps) >= 1, timeout=120_000)
    window.close()
    assert window.engine.thread.isFinished() and not window.stuck
    qtbot.waitUntil(lambda: bool(ends), timeout=60_000)  # the queued signal delivered
    assert ends == ["stopped"]  # stopped, not after 1,000 tokens


@pytest.mark.slow
def test_closing_during_training_exits_cleanly(qtbot, make_window, tmp_path):
    window = make_window()
    window.view("train").preset.setCurrentText("tiny")
    window.view("train").batch.setValue(2)
    window.view("train").steps.setValue(10_000)
    window.view("train").out_dir.setText(str(tmp_path / "run"))
    window.view("train").start_button.click()
    qtbot.waitUntil(lambda: len(window.view("train").steps_seen) >= 1, timeout=TRAINING)
    window.close()
    from explorer.ui.base.jobs import running_threads
    assert window.engine.thread.isFinished() and not window.stuck
    assert running_threads() == []  # the training's watcher too: the child stopped


def test_out_of_memory_load_is_reported_and_the_model_kept(qtbot, make_window, warnings, monkeypatch):
    window = make_window()
    before = window.session.model
    monkeypatch.setattr(devices, "free_memory_bytes", lambda device: 10 * 2**20)
    window.models.load(ModelSpec(preset="gpt2-xl"))
    qtbot.waitUntil(lambda: bool(warnings), timeout=60_000)
    assert "GiB" in warnings[-1][1] and "gpt2-xl" in warnings[-1][1]
    assert window.session.model is before


def test_stopping_a_model_load_keeps_the_previous_model(qtbot, make_window, warnings):
    from PySide6.QtCore import Qt
    from PySide6.QtTest import QTest
    window = make_window()
    before = window.session.model
    window.models.load(ModelSpec(preset="gpt2-small"))
    QTest.keyClick(window, Qt.Key_Escape)
    qtbot.waitUntil(lambda: not window.models.loading, timeout=60_000)
    assert warnings and "was stopped" in warnings[-1][1]
    assert window.session.model is before
    from tests.ui.conftest import run_and_wait
    run_and_wait(qtbot, window, max_tokens=2)  # the next action works
    assert len(window.session.steps) == 2


def test_closing_the_window_during_a_model_load_exits_cleanly(qtbot, make_window):
    """Closed while gpt2-xl's 1.5 billion parameters are being drawn: the draw stops
    between two parameters, every thread ends, and the tiny model is still the loaded one."""
    from explorer.ui.base.jobs import running_threads
    window = make_window()
    window.models.load(ModelSpec(preset="gpt2-xl"))
    job = window.models.job
    qtbot.waitUntil(lambda: job.running, timeout=60_000)
    window.close()
    assert not window.stuck and window.engine.thread.isFinished()
    assert job.outcome == "cancelled" and running_threads() == []
    assert window.engine.loaded.config.n_layers == 2  # the tiny model stays loaded


def test_invalid_generation_settings_cannot_be_entered(make_window):
    panel = make_window().prompt
    panel.sample.setChecked(True)
    panel.temperature.setValue(0.0)
    panel.top_p.setValue(0.0)
    panel.max_tokens.setValue(0)
    panel.top_k.setValue(99_999)
    s = panel.settings()
    assert s.temperature > 0 and 0 < (s.top_p or 1.0) <= 1 and s.max_new_tokens >= 1
    assert s.top_k is None or 1 <= s.top_k <= 50257
    s.validate(50257)  # whatever the user types, the settings the panel produces are valid
    panel.sample.setChecked(False)
    assert not panel.temperature.isEnabled() and not panel.top_k.isEnabled()


def test_nan_activations_are_counted_in_the_inspector(qtbot, make_window):
    import numpy as np
    from explorer.core.run.capture import NodeView
    from explorer.core.gpt.nodes import node_for_hook
    from explorer.core.run.stats import tensor_stats
    from explorer.core.run.passes import Pass
    import torch
    window = make_window()
    array = np.ones((1, 2, 32), dtype=np.float32)
    array[0, 1, :3] = np.nan
    node = node_for_hook("trf_blocks.0.add2")
    view = NodeView("trf_blocks.0.add2", node, (1, 2, 32), "float32", "cpu",
                    tensor_stats(torch.from_numpy(array), node.hist), array)
    window.session.set_prompt(Pass(ids=[1, 2], pieces=["a", "b"], views={view.name: view}))
    window.session.set_node(view.name)
    window.view("inspector").refresh()
    cells = window.view("inspector").statistics()
    assert cells["NaN / Inf"] == "3 / 0" and float(cells["mean"]) == 1.0


def test_the_window_closes_even_when_a_job_does_not_stop(qtbot, make_window):
    """A job caught in a read the system does not give back ignores Stop: the window
    still closes, after a bounded wait, and says the process must leave it behind."""
    import threading

    from explorer.ui.base.jobs import join_all, running_threads
    from tests.conftest import TEST_CLOSE_WAIT_S
    window = make_window()
    release = threading.Event()
    window.engine.submit(lambda ctx: release.wait(60), "a read that does not return")
    qtbot.waitUntil(lambda: any(j.running for j in window.engine.jobs), timeout=60_000)
    window.close_wait_s = 0.2  # the app's own wait is CLOSE_WAIT_S
    window.close()
    assert window.stuck and not window.engine.thread.isFinished()
    assert "engine" in running_threads()
    release.set()  # here the test lets it end; app.run exits the process instead
    assert join_all(TEST_CLOSE_WAIT_S) == [] and window.engine.thread.isFinished()


def test_the_divergence_finder_and_the_comparison_have_stop(qtbot, make_window):
    from PySide6.QtCore import Qt
    from PySide6.QtTest import QTest

    from explorer.core.experiments.interventions import Intervention
    from tests.ui.conftest import run_and_wait
    window = make_window()
    run_and_wait(qtbot, window, max_tokens=1)
    view = window.view("divergence")
    view.request()
    assert view.controls.stop_button.isEnabled() and not view.controls.run_button.isEnabled()
    view.controls.stop_button.click()
    qtbot.waitUntil(lambda: view.controls.job is None, timeout=60_000)
    assert view.summary.text() == "Stopped: the two models were not compared."
    assert view.controls.run_button.isEnabled() and view.result is None
    whatif = window.view("whatif")
    window.session.add_intervention(Intervention("scale", "trf_blocks.1.add2", k=-3.0))
    qtbot.waitUntil(lambda: not window.running and not window.engine.busy(), timeout=60_000)
    whatif.request_comparison()
    QTest.keyClick(window, Qt.Key_Escape)  # Esc stops any engine job, not only runs
    qtbot.waitUntil(lambda: whatif.controls.job is None, timeout=60_000)
    assert whatif.message.text() == "Stopped: the continuations were not compared."
    assert whatif.comparison is None


def test_a_reader_error_reaches_the_user_as_words_not_python(qtbot, make_window, warnings,
                                                            monkeypatch, tmp_path):
    from explorer.ui.base import engine

    def broken(spec, should_stop=None):
        raise RuntimeError("t() expects a tensor with <= 2 dimensions, but self is 3D")

    window = make_window()
    before = window.session.model
    monkeypatch.setattr(engine, "open_model", broken)
    window.models.load(ModelSpec(checkpoint=str(tmp_path / "odd.pth")))
    qtbot.waitUntil(lambda: not window.models.loading, timeout=60_000)
    text = warnings[-1][1]
    assert "odd.pth could not be read: the file is damaged or not what it seems" in text
    assert "t() expects" not in text and "the details are in the log" in text
    assert window.session.model is before


def destroy_notify(window_id: int):
    """An X server's DestroyNotify for ``window_id`` and the pointer to it as Qt hands it
    to a filter (a shiboken VoidPtr without a size: its truth raises)."""
    import ctypes

    import shiboken6

    from explorer.ui.window.window_gone import XCB_DESTROY_NOTIFY
    event = ctypes.create_string_buffer(bytes([XCB_DESTROY_NOTIFY, 0, 0, 0]) +
                                        window_id.to_bytes(4, "little") * 2 + bytes(20))
    return event, shiboken6.VoidPtr(ctypes.addressof(event))


def test_a_window_destroyed_from_outside_stops_its_work_and_closes(qtbot, make_window):
    """The X window destroyed under a 1,000-token generation (xdotool windowclose): its
    DestroyNotify closes the window as the user would, the generation stops far short of
    its end and the engine's thread ends; another window's DestroyNotify changes nothing."""
    from PySide6.QtCore import QByteArray
    from PySide6.QtWidgets import QApplication

    from explorer.ui.window.window_gone import watch
    app = QApplication.instance()
    window = make_window()
    gone = watch(app, window)
    try:
        window.prompt.max_tokens.setValue(1000)
        window.prompt.request_run()
        qtbot.waitUntil(lambda: len(window.session.steps) >= 1, timeout=60_000)
        xcb = QByteArray(b"xcb_generic_event_t")
        mine = int(window.winId())
        _other, pointer = destroy_notify(mine + 1)
        assert gone.nativeEventFilter(xcb, pointer) == (False, 0)
        QApplication.processEvents()  # whatever the event would have set off
        assert window.isVisible() and window.running and not gone.gone
        _event, pointer = destroy_notify(mine)
        assert gone.nativeEventFilter(xcb, pointer) == (False, 0)
        qtbot.waitUntil(lambda: not window.isVisible(), timeout=60_000)
        assert gone.gone and window.engine.thread.isFinished()
        assert len(window.session.steps) < 1000
    finally:
        app.removeNativeEventFilter(gone)
