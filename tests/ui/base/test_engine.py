"""The engine gives the C heap's freed memory back to the system once no job has run for
a while (``heap.give_back_freed_memory``; tests/core/base/test_heap.py shows what that
returns); meanwhile the heap keeps it for the next pass (``heap.reuse_freed_memory``, set
by the app before any tensor)."""

import threading

import pytest
from PySide6.QtCore import QThread

from explorer.core.base import heap
from explorer.ui.base import engine as engine_module
from explorer.ui.base.engine import Engine
from explorer.ui.base.jobs import JobRunner


def spin(stop: threading.Event) -> None:
    while not stop.is_set():
        sum(range(10_000))  # Python work: holds the interpreter's lock in turns


def ended_before_submit_returns(monkeypatch, engine: Engine) -> None:
    """The GUI thread held up right after a job is queued, as any busy or preempted GUI
    thread can be: the engine's thread runs the job to its end before ``submit`` returns."""
    queue = JobRunner.submit

    def submit(runner, *args, **kwargs):
        job = queue(runner, *args, **kwargs)
        while runner is engine and not job.done:
            threading.Event().wait(0.01)
        return job

    monkeypatch.setattr(JobRunner, "submit", submit)


@pytest.mark.parametrize("spinning, ended_first", [(0, False), (3, False), (0, True)])
def test_freed_memory_goes_back_once_the_engine_is_idle_and_never_during_a_job(
        qtbot, monkeypatch, spinning, ended_first):
    """``spinning``: threads of Python work beside it, as a window's side threads can be;
    a job's end then reaches the GUI well before the engine's thread marks the job done,
    and the idle clock, finding it not done yet, must ask again rather than give up.
    ``ended_first``: the job ends before ``submit`` returns; its end still starts the clock."""
    stop = threading.Event()
    for _ in range(spinning):
        threading.Thread(target=spin, args=(stop,), daemon=True).start()
    given = []  # the thread of each give-back of this engine, counted once it is done

    def give_back() -> None:
        heap.give_back_freed_memory()
        if QThread.currentThread() == engine.thread:  # not another test's window's engine
            given.append(threading.get_ident())

    monkeypatch.setattr(engine_module, "give_back_freed_memory", give_back)
    engine = Engine(idle_give_back_s=0.3)
    if ended_first:
        ended_before_submit_returns(monkeypatch, engine)
    done, threads = [], []

    def quick(ctx):
        threads.append(threading.get_ident())
        return len(given)

    def slow(ctx):  # a job four idle intervals long
        threading.Event().wait(1.2)
        return len(given)

    try:
        engine.submit(quick, "quick", finished=done.append)
        qtbot.waitUntil(lambda: len(given) == 1, timeout=60_000)
        assert done == [0]  # nothing given back while the job ran
        assert given == threads  # on the engine's own thread, not the GUI's
        assert threads != [threading.get_ident()]
        engine.submit(slow, "slow", finished=done.append)
        qtbot.waitUntil(lambda: len(done) == 2, timeout=60_000)
        assert done[1] == 1  # none during 1.2 s of a job: the clock waits for its end
        qtbot.waitUntil(lambda: len(given) == 2, timeout=60_000)
        qtbot.wait(1000)  # over three idle intervals more
        assert len(given) == 2  # once per idle stretch, not again and again
    finally:
        stop.set()
        engine.shutdown()
