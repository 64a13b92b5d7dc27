import atexit
import os
import shutil
import tempfile

# Before anything imports huggingface_hub (which reads its settings once): the tests
# never see the developer's Hugging Face cache or the explorer's remembered state, and
# nothing can reach a real hub — port 9 on 127.0.0.1 refuses every connection. A test
# that needs a hub starts tests/hub_server.py and points HF_ENDPOINT at it.
_ISOLATED = tempfile.mkdtemp(prefix="explorer-tests-")
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

import pytest  # noqa: E402
import torch  # noqa: E402

if os.environ.get("PYTEST_XDIST_WORKER"):  # tests in parallel: the cores shared, not oversold
    torch.set_num_threads(max(1, (os.cpu_count() or 1) // int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))))


@pytest.fixture(autouse=True)
def _deterministic(tmp_path, monkeypatch):
    """Each test starts from the same seed and a state folder of its own (what one test's
    training or download remembers never becomes another's default model)."""
    torch.manual_seed(1234)
    monkeypatch.setenv("GPT_EXPLORER_STATE_DIR", str(tmp_path / "explorer-state"))
    yield


@pytest.fixture
def hf_cache(tmp_path, monkeypatch):
    """An empty Hugging Face cache and explorer state of this test's own."""
    cache = tmp_path / "hf-cache"
    monkeypatch.setenv("HF_HUB_CACHE", str(cache))
    monkeypatch.setenv("GPT_EXPLORER_STATE_DIR", str(tmp_path / "state"))
    return cache
