"""The README's set-up commands pass their arguments on as documented."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow  # the whole module: ./test.sh -m "not slow" leaves it out

ROOT = Path(__file__).resolve().parents[1]


def test_start_sh_passes_its_arguments_to_the_explorer():
    env = dict(os.environ, EXPLORER_VENV=sys.prefix)  # the environment these tests run in
    done = subprocess.run([str(ROOT / "start.sh"), "--version"], env=env, capture_output=True,
                          text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[-1].startswith("gpt-explorer ") and "ERROR" not in done.stderr
    # no extras made of the arguments: installed as it is (or found installed with its
    # pyproject.toml unchanged)
    assert "==> installing gpt-block-explorer" in lines or \
        "==> gpt-block-explorer is installed" in lines, lines
