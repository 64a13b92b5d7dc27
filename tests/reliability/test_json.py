"""One JSON reader for everything the explorer reads (config.json, hparams.json, shard
indexes, training states, interventions, the state folder's files): kind and size first,
a bounded depth, finite floats and bounded whole numbers, then each file's own schema."""

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from explorer.core.gpt.config import preset
from explorer.core.experiments.interventions import load_file

ROOT = Path(__file__).resolve().parents[2]


def test_nothing_else_parses_json_from_a_file():
    """json.load/json.loads only in core/validate.py: every file goes through its rules."""
    calls = []
    for path in (ROOT / "explorer").rglob("*.py"):
        text = path.read_text(encoding="utf-8")
        if re.search(r"\bjson\.loads?\(", text) and path.name != "validate.py":
            calls.append(str(path.relative_to(ROOT)))
    assert calls == []


@pytest.mark.parametrize("text, said", [
    ("[" * 100_000 + "]" * 100_000, "nested more than 64 levels"),
    ('{"interventions": [{"kind": "scale", "node": "trf_blocks.0.att", "k": %s}]}' % ("9" * 400),
     "a whole number of 400 digits"),
    ('{"interventions": [{"kind": "scale", "node": "trf_blocks.0.att", "k": 1e999}]}',
     "beyond a float's range"),
    ('{"interventions": [%s]}' % ",".join(['{"kind": "zero", "node": "trf_blocks.0.att"}'] * 20_000),
     "20,000 interventions; at most 256"),
])
def test_hostile_intervention_files_end_in_one_line(tmp_path, text, said):
    path = tmp_path / "iv.json"
    path.write_text(text)
    with pytest.raises(ValueError, match=re.escape(said)):
        load_file(path, preset("tiny"))


@pytest.mark.slow
def test_a_fifo_or_a_nested_file_in_the_state_folder_is_set_aside_and_the_app_goes_on(tmp_path):
    state = tmp_path / "state"
    state.mkdir()
    os.mkfifo(state / "default-model.json")
    (state / "verified.json").write_text("[" * 50_000 + "]" * 50_000)
    env = {**os.environ, "GPT_EXPLORER_STATE_DIR": str(state), "QT_QPA_PLATFORM": "offscreen",
           "HF_HUB_OFFLINE": "1", "HF_HOME": str(tmp_path / "hf")}
    done = subprocess.run([sys.executable, "-m", "explorer", "info"], env=env,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr and "RecursionError" not in done.stderr
    names = sorted(p.name for p in state.iterdir())
    assert "default-model.json.bad" in names and "default-model.json" not in names
    from explorer.core.base import state as state_module
    os.environ["GPT_EXPLORER_STATE_DIR"] = str(state)
    try:
        assert state_module.was_verified(__file__, "0" * 64) is False  # the nested one: set aside
        assert "verified.json.bad" in {p.name for p in state.iterdir()}
    finally:
        del os.environ["GPT_EXPLORER_STATE_DIR"]
