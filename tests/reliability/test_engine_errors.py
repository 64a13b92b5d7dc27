"""Any exception inside any engine job reaches the GUI thread as data: one dialog, opened
on the GUI thread, and the window keeps working (a dialog opened from the engine's
thread used to kill the process)."""

import pytest
from PySide6.QtCore import QThread
from PySide6.QtWidgets import QApplication, QMessageBox

from explorer.core.sources import ModelSpec
from tests.ui.conftest import run_and_wait

pytestmark = pytest.mark.slow  # the whole module: ./test.sh -m "not slow" leaves it out

KINDS = [ValueError, RuntimeError, KeyError, MemoryError, ZeroDivisionError, RecursionError]


def boom(kind):
    def raise_it(*args, **kwargs):
        raise kind("boom in the job")
    return raise_it


def trigger_run(qtbot, w):
    w.prompt.request_run()


def trigger_batch(qtbot, w):
    w.prompt.runs.start_batch(["Every effort", "moves you"])


def trigger_lens(qtbot, w):
    w.view("lens").request()


def trigger_compare(qtbot, w):
    w.view("ln_compare")._compare()


def trigger_gradients(qtbot, w):
    w.view("ln_compare").depths.setText("2")
    w.view("ln_compare").run_button.click()


def trigger_placements(qtbot, w):
    w.view("ln_compare").placements.depth.setValue(2)
    w.view("ln_compare").placements.run_button.click()


def trigger_training(qtbot, w):
    w.view("train").start_button.click()


def trigger_divergence(qtbot, w):
    w.view("divergence").request()


def trigger_grad_flow(qtbot, w):
    w.view("gradients").run_button.click()


def trigger_patching(qtbot, w):
    w.view("patching").request()


def trigger_whatif(qtbot, w):
    from explorer.core.experiments.interventions import Intervention
    w.session.interventions = [Intervention("scale", "trf_blocks.0.att", k=0.5)]
    w.view("whatif").request_comparison()


def trigger_load(qtbot, w):
    w.models.load(ModelSpec(preset="tiny", seed=5))


JOBS = {  # where the job's core function is looked up, and what starts the job
    "load": ("explorer.ui.base.engine.open_model", trigger_load),
    "prompt and generation": ("explorer.ui.base.runs.prompt_then_generate", trigger_run),
    "batch": ("explorer.ui.base.runs.run_prompt", trigger_batch),
    "logit lens": ("explorer.ui.views.look.lens_view.logit_lens", trigger_lens),
    "Pre-LN vs Post-LN": ("explorer.ui.views.learn.ln_compare_view.compare_prompt", trigger_compare),
    "placements experiment": ("explorer.ui.views.learn.placements_panel.stability", trigger_placements),
    "gradient experiment": ("explorer.ui.views.learn.ln_compare_view.gradient_experiment", trigger_gradients),
    "training": ("explorer.ui.views.experiment.train_view.train_in_process", trigger_training),
    "divergence finder": ("explorer.ui.views.experiment.divergence_view.find_divergence", trigger_divergence),
    "gradients": ("explorer.ui.views.learn.gradients_view.gradient_report", trigger_grad_flow),
    "activation patching": ("explorer.ui.views.experiment.patching_view.patch_sweep", trigger_patching),
    "clean against changed": ("explorer.ui.views.experiment.whatif_view.compare", trigger_whatif),
}


CASES = {job: (ValueError, RuntimeError) for job in JOBS}  # a message by itself; a bug
CASES["logit lens"] = tuple(KINDS)  # every kind of exception once


