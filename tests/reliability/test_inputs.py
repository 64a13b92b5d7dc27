"""One regression test per kind of bad setting, number or side file: each ends in a
clear line (exit 2 on the command line), never a traceback, a hang or a wrong answer."""

import json
import math
import os

import numpy as np
import pytest
import torch

from explorer.cli import main
from explorer.core.run.batch import split_prompts
from explorer.core.gpt.config import preset
from explorer.core.experiments.divergence import find_divergence
from explorer.core.gpt.build import build_model
from explorer.core.experiments.training import Trainer, TrainSettings


def run(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


@pytest.mark.parametrize("argv, message", [
    (["generate", "Hi", "--preset", "tiny", "--temperature", "1e-40"], "temperature must be a finite number in [0.01, 100]"),
    (["generate", "Hi", "--preset", "tiny", "--temperature", "inf"], "temperature must be a finite number"),
    (["generate", "Hi", "--preset", "tiny", "--show-top", "-3"], "--show-top must be between 0"),
    (["generate", "Hi", "--preset", "tiny", "--top-p", "nan"], "top-p must be a finite number"),
    (["generate", "Hi", "--preset", "tiny", "--max-new-tokens", "0"], "max new tokens must be between 1"),
    (["compare-ln", "Hi", "--preset", "tiny", "--depths", "100000"], "depths must be between 1 and 96"),
    (["diff", "Hi", "--a", "preset:tiny", "--b", "mutation:relu", "--tol", "nan"], "--tol must be a finite number"),
    (["diff", "Hi", "--a", "preset:tiny", "--b", "preset:"], "preset: needs a name"),
    (["diff", "Hi", "--a", "preset:tiny", "--b", "preset:gpt5"], "unknown preset 'gpt5'"),
    (["diff", "Hi", "--a", "preset:tiny", "--b", "mutation:nothing"], "unknown mutation 'nothing'"),
    (["train", "--minutes", "nan", "--preset", "tiny"], "minutes (--minutes) must be a finite number"),
    (["train", "--lr", "1e30", "--preset", "tiny"], "the learning rate (--lr) must be a finite number in (0, 10]"),
    (["train", "--batch-size", "0", "--preset", "tiny"], "batch size must be between 1 and 4,096"),
])
def test_out_of_range_numbers_on_the_command_line(capsys, argv, message):
    code, _, err = run(capsys, *argv)
    assert code == 2 and message in err and "Traceback" not in err


def test_a_small_learning_rate_needs_no_hidden_option(capsys, tmp_path):
    code, _, err = run(capsys, "train", "--lr", "5e-5", "--steps", "1", "--preset", "tiny", "--batch-size", "2",
                       "--out", str(tmp_path / "run"))
    assert code == 0, err
    assert json.loads((tmp_path / "run" / "trainer.json").read_text())["settings"]["min_lr"] == 5e-5


def test_a_diverging_training_run_stops_and_says_why(tmp_path):
    text = open(os.path.join(os.path.dirname(__file__), "..", "..", "resources",
                             "the-verdict.txt"), encoding="utf-8").read()
    trainer = Trainer(text, TrainSettings(preset="tiny", max_steps=20, batch_size=2,
                                          eval_every=100), tmp_path)
    with torch.no_grad():  # as a far too high learning rate leaves it
        trainer.model.trf_blocks[0].ff.layers[0].weight[0, 0] = float("inf")
    with pytest.raises(ValueError, match="the loss became nan at step 1: training diverged"):
        for _ in trainer.run():
            pass
    assert not (tmp_path / "model.safetensors").exists()  # nothing broken was saved


def test_training_files_that_are_not_what_they_should_be(capsys, tmp_path):
    fifo = tmp_path / "text.txt"
    os.mkfifo(fifo)
    code, _, err = run(capsys, "train", "--text", str(fifo), "--preset", "tiny")
    assert code == 2 and "a FIFO (named pipe), not a regular file" in err
    a_file = tmp_path / "out"
    a_file.write_text("x")
    code, _, err = run(capsys, "train", "--out", str(a_file), "--preset", "tiny", "--steps", "1")
    assert code == 2 and "a file, not a folder for checkpoints" in err
    run_dir = tmp_path / "run"
    assert run(capsys, "train", "--steps", "1", "--preset", "tiny", "--batch-size", "2", "--out", str(run_dir))[0] == 0
    state = json.loads((run_dir / "trainer.json").read_text())
    for broken, message in (([1, 2], "a JSON object, not list"),
                            ({"step": 1}, "lacks history, settings"),
                            (dict(state, step=-5), "its step must be between 0"),
                            (dict(state, step="3"), "its step must be a whole number"),
                            (dict(state, settings=dict(state["settings"], nope=1)), "unknown training settings ('nope')"),
                            (dict(state, settings=dict(state["settings"], **{"\n": 1})),
                             "unknown training settings ('\\n')")):
        (run_dir / "trainer.json").write_text(json.dumps(broken))
        code, _, err = run(capsys, "train", "--resume", "--out", str(run_dir), "--steps", "2")
        assert code == 2 and message in err and err.count("error:") == 1, err
        assert "\n" not in err.split("error:")[1].strip(), err
    (run_dir / "trainer.json").write_text(json.dumps(state))
    (run_dir / "optimizer.pt").write_bytes(b"PK\x03\x04 not a zip")
    code, _, err = run(capsys, "train", "--resume", "--out", str(run_dir), "--steps", "2")
    assert code == 2 and "optimizer.pt: corrupt optimizer state" in err and len(err.splitlines()) <= 3


def test_inspect_says_the_file_it_wrote(capsys, tmp_path):
    code, _, err = run(capsys, "inspect", "Hi", "--preset", "tiny", "--layer", "0", "--save",
                       str(tmp_path / "caps"))
    assert code == 0 and f"to {tmp_path / 'caps.npz'}" in err and (tmp_path / "caps.npz").is_file()


def test_the_divergence_finder_never_calls_nan_equal():
    model = build_model(preset("tiny"), seed=0)
    broken = build_model(preset("tiny"), seed=0)
    with torch.no_grad():
        broken.trf_blocks[1].norm1.scale[0] = float("nan")
    result = find_divergence(model, broken, [1, 2, 3], tolerance=1e-4)
    assert result.first == "trf_blocks.1.norm1" and math.isinf(result.rows[
        [r.name for r in result.rows].index("trf_blocks.1.norm1")].max_abs)
    with pytest.raises(ValueError, match="tolerance must be a finite number"):
        find_divergence(model, model, [1, 2], tolerance=float("nan"))


def test_batch_lines_end_at_newlines_only():
    assert split_prompts("one\x0cstill one\u2028and still\r\n\n  \ntwo") == [
        "one\x0cstill one\u2028and still", "two"]


def test_an_unexpected_error_is_one_line_with_the_log(capsys, monkeypatch, tmp_path):
    from explorer.cli import text
    monkeypatch.setenv("GPT_EXPLORER_LOG_DIR", str(tmp_path))
    monkeypatch.setattr(text, "tokenize", lambda args: {}["boom"])  # a bug, not a bad input
    parser_main = main
    code = parser_main(["tokenize", "x"])
    err = capsys.readouterr().err
    assert code == 1 and "unexpected error: KeyError: 'boom'" in err
    assert f"the details are in {tmp_path / 'explorer.log'}" in err
    assert "Traceback" in (tmp_path / "explorer.log").read_text()


def test_a_pass_that_would_not_fit_is_refused_before_it_runs(monkeypatch):
    from explorer.core.base import devices
    from explorer.core.run.batch import make_batch
    from explorer.core.run.passes import run_prompt
    model = build_model(preset("tiny"), seed=0)
    monkeypatch.setattr(devices, "free_memory_bytes", lambda device: 50 * 2**20)
    batch = make_batch(["word " * 60] * 16, model.cfg.context_length)
    with pytest.raises(MemoryError, match="a pass of 16 × 61 tokens with capture needs about"):
        run_prompt(model, batch)
    np.testing.assert_equal(run_prompt(model, [1, 2]).ids, [1, 2])  # a small one still runs


def test_a_training_step_that_would_not_fit_is_refused_before_the_model_is_built(monkeypatch):
    from explorer.core.base import devices
    from explorer.core.experiments import training
    monkeypatch.setattr(devices, "free_memory_bytes", lambda device: 8 * 2**30)
    built = []
    monkeypatch.setattr(training, "build_model", lambda *a, **k: built.append(1))
    with pytest.raises(MemoryError, match="training gpt2-small with batch size 4096 needs about"):
        Trainer("Every effort moves you. " * 4000, TrainSettings(preset="gpt2-small", batch_size=4096))
    assert not built

