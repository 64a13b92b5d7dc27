"""`gpt-explorer download` as a user runs it: a real process, real HTTP to a stand-in
Hub on 127.0.0.1, Ctrl+C as SIGINT."""

import os
import resource
import signal
import subprocess
import sys
import time

import pytest

from tests.hub_server import serving, tiny_gpt2

pytestmark = pytest.mark.slow  # the whole module: ./test.sh -m "not slow" leaves it out

transformers = pytest.importorskip("transformers")

REPO = "openai-community/gpt2"


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    return tiny_gpt2(tmp_path_factory.mktemp("tiny"), n_embd=64, seed=4)[1]


@pytest.fixture
def server(files):
    with serving(REPO, files) as srv:
        yield srv


@pytest.fixture
def env(tmp_path, server):
    return dict(os.environ, HF_ENDPOINT=server.url, HF_HUB_CACHE=str(tmp_path / "cache"),
                GPT_EXPLORER_STATE_DIR=str(tmp_path / "state"), PYTHONUNBUFFERED="1")


def explorer(*args, env, **kwargs):
    return subprocess.run([sys.executable, "-m", "explorer", *args], env=env, capture_output=True,
                          text=True, timeout=300, **kwargs)


def test_download_shows_progress_and_makes_the_default(env, server, files, tmp_path):
    server.state.bytes_per_second = 20e6  # ~0.7 s: several progress lines
    done = explorer("download", "gpt2", env=env)
    assert done.returncode == 0, done.stderr
    size = len(files["model.safetensors"]) / 1e6
    assert f"of {size:,.1f} MB (100%)" in done.stderr  # bytes of the total
    assert "MB/s" in done.stderr and "left" in done.stderr  # speed and time left
    shares = [line for line in done.stderr.splitlines() if "%)" in line]
    assert len(shares) >= 3  # a line per tenth when stderr is not a terminal
    assert "every weights file matches the Hub's sha256" in done.stderr
    folder = done.stdout.strip()
    assert folder.startswith(str(tmp_path / "cache")) and os.path.isfile(f"{folder}/model.safetensors")
    again = explorer("download", "gpt2", env=env)
    assert again.returncode == 0 and "already complete" in again.stderr
    info = explorer("info", env=dict(env, HF_ENDPOINT="http://127.0.0.1:9", HF_HUB_OFFLINE="1"))
    assert info.returncode == 0, info.stderr
    assert f"model: {REPO} from the Hugging Face cache" in info.stdout
    assert "emb_dim         64" in info.stdout


def test_ctrl_c_keeps_a_partial_download_that_the_next_run_resumes(env, server, files, tmp_path):
    server.state.bytes_per_second = 4e6  # ~3 s for the file
    # Ctrl+C in a terminal: the suite may itself run as a background job, whose children
    # start with SIGINT ignored, so the child's SIGINT is set back to its default first
    proc = subprocess.Popen([sys.executable, "-m", "explorer", "download", "gpt2"], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    deadline = time.monotonic() + 60
    while server.state.served < 3_000_000 and time.monotonic() < deadline:
        time.sleep(0.02)
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    assert "interrupted:" in err and "run the same command again to resume" in err
    assert "Traceback" not in err
    partial = list((tmp_path / "cache").rglob("*.incomplete"))
    assert len(partial) == 1
    kept = partial[0].stat().st_size
    assert 2_000_000 < kept < len(files["model.safetensors"])
    server.state.bytes_per_second = None
    resumed = explorer("download", "gpt2", env=env)
    assert resumed.returncode == 0, resumed.stderr
    assert f"resuming after {kept / 1e6:,.1f} MB" in resumed.stderr
    assert server.cdn_ranges()[-1] == f"bytes={kept}-"
    assert not list((tmp_path / "cache").rglob("*.incomplete"))


@pytest.mark.parametrize("name, endpoint, message", [
    ("gpt2", "http://127.0.0.1:9", "cannot reach the Hugging Face Hub at http://127.0.0.1:9"),
    ("gpt2", "http://127.0.0.1:9", "without the Hub, open a GPT-2 folder you already have (the "
                                   "book's gpt2/124M, a Hugging Face folder, a .pth file) or train "
                                   "a small model here (gpt-explorer --checkpoint gpt2/124M, or "
                                   "gpt-explorer train)"),
    ("someone/missing", None, "repository someone/missing not found"),
    ("gpt-9", None, "neither a GPT-2 size"),
])
def test_failures_exit_2_with_one_line(env, name, endpoint, message):
    if endpoint:
        env = dict(env, HF_ENDPOINT=endpoint)
    failed = explorer("download", name, env=env)
    assert failed.returncode == 2
    lines = [line for line in failed.stderr.splitlines() if "error:" in line]
    assert len(lines) == 1 and message in lines[0] and "Traceback" not in failed.stderr


def test_a_full_disk_exits_2_and_keeps_what_it_wrote(env, tmp_path):
    def small_files():  # the kernel refuses writes past 1 MB, as a full disk would
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (1_000_000, 1_000_000))

    failed = explorer("download", "gpt2", env=env, preexec_fn=small_files)
    assert failed.returncode == 2, failed.stderr
    assert "no room to write" in failed.stderr and "Traceback" not in failed.stderr
    assert [p.stat().st_size for p in (tmp_path / "cache").rglob("*.incomplete")] == [1_000_000]


@pytest.mark.parametrize("value", ["1e308", "ten", "-5"])
def test_a_hub_timeout_it_cannot_read_is_named(env, value):
    """huggingface_hub reads HF_HUB_DOWNLOAD_TIMEOUT with int() when imported and says only
    'invalid literal'; the explorer names the variable first, and nothing is fetched."""
    failed = explorer("download", "gpt2", env=dict(env, HF_HUB_DOWNLOAD_TIMEOUT=value))
    assert failed.returncode == 2
    assert (f"error: HF_HUB_DOWNLOAD_TIMEOUT='{value}' is not a whole number of seconds"
            in failed.stderr) and "Traceback" not in failed.stderr


@pytest.mark.parametrize("value", ["::::", "http://[::1", "http://hub:port", "ftp://hub"])
def test_a_hub_address_that_is_not_one_is_named_without_a_traceback(env, value):
    failed = explorer("download", "gpt2", env=dict(env, HF_ENDPOINT=value))
    assert failed.returncode == 2 and "Traceback" not in failed.stderr
    assert f"error: HF_ENDPOINT='{value}' is not an http(s) address" in failed.stderr
