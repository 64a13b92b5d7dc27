import atexit
import os
import shutil
import sys
import tempfile


def _isolated() -> str:
    """A temporary folder whose name holds no digit: the window shows paths under it
    (the Train tab's folder), and a number in one could read as a fact a question hides,
    covering a view at random (``explorer-tests-x_128ab`` holds a width)."""
    while True:
        folder = tempfile.mkdtemp(prefix="explorer-tests-")
        if not any(c.isdigit() for c in os.path.basename(folder)):
            return folder
        os.rmdir(folder)


# Before anything imports huggingface_hub (which reads its settings once): the tests
# never see the developer's Hugging Face cache or the explorer's remembered state, and
# nothing can reach a real hub — port 9 on 127.0.0.1 refuses every connection. A test
# that needs a hub starts tests/hub_server.py and points HF_ENDPOINT at it.
_ISOLATED = _isolated()
atexit.register(shutil.rmtree, _ISOLATED, ignore_errors=True)
os.environ["HF_HOME"] = os.path.join(_ISOLATED, "hf-home")
os.environ.pop("HF_HUB_CACHE", None)
os.environ.pop("HUGGINGFACE_HUB_CACHE", None)
os.environ.pop("HF_HUB_OFFLINE", None)
os.environ["HF_ENDPOINT"] = "http://127.0.0.1:9"
os.environ["HF_HUB_DISABLE_TELEMETRY"] = "1"
os.environ["GPT_EXPLORER_STATE_DIR"] = os.path.join(_ISOLATED, "state")
os.environ["GPT_EXPLORER_DATA_DIR"] = os.path.join(_ISOLATED, "data")
os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
# The statistics' compiled kernels (core/run/fused.py) are seconds of compiling a
# process: the windows and commands the tests start go without them; the tests of the
# kernels compile them on purpose (fused.warm(force=True)).
os.environ["GPT_EXPLORER_COMPILE"] = "0"

import pytest  # noqa: E402
import torch  # noqa: E402
from hypothesis import settings as hypothesis_settings  # noqa: E402

from explorer.core.base.heap import give_back_freed_memory  # noqa: E402

# The suite's property tests draw the same examples on every run, so a run's result does
# not depend on chance; HYPOTHESIS_PROFILE=explore draws new ones each run (to hunt).
hypothesis_settings.register_profile("suite", derandomize=True, database=None, deadline=None)
hypothesis_settings.register_profile("explore", derandomize=False, deadline=None)
hypothesis_settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "suite"))

if os.environ.get("PYTEST_XDIST_WORKER"):  # tests in parallel: the cores shared, not oversold
    torch.set_num_threads(max(1, (os.cpu_count() or 1) // int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))))


@pytest.fixture(autouse=True)
def _deterministic(tmp_path, monkeypatch):
    """Each test starts from the same seed and a state folder of its own (what one test's
    training or download remembers never becomes another's default model)."""
    torch.manual_seed(1234)
    monkeypatch.setenv("GPT_EXPLORER_STATE_DIR", str(tmp_path / "explorer-state"))
    yield
    # A test that ran the command line in this process left the heap keeping what it
    # frees (heap.reuse_freed_memory): given back here, as the window's engine does when
    # idle, so that a worker does not hold its largest test's memory for the rest.
    give_back_freed_memory()


@pytest.fixture(autouse=True)
def _processes_only_when_slow(request, monkeypatch):
    """The quick subset (``./test.sh -m "not slow"``) starts no process: a test that
    spawns one (a command run as a user would, a trainer in a child) is marked slow."""
    if request.node.get_closest_marker("slow") is not None:
        return
    import multiprocessing.process
    import subprocess

    def refuse(*args, **kwargs):
        pytest.fail("this test starts a process: mark it @pytest.mark.slow")
    monkeypatch.setattr(subprocess.Popen, "__init__", refuse)
    monkeypatch.setattr(multiprocessing.process.BaseProcess, "start", refuse)


@pytest.fixture
def hf_cache(tmp_path, monkeypatch):
    """An empty Hugging Face cache and explorer state of this test's own."""
    cache = tmp_path / "hf-cache"
    monkeypatch.setenv("HF_HUB_CACHE", str(cache))
    monkeypatch.setenv("GPT_EXPLORER_STATE_DIR", str(tmp_path / "state"))
    return cache


# Far above a loaded machine's worst: how long a window closed at a test's end waits for
# each job to stop (the app itself waits 5 s, then leaves the process without the thread).
TEST_CLOSE_WAIT_S = 300.0
_KEPT: list = []  # windows whose threads never ended: never destroyed, so Qt cannot abort


@pytest.hookimpl(wrapper=True)
def pytest_runtest_teardown(item):
    """Before pytest-qt closes and deletes a test's widgets: its windows are closed here,
    each waiting for its jobs to stop, and every job thread of the process is joined. A
    thread still running then fails the test loudly, and its window is kept alive (Qt
    aborts the whole worker process when a running thread is destroyed)."""
    left = _close_and_join(item)
    result = yield
    if left:
        pytest.fail(f"threads still running {TEST_CLOSE_WAIT_S:.0f} s after the test's "
                    f"windows closed: {', '.join(left)}")
    return result


def _close_and_join(item) -> list[str]:
    jobs = sys.modules.get("explorer.ui.base.jobs")
    if jobs is None:  # no Qt job was ever started in this process
        return []
    widgets = [ref() for ref, _ in getattr(item, "qt_widgets", [])]
    for window in widgets:
        if window is not None and hasattr(window, "close_wait_s") and window.isVisible():
            window.close_wait_s = TEST_CLOSE_WAIT_S
            window.close()
    left = jobs.join_all(TEST_CLOSE_WAIT_S)
    if left:  # kept referenced, out of pytest-qt's reach: never destroyed while running
        _KEPT.extend(w for w in widgets if w is not None)
        item.qt_widgets = []
    return left
