"""A training checkpoint is written whole or not at all: a full disk at any of its files
leaves the earlier checkpoint byte for byte, a kill between its renames is finished on
resume, and files of different steps are refused rather than trained on together."""

import os
import resource
import signal
from contextlib import contextmanager

import pytest
import torch

from explorer.core.experiments import train_checkpoint
from explorer.core.experiments.snapshots import write_snapshot
from explorer.core.experiments.train_checkpoint import model_step
from explorer.core.experiments.training import StepEvent, Trainer
from explorer.core.weights.checkpoints import load_checkpoint
from tests.core.experiments.test_training import TEXT, fast

pytestmark = pytest.mark.slow  # trains the tiny model

FILES = ("model.safetensors", "optimizer.pt", "trainer.json")


@contextmanager
def disk_full_past(nbytes: int):
    """Every file this process writes stops at ``nbytes``, as on a full disk (the kernel
    answers the write that goes past with EFBIG)."""
    old = signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
    resource.setrlimit(resource.RLIMIT_FSIZE, (nbytes, hard))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))
        signal.signal(signal.SIGXFSZ, old)


def trained_to(folder, step: int, saved_at: int) -> Trainer:
    """A run saved at ``saved_at`` and trained on, in memory, to ``step``."""
    list(Trainer(TEXT, fast(max_steps=saved_at, eval_every=saved_at, snapshots=0), folder).run())
    trainer = Trainer.resume(folder, TEXT, max_steps=step + 10)
    if step == saved_at:
        return trainer
    for event in trainer.run():
        if isinstance(event, StepEvent) and event.step == step:
            return trainer


def contents(folder) -> dict[str, bytes]:
    return {name: (folder / name).read_bytes() for name in FILES}


@pytest.mark.parametrize("where", ["model", "optimizer", "trainer.json"])
def test_a_full_disk_at_any_file_keeps_the_earlier_checkpoint_byte_for_byte(tmp_path, where, monkeypatch):
    tmp_path = tmp_path / "run"
    trainer = trained_to(tmp_path, 3, saved_at=2)
    before = contents(tmp_path)
    model_bytes = len(before["model.safetensors"])
    if where == "trainer.json":  # the last and smallest file: the disk fills as it is written
        def full(path, state):
            raise OSError(28, os.strerror(28))
        monkeypatch.setattr(train_checkpoint, "write_state", full)
        limit = None
    else:  # the model does not fit, or the model fits and the optimizer (twice its size) not
        limit = model_bytes // 3 if where == "model" else model_bytes + model_bytes // 2
    with pytest.raises(ValueError) as caught, disk_full_past(limit or 2**62):
        trainer.save()
    said = str(caught.value)
    assert "the checkpoint of step 3 could not be written" in said and "\n" not in said
    assert {"model": "File too large", "optimizer": "the write stopped part-way",
            "trainer.json": "No space left on device"}[where] in said
    assert "the earlier checkpoint is kept as it was" in said
    assert contents(tmp_path) == before  # every file of step 2, unchanged
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(FILES)  # no part left
    assert Trainer.resume(tmp_path, TEXT).state.step == 2


def test_a_kill_between_the_renames_is_finished_when_the_run_resumes(tmp_path, monkeypatch):
    """The process dies after the model of step 3 is renamed into place, before the
    optimizer's and trainer.json's: resuming finishes the renames and goes on at step 3
    with the weights and optimizer of step 3."""
    tmp_path = tmp_path / "run"
    trainer = trained_to(tmp_path, 3, saved_at=2)
    weights = {k: v.clone() for k, v in trainer.model.state_dict().items()}
    renames, replace = [], os.replace

    def killed_after_one(src, dst):
        if os.path.basename(dst) in FILES:  # the checkpoint's renames, not a file's own
            if renames:
                raise KeyboardInterrupt  # as far as the files know, the process is gone
            renames.append(dst)
        replace(src, dst)
    monkeypatch.setattr(train_checkpoint.os, "replace", killed_after_one)
    with pytest.raises(KeyboardInterrupt):
        trainer.save()
    monkeypatch.undo()
    assert model_step(tmp_path / "model.safetensors") == 3
    assert (tmp_path / "trainer.json.part").is_file() and (tmp_path / "optimizer.pt.part").is_file()
    resumed = Trainer.resume(tmp_path, TEXT, max_steps=5)
    assert resumed.state.step == 3 and "completed" in resumed.recovered
    for name, value in resumed.model.state_dict().items():
        assert torch.equal(value, weights[name]), name
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(FILES)


def test_files_of_different_steps_are_refused_naming_each_step(tmp_path):
    trained_to(tmp_path / "a", 2, saved_at=2)
    trained_to(tmp_path / "b", 4, saved_at=4)
    (tmp_path / "a" / "model.safetensors").write_bytes((tmp_path / "b" / "model.safetensors").read_bytes())
    with pytest.raises(ValueError) as caught:
        Trainer.resume(tmp_path / "a", TEXT)
    said = str(caught.value)
    assert "its files are of different steps (model.safetensors step 4, optimizer.pt step 2, " \
           "trainer.json step 2)" in said and "\n" not in said


def test_the_parts_of_a_write_that_never_finished_are_removed(tmp_path):
    tmp_path = tmp_path / "run"
    trained_to(tmp_path, 2, saved_at=2)
    (tmp_path / "model.safetensors.part").write_bytes(b"\0" * 100)  # cut while writing
    (tmp_path / "optimizer.pt.part").write_bytes(b"PK\3\4")
    resumed = Trainer.resume(tmp_path, TEXT)
    assert resumed.state.step == 2 and "never finished were removed" in resumed.recovered
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(FILES)


def test_a_snapshot_on_a_full_disk_is_one_line_and_leaves_no_part(tmp_path):
    model = load_checkpoint(trained_to(tmp_path, 2, saved_at=2).save()).model
    with pytest.raises(ValueError) as caught, disk_full_past(100_000):
        write_snapshot(model, tmp_path, 7)
    said = str(caught.value)
    assert "the snapshot of step 7 could not be written" in said and "\n" not in said
    assert "File too large" in said or "No space left" in said
    assert list((tmp_path / "snapshots").iterdir()) == []
