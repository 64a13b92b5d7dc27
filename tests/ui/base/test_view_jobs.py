"""A view's jobs through one helper: the latest request wins, the job it supersedes is
cancelled and what that job still sends is dropped, a failure is shown in the view and on
the status line, and a forgotten answer never arrives."""

import pytest

from explorer.ui.base.view_jobs import ViewJobs
from explorer.ui.widgets.job_controls import JobControls
from tests.ui.alone import Alone


def test_the_latest_request_wins_and_the_one_before_is_cancelled(qtbot):
    alone = Alone(qtbot)
    shown, failed, stopped = [], [], []
    jobs = ViewJobs(alone.engine, failed.append)
    first = jobs.run(lambda ctx: ctx.should_stop() and "stopped" or "first", "one",
                     finished=shown.append, cancelled=lambda: stopped.append(1))
    second = jobs.run(lambda ctx: "second", "two", finished=shown.append)
    assert first.should_stop() and not second.should_stop()  # superseded: asked to stop
    alone.settle()
    assert shown == ["second"] and not failed and not stopped  # the first one's dropped
    assert not jobs.running


def test_a_failure_is_shown_in_the_view_and_on_the_status_line(qtbot):
    alone = Alone(qtbot)
    failed = []
    jobs = ViewJobs(alone.engine, failed.append, status=alone.session.set_status,
                    title="Patching")

    def broken(ctx):
        raise ValueError("the clean prompt is empty")

    jobs.run(broken, "sweep", finished=lambda _r: None)
    alone.settle()
    assert failed == ["the clean prompt is empty"]
    assert alone.session.status == "Patching: the clean prompt is empty"


def test_forget_drops_an_answer_still_coming_and_the_controls_follow(qtbot):
    alone = Alone(qtbot)
    shown = []
    controls = JobControls("Run", lambda: None)
    jobs = ViewJobs(alone.engine, print, controls=controls)
    job = jobs.run(lambda ctx: (ctx.report((1, 4)), "late")[1], "slow", finished=shown.append)
    assert not controls.run_button.isEnabled() and controls.stop_button.isEnabled()
    jobs.forget()  # the model changed before it ran
    assert job.should_stop() and controls.run_button.isEnabled() and not jobs.running
    alone.settle()
    assert shown == []
    jobs.run(lambda ctx: (ctx.report((3, 4)), "now")[1], "again", finished=shown.append,
             progress=None)
    alone.settle()
    assert shown == ["now"] and controls.progress.maximum() == 4 and controls.run_button.isEnabled()


def test_a_job_that_ends_after_its_view_closed_reaches_nothing_of_it(qtbot):
    # the window closing (a --screenshot run) deletes a view while its job still runs
    import shiboken6
    from PySide6.QtWidgets import QHBoxLayout, QWidget

    class View(QWidget):
        def __init__(self) -> None:
            super().__init__()
            self.shown = []
            self.controls = JobControls("Run", lambda: None)
            layout = QHBoxLayout(self)
            for widget in self.controls.widgets():
                layout.addWidget(widget)

        def done(self, result) -> None:
            self.shown.append(result)

    alone = Alone(qtbot)
    view = View()
    shown = view.shown
    jobs = ViewJobs(alone.engine, print, controls=view.controls)
    jobs.run(lambda ctx: (ctx.report((1, 2)), "done")[1], "slow", finished=view.done,
             progress=None)
    shiboken6.delete(view)  # its buttons with it
    alone.settle()  # the report and the end arrive: nothing calls into the deleted view
    assert shown == [] and not jobs.running


def test_a_view_cannot_be_given_no_engine():
    with pytest.raises(TypeError, match="needs the engine"):
        ViewJobs(None, print)
