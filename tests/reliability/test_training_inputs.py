"""Training's inputs at their boundaries: a text too large to read, runs the tokenizer's
regex cannot take in one piece, a checkpoint folder that cannot be written, and resume
files whose parts do not belong together."""

import json

import pytest
import torch

from explorer.cli import main
from explorer.core.gpt.tokenizer import encode
from explorer.core.experiments.train_text import CHUNK_CHARS, default_text, tokens_of

pytestmark = pytest.mark.slow  # the whole module: ./test.sh -m "not slow" leaves it out


def run(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_a_text_too_large_is_refused_before_a_byte_is_read(capsys, tmp_path):
    huge = tmp_path / "huge.txt"
    with open(huge, "wb") as fh:  # sparse: 3 GB that take no disk
        fh.truncate(3 * 1024**3)
    code, _, err = run(capsys, "train", "--text", str(huge), "--preset", "tiny",
                       "--out", str(tmp_path / "run"))
    assert code == 2 and "3,221 MB of text; training reads at most 268 MB" in err
    assert len(err.strip().splitlines()) == 1


def test_long_texts_are_tokenized_a_piece_at_a_time_as_the_whole_would_be():
    text = default_text()
    assert tokens_of(text).tolist() == encode(text)  # one piece: exactly the book's ids
    long = text * 8
    assert len(long) > 2 * CHUNK_CHARS and tokens_of(long).tolist() == encode(long)
    spaces = tokens_of(" " * 3_000_000)  # one piece of it makes the regex fail
    assert spaces.dtype == torch.long and spaces.shape == (3_000_000,)
    with pytest.raises(ValueError, match="Regex error"):
        encode(" " * 3_000_000)
    assert tokens_of("").shape == (0,)


@pytest.mark.parametrize("where", ["/proc/no/such/run", "/sys/kernel/run"])
def test_a_checkpoint_folder_that_cannot_be_written_is_refused_first(capsys, where):
    code, _, err = run(capsys, "train", "--preset", "tiny", "--steps", "1", "--out", where)
    assert code == 2 and f"{where}: checkpoints cannot be written there" in err
    assert "Traceback" not in err and "training tiny" not in err  # before any training


@pytest.fixture
def a_run(capsys, tmp_path):
    folder = tmp_path / "run"
    assert run(capsys, "train", "--steps", "2", "--eval-every", "1", "--preset", "tiny", "--batch-size", "2",
               "--out", str(folder))[0] == 0
    return folder, json.loads((folder / "trainer.json").read_text())


def resume(capsys, folder, *more):
    return run(capsys, "train", "--resume", "--out", str(folder), *more)


def test_a_resume_file_whose_parts_do_not_belong_together_is_named(capsys, a_run):
    folder, state = a_run
    assert len(state["history"]) == 3 and state["step"] == 2
    for broken, message in (
            (dict(state, history=[{"step": "1"}]), "history entry 1 is not an evaluation"),
            (dict(state, history=state["history"] + [dict(state["history"][0], step=9)]),
             "history entry 4 is not an evaluation of this run"),
            (dict(state, history=[7] * 3), "history entry 1 is not an evaluation"),
            (dict(state, step=1_000_000_000), "says step 1,000,000,000, past the run's own end "
                                              "at 2 steps"),
            (dict(state, settings=dict(state["settings"], eval_batches=10_000)),
             "eval batches must be between 1 and 100"),
            (dict(state, settings=dict(state["settings"], preset="mini")),
             "names the preset 'mini' (4 blocks, 192 wide), but model.safetensors beside it has "
             "2 blocks, 32 wide")):
        (folder / "trainer.json").write_text(json.dumps(broken))
        code, _, err = resume(capsys, folder, "--steps", "4")
        assert code == 2 and message in err, err
        assert len(err.strip().splitlines()) == 1, err


def test_an_optimizer_state_of_other_shapes_is_named(capsys, a_run):
    folder, _ = a_run
    saved = torch.load(folder / "optimizer.pt", weights_only=True)
    shape = tuple(saved["state"][0]["exp_avg"].shape)
    saved["state"][0]["exp_avg"] = torch.zeros(3, 5)
    torch.save(saved, folder / "optimizer.pt")
    code, _, err = resume(capsys, folder, "--steps", "4")
    assert code == 2 and f"exp_avg of parameter 0 is (3, 5), the model's parameter is {shape}" in err
    saved["state"][0]["exp_avg"] = torch.full(shape, float("nan"))
    torch.save(saved, folder / "optimizer.pt")
    assert "exp_avg of parameter 0 is not finite" in resume(capsys, folder, "--steps", "4")[2]
    saved["param_groups"][0]["params"] = saved["param_groups"][0]["params"][:-1]
    torch.save(saved, folder / "optimizer.pt")
    code, _, err = resume(capsys, folder, "--steps", "4")
    assert code == 2 and "the files are of different runs" in err


def test_a_finished_run_asked_for_nothing_more_says_so(capsys, a_run):
    folder, state = a_run
    code, _, err = resume(capsys, folder)
    assert code == 0 and "is finished at step 2 of 2: nothing to do; ask for more with --steps" in err
    assert json.loads((folder / "trainer.json").read_text()) == state  # untouched
    code, _, err = resume(capsys, folder, "--steps", "3")
    assert code == 0 and "resuming" in err and json.loads((folder / "trainer.json").read_text())["step"] == 3


def test_resume_with_another_preset_is_refused_naming_the_runs_own(tmp_path, capsys):
    """train --resume --preset qwen3-tiny on a llama-tiny run: one line naming the run's
    preset, not a silent resume of llama-tiny; --resume alone, or with its own preset,
    goes on."""
    from explorer.cli import main
    out = tmp_path / "run"
    assert main(["train", "--preset", "llama-tiny", "--steps", "2", "--batch-size", "2",
                 "--out", str(out)]) == 0
    capsys.readouterr()
    assert main(["train", "--resume", "--preset", "qwen3-tiny", "--steps", "3",
                 "--batch-size", "2", "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and f"--preset qwen3-tiny with --resume: the run in {out} trains " \
        "llama-tiny, and a run keeps its model" in err[0]
    assert main(["train", "--resume", "--preset", "llama-tiny", "--steps", "3",
                 "--batch-size", "2", "--out", str(out)]) == 0


def test_a_second_training_into_a_folder_being_written_is_refused(tmp_path, capsys):
    """While one training writes a run's folder, a second one into it (the CLI, or the
    window's Train tab: both run Trainer.run) is refused in one line naming the first's
    process; once the first has ended the folder is free again."""
    import os
    from explorer.cli import main
    from explorer.core.experiments.training import Trainer, TrainSettings, default_text
    out = tmp_path / "run"
    first = Trainer(default_text(), TrainSettings(preset="tiny", max_steps=4, batch_size=2), out)
    running = first.run()
    next(running)  # the first step: the folder is held
    second = Trainer(default_text(), TrainSettings(preset="tiny", max_steps=4, batch_size=2), out)
    with pytest.raises(ValueError, match=f"another training is writing this run \\(process "
                                         f"{os.getpid()}\\); wait for it to end"):
        next(second.run())
    capsys.readouterr()
    assert main(["train", "--preset", "tiny", "--steps", "2", "--batch-size", "2", "--out",
                 str(tmp_path / "run")]) == 2
    err = [line for line in capsys.readouterr().err.splitlines() if "error" in line]
    assert len(err) == 1 and "another training is writing this run" in err[0]
    for _ in running:  # the first goes on to its end, alone
        pass
    assert first.state.step == 4
    assert main(["train", "--resume", "--steps", "6", "--batch-size", "2", "--out",
                 str(out)]) == 0


@pytest.mark.parametrize("preset, batch, room, said", [
    ("tiny", 8, 3, "a batch of 3 fits"),
    ("tiny", 8, 0, "its weights and AdamW's moments alone need"),
    ("llama3.2-1b", 1, None, "not even one row of its 131,072-token context fits: train a "
                             "preset of a shorter context (mini, llama-mini)"),
])
def test_a_training_that_does_not_fit_says_what_would(monkeypatch, capsys, tmp_path, preset,
                                                      batch, room, said):
    """Training refused for memory says what would fit: the largest batch, or why none
    does (the weights and AdamW's moments, or one row of a very long context) — not only
    the GiB a full batch would need."""
    from explorer.cli import main
    from explorer.core.base import devices
    from explorer.core.experiments.train_memory import training_bytes
    from explorer.core.gpt.config import preset as cfg_of
    cfg = cfg_of(preset).replace(tie_weights=True)
    free = (training_bytes(cfg, room) if room else training_bytes(cfg, 0) // 2) \
        if room is not None else 30 * 2**30
    monkeypatch.setattr(devices, "free_memory_bytes", lambda device: free)
    assert main(["train", "--preset", preset, "--steps", "1", "--batch-size", str(batch),
                 "--out", str(tmp_path / "run")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and said in err[0] and "GiB is available" in err[0]