@pytest.mark.parametrize("job", list(JOBS))
def test_an_exception_in_any_job_is_one_line_on_the_gui_thread(qtbot, make_window, monkeypatch, job):
    """The window's own jobs (loading, Ctrl+Enter) say it in a dialog; a view's job says
    it in the view and on the status line. Either way one line, said on the GUI thread,
    and the window goes on working."""
    shown = []

    def said(text, title=""):
        shown.append((title, text, QThread.currentThread() is QApplication.instance().thread()))

    monkeypatch.setattr(QMessageBox, "warning", lambda parent, title, text: said(text, title))
    window = make_window()
    run_and_wait(qtbot, window, max_tokens=1)  # a pass for the jobs that read one
    window.session.statusChanged.connect(
        lambda text: ("boom" in text or "Error" in text) and said(text))
    target, trigger = JOBS[job]
    for kind in CASES[job]:
        shown.clear()
        before = window.session.model
        with monkeypatch.context() as patched:
            patched.setattr(target, boom(kind))
            trigger(qtbot, window)
            qtbot.waitUntil(lambda: bool(shown), timeout=60_000)
            qtbot.waitUntil(lambda: not window.running and not window.models.loading
                            and not window.engine.busy(), timeout=60_000)
        title, text, on_gui_thread = shown[0]
        assert on_gui_thread and len(shown) == 1 and "\n" not in text.strip(), (kind, shown)
        plain = kind in (ValueError, MemoryError, KeyError)  # a message by itself
        if job == "load" and not plain:  # a reader's own error: words for people, no Python
            assert "could not be read: the file is damaged or not what it seems" in text
            assert f"({kind.__name__}; the details are in the log)" in text
            assert "boom in the job" not in text
        else:
            assert "boom in the job" in text, (kind, text)
            if not plain:  # not a message by itself: its name
                assert kind.__name__ in text, (kind, text)
        assert window.session.model is before and window.engine.thread.isRunning()
    shown.clear()
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
        qtbot.waitUntil(lambda: bool(shown), timeout=60_000)
    finally:
        sys.excepthook, threading.excepthook = sys.__excepthook__, threading.__excepthook__
    assert shown[0][1] and "ZeroDivisionError" in shown[0][0]


def test_no_qt_object_is_made_off_the_gui_thread(qtbot, make_window, qtlog, tmp_path):
    """Every job, run for real: Qt reports an object made or parented across threads
    ('Cannot create children for a parent that is in a different thread'); none is."""
    window = make_window()
    run_and_wait(qtbot, window, max_tokens=2)
    window.view("lens").request()
    window.view("ln_compare")._compare()
    window.view("divergence").request()
    window.view("ln_compare").depths.setText("2")
    window.view("ln_compare").run_button.click()
    window.view("gradients").run_button.click()
    window.view("patching").request()
    qtbot.waitUntil(lambda: window.view("gradients").report is not None and window.view("patching").sweep
                    is not None and not window.engine.busy(), timeout=60_000)
    assert window.view("divergence").result is not None and window.view("ln_compare").runs
    assert window.view("gradients").report is not None and window.view("patching").sweep is not None
    from explorer.core.experiments.interventions import Intervention
    window.session.add_intervention(Intervention("scale", "trf_blocks.0.att", k=0.5))
    qtbot.waitUntil(lambda: window.running, timeout=60_000)  # the prompt runs again with it
    qtbot.waitUntil(lambda: not window.running and not window.engine.busy(), timeout=60_000)
    window.view("whatif").request_comparison()
    qtbot.waitUntil(lambda: window.view("whatif").comparison is not None, timeout=60_000)
    panel = window.view("train")
    panel.preset.setCurrentText("tiny")
    panel.batch.setValue(2)
    panel.steps.setValue(2)
    panel.out_dir.setText(str(tmp_path / "run"))
    panel.start_button.click()
    qtbot.waitUntil(lambda: not window.running and not window.engine.busy(), timeout=120_000)
    window.models.load(ModelSpec(checkpoint=panel.checkpoint))
    qtbot.waitUntil(lambda: window.session.model.trained, timeout=60_000)
    threads = [r.message for r in qtlog.records if "thread" in r.message.lower()]
    assert not threads
    assert window.view("divergence").result is None  # a result of the old model does not stay
