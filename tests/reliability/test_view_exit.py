"""Every view alone (``gpt-explorer view KEY --screenshot``) is torn down in an order Qt
survives: its process exits 0, not with a segmentation fault after its picture is saved
(a view's plots deleted after their scene at the interpreter's exit). Each view runs in
processes of its own, several times, as the fault came in about half of the runs."""

import os
import subprocess
import sys

import pytest

pytestmark = pytest.mark.slow

from explorer.ui.views.registry import VIEWS

RUNS = 3


def _exits(tmp_path, key: str, preset: str) -> list[int]:
    env = dict(os.environ, QT_QPA_PLATFORM="offscreen")
    codes = []
    for run in range(RUNS):
        out = tmp_path / f"{key}-{run}.png"
        done = subprocess.run([sys.executable, "-m", "explorer", "view", key, "--preset", preset,
                               "--prompt", "Every effort moves you", "--screenshot", str(out)],
                              env=env, capture_output=True, text=True, timeout=300)
        codes.append(done.returncode)
        assert done.returncode != 0 or out.stat().st_size > 1000, done.stderr
    return codes


@pytest.mark.parametrize("key", [spec.key for spec in VIEWS])
def test_every_view_alone_exits_cleanly_every_time(tmp_path, key):
    assert _exits(tmp_path, key, "tiny") == [0] * RUNS


def test_the_heads_view_of_a_rotary_block_exits_cleanly_every_time(tmp_path):
    assert _exits(tmp_path, "heads", "llama-tiny") == [0] * RUNS
