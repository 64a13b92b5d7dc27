"""The engine gives the C heap's freed memory back to the system once no job has run for
a while; meanwhile the heap keeps it for the next pass (``heap.reuse_freed_memory``, set
by the app before any tensor)."""

import sys
import threading

import pytest
import torch

from explorer.core.base import heap
from explorer.ui.base import engine as engine_module
from explorer.ui.base.engine import Engine

MIB = 2**20


def resident() -> int:
    """This process's resident memory in bytes."""
    import resource
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * resource.getpagesize()


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's heap and /proc")
def test_freed_memory_goes_back_once_the_engine_is_idle_and_never_during_a_job(qtbot, monkeypatch):
    assert heap.reuse_freed_memory()
    given = []
    monkeypatch.setattr(engine_module, "give_back_freed_memory",
                        lambda: (heap.give_back_freed_memory(),
                                 given.append(threading.get_ident())))  # counted once done
    engine = Engine(idle_give_back_s=0.3)
    done = []

    def temporaries(ctx):  # a pass's temporaries, 5 × 40 MiB, written, then freed
        xs = [torch.ones(40 * MIB // 4) for _ in range(5)]
        assert sum(float(x[-1]) for x in xs) == 5.0
        del xs
        return len(given), resident()

    def slow(ctx):  # a job several idle intervals long
        threading.Event().wait(1.2)
        return len(given), resident()

    try:
        engine.submit(temporaries, "temporaries", finished=done.append)
        qtbot.waitUntil(lambda: len(given) == 1, timeout=60_000)
        before, kept = done[0]
        assert before == 0  # nothing given back while the job ran
        qtbot.wait(50)
        assert kept - resident() > 150 * MIB  # the freed 200 MiB left the process
        assert given != [threading.get_ident()]  # on the engine's own thread, not the GUI's
        engine.submit(slow, "slow", finished=done.append)
        qtbot.waitUntil(lambda: len(done) == 2, timeout=60_000)
        assert done[1][0] == 1  # no give-back in 1.2 s of a job: the clock waits for its end
        qtbot.waitUntil(lambda: len(given) == 2, timeout=60_000)
        qtbot.wait(1000)  # over three idle intervals more
        assert len(given) == 2  # once per idle stretch, not again and again
    finally:
        engine.shutdown()
