"""Any exception inside any engine job reaches the GUI thread as data: one dialog, opened
on the GUI thread, and the window keeps working (a dialog opened from the engine's
thread used to kill the process)."""

import pytest
from PySide6.QtCore import QThread
from PySide6.QtWidgets import QApplication, QMessageBox

from explorer.core.sources import ModelSpec
from tests.ui.conftest import run_and_wait

KINDS = [ValueError, RuntimeError, KeyError, MemoryError, ZeroDivisionError, RecursionError]


def boom(kind):
    def raise_it(*args, **kwargs):
        raise kind("boom in the job")
    return raise_it


def trigger_run(qtbot, w):
    w.generation.request_run()


def trigger_batch(qtbot, w):
    w.generation.runs.start_batch(["Every effort", "moves you"])


def trigger_lens(qtbot, w):
    w.lens.request()


def trigger_compare(qtbot, w):
    w.ln_compare._compare()


def trigger_gradients(qtbot, w):
    w.ln_compare.depths.setText("2")
    w.ln_compare.run_button.click()


def trigger_training(qtbot, w):
    w.train_panel.start_button.click()


def trigger_divergence(qtbot, w):
    w.divergence.request()


def trigger_grad_flow(qtbot, w):
    w.gradients.run_button.click()


def trigger_patching(qtbot, w):
    w.patching.request()


def trigger_whatif(qtbot, w):
    from explorer.core.experiments.interventions import Intervention
    w.session.interventions = [Intervention("scale", "trf_blocks.0.att", k=0.5)]
    w.whatif.request_comparison()


def trigger_load(qtbot, w):
    w.load_model(ModelSpec(preset="tiny", seed=5))


JOBS = {  # where the job's core function is looked up, and what starts the job
    "load": ("explorer.ui.base.engine.open_model", trigger_load),
    "prompt and generation": ("explorer.ui.base.runs.prompt_then_generate", trigger_run),
    "batch": ("explorer.ui.base.runs.run_prompt", trigger_batch),
    "logit lens": ("explorer.ui.views.lens_view.logit_lens", trigger_lens),
    "Pre-LN vs Post-LN": ("explorer.ui.views.ln_compare_view.compare_prompt", trigger_compare),
    "gradient experiment": ("explorer.ui.views.ln_compare_view.gradient_experiment", trigger_gradients),
    "training": ("explorer.ui.views.train_view.train", trigger_training),
    "divergence finder": ("explorer.ui.views.divergence_view.find_divergence", trigger_divergence),
    "gradients": ("explorer.ui.views.gradients_view.gradient_report", trigger_grad_flow),
    "activation patching": ("explorer.ui.views.patching_view.patch_sweep", trigger_patching),
    "clean against changed": ("explorer.ui.views.whatif_view.compare", trigger_whatif),
}


@pytest.mark.parametrize("kind", KINDS, ids=lambda k: k.__name__)
@pytest.mark.parametrize("job", list(JOBS))
def test_an_exception_in_any_job_is_a_dialog_on_the_gui_thread(qtbot, make_window, monkeypatch,
                                                               job, kind):
    shown = []

    def warning(parent, title, text):
        shown.append((title, text, QThread.currentThread() is QApplication.instance().thread()))

    monkeypatch.setattr(QMessageBox, "warning", warning)
    window = make_window()
    run_and_wait(qtbot, window, max_tokens=1)  # a pass for the jobs that read one
    before = window.session.model
    target, trigger = JOBS[job]
    monkeypatch.setattr(target, boom(kind))
    trigger(qtbot, window)
    qtbot.waitUntil(lambda: bool(shown), timeout=30_000)
    qtbot.waitUntil(lambda: not window.running and not window.loading
                    and not window.engine.busy(), timeout=30_000)
    title, text, on_gui_thread = shown[0]
    assert on_gui_thread and len(shown) == 1 and "\n" not in text.strip()
    plain = kind in (ValueError, MemoryError, KeyError)  # a message by itself
    if job == "load" and not plain:  # a reader's own error: words for people, no Python
        assert "could not be read: the file is damaged or not what it seems" in text
        assert f"({kind.__name__}; the details are in the log)" in text
        assert "boom in the job" not in text
    else:
        assert "boom in the job" in text
        if not plain:  # not a message by itself: its name
            assert text.startswith(kind.__name__)
    assert window.session.model is before and window.engine.thread.isRunning()
    monkeypatch.undo()
    monkeypatch.setattr(QMessageBox, "warning", warning)
    run_and_wait(qtbot, window, max_tokens=2)  # the window works afterwards
    assert len(window.session.steps) == 2


def test_an_exception_in_another_thread_is_shown_on_the_gui_thread(qtbot, make_window, monkeypatch):
    import sys
    import threading

    from explorer.ui.window.app import install_excepthook
    shown = []
    window = make_window()
    window.warn = lambda parent, title, text: shown.append(
        (text, QThread.currentThread() is QApplication.instance().thread()))
    install_excepthook(window)
    try:
        worker = threading.Thread(target=lambda: 1 / 0)
        worker.start()
        worker.join()
        qtbot.waitUntil(lambda: bool(shown), timeout=10_000)
    finally:
        sys.excepthook, threading.excepthook = sys.__excepthook__, threading.__excepthook__
    assert shown[0][1] and "ZeroDivisionError" in shown[0][0]


def test_no_qt_object_is_made_off_the_gui_thread(qtbot, make_window, qtlog, tmp_path):
    """Every job, run for real: Qt reports an object made or parented across threads
    ('Cannot create children for a parent that is in a different thread'); none is."""
    window = make_window()
    run_and_wait(qtbot, window, max_tokens=2)
    window.lens.request()
    window.ln_compare._compare()
    window.divergence.request()
    window.ln_compare.depths.setText("2")
    window.ln_compare.run_button.click()
    window.gradients.run_button.click()
    window.patching.request()
    qtbot.waitUntil(lambda: window.gradients.report is not None and window.patching.sweep
                    is not None and not window.engine.busy(), timeout=60_000)
    assert window.divergence.result is not None and window.ln_compare.runs
    assert window.gradients.report is not None and window.patching.sweep is not None
    from explorer.core.experiments.interventions import Intervention
    window.session.add_intervention(Intervention("scale", "trf_blocks.0.att", k=0.5))
    qtbot.waitUntil(lambda: window.running, timeout=10_000)  # the prompt runs again with it
    qtbot.waitUntil(lambda: not window.running and not window.engine.busy(), timeout=60_000)
    window.whatif.request_comparison()
    qtbot.waitUntil(lambda: window.whatif.comparison is not None, timeout=60_000)
    panel = window.train_panel
    panel.preset.setCurrentText("tiny")
    panel.steps.setValue(2)
    panel.out_dir.setText(str(tmp_path / "run"))
    panel.start_button.click()
    qtbot.waitUntil(lambda: not window.running and not window.engine.busy(), timeout=120_000)
    window.load_model(ModelSpec(checkpoint=panel.checkpoint))
    qtbot.waitUntil(lambda: window.session.model.trained, timeout=60_000)
    threads = [r.message for r in qtlog.records if "thread" in r.message.lower()]
    assert not threads
    assert window.divergence.result is None  # a result of the old model does not stay
