"""Training in a process of its own: the same events as in the thread, Stop saves where
it is, and a failure comes back as one line."""

import json

import pytest

from explorer.core.experiments.snapshots import SnapshotEvent
from explorer.core.experiments.train_process import train_in_process
from explorer.core.experiments.training import EvalEvent, StepEvent
from tests.core.experiments.test_training import fast

pytestmark = pytest.mark.slow  # a child process each: ./test.sh -m "not slow" leaves them out


def test_a_child_process_trains_and_reports_every_event(tmp_path):
    events = []
    last = train_in_process(None, fast(max_steps=4, eval_every=2, snapshots=2), tmp_path,
                            events.append)
    assert last == str(tmp_path / "model.safetensors")
    assert [e.step for e in events if isinstance(e, StepEvent)] == [1, 2, 3, 4]
    assert [e.step for e in events if isinstance(e, EvalEvent)] == [0, 2, 4]
    assert [e.step for e in events if isinstance(e, SnapshotEvent)] == [0, 4]
    assert json.loads((tmp_path / "trainer.json").read_text())["step"] == 4


def test_stop_saves_where_it_is(tmp_path):
    steps = []

    def report(event):
        if isinstance(event, StepEvent):
            steps.append(event.step)

    last = train_in_process(None, fast(max_steps=100_000, eval_every=10**6), tmp_path, report,
                            should_stop=lambda: len(steps) >= 3)
    saved = json.loads((tmp_path / "trainer.json").read_text())["step"]
    assert last.endswith("model.safetensors") and 3 <= saved == steps[-1] < 100_000


def test_a_failure_in_the_child_is_one_line(tmp_path):
    with pytest.raises(ValueError) as caught:
        train_in_process(str(tmp_path / "no-such.txt"), fast(), tmp_path / "run", lambda e: None)
    said = str(caught.value)
    assert "no-such.txt" in said and "\n" not in said


@pytest.mark.skipif(not hasattr(__import__("os"), "getpriority"), reason="Unix scheduling priority")
def test_the_child_runs_at_a_lower_priority_from_its_first_event(tmp_path):
    import multiprocessing
    import os

    from explorer.core.experiments.train_process import NICE
    seen = []

    def report(event):
        for child in multiprocessing.active_children():
            if child.name == "training":
                seen.append(os.getpriority(os.PRIO_PROCESS, child.pid))

    train_in_process(None, fast(max_steps=2, eval_every=10**6, snapshots=0), tmp_path, report)
    mine = os.getpriority(os.PRIO_PROCESS, 0)
    assert seen and set(seen) == {min(mine + NICE, 19)}
