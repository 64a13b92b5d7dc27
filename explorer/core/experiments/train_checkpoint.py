"""A training checkpoint written whole or not at all, and read back only when its files
are of one step.

Writing: the model, the optimizer's state and trainer.json go to ``NAME.part`` files
first, each flushed to the disk; only when all three are complete are they renamed over
the earlier checkpoint, trainer.json last. A failed write (a full disk, a quota) removes
the parts and leaves the earlier checkpoint as it was, with one line that says so.

Reading: a process killed between two renames leaves the model of the new step beside
the parts of the others; the parts are complete (every rename waits for every write), so
the next resume finishes the renames. Parts without that sign (a write that never
finished) are removed. Then the three files must name one step: the model's metadata
``train_step``, trainer.json's ``step`` and the optimizer's own step count."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import torch

from ..base.validate import FileKind, file_kind
from .train_files import MODEL_FILE, OPTIMIZER_FILE, STATE_FILE

PART = ".part"
ORDER = (MODEL_FILE, OPTIMIZER_FILE, STATE_FILE)  # written and renamed in this order


def _part(folder: Path, name: str) -> Path:
    return folder / (name + PART)


def write_checkpoint(folder: Path, model, optimizer_state: dict, state: dict) -> Path:
    """The three files of step ``state["step"]`` in ``folder``, whole or not at all."""
    from ..weights.checkpoints import save_checkpoint
    step = state["step"]
    discard_parts(folder)
    try:
        folder.mkdir(parents=True, exist_ok=True)
        save_checkpoint(model, _part(folder, MODEL_FILE), trained=step > 0,
                        metadata={"train_step": str(step)})
        _synced(_part(folder, MODEL_FILE))
        with open(_part(folder, OPTIMIZER_FILE), "wb") as fh:
            torch.save(optimizer_state, fh)
            fh.flush()
            os.fsync(fh.fileno())
        write_state(_part(folder, STATE_FILE), state)
    except Exception as exc:  # a full disk speaks OSError, torch's RuntimeError, safetensors' own
        discard_parts(folder)
        raise ValueError(f"{folder}: the checkpoint of step {step:,} could not be written "
                         f"({disk_problem(exc)}); the earlier checkpoint is kept as it was") from None
    commit(folder)
    return folder / MODEL_FILE


def write_state(path: Path, state: dict) -> None:
    """trainer.json's text, flushed to the disk."""
    with open(path, "w", encoding="utf-8") as fh:
        fh.write(json.dumps(state, indent=1))
        fh.flush()
        os.fsync(fh.fileno())


def _synced(path: Path) -> None:
    with open(path, "rb+") as fh:
        os.fsync(fh.fileno())


def commit(folder: Path) -> None:
    """Rename the parts over the checkpoint, trainer.json last."""
    for name in ORDER:
        if file_kind(_part(folder, name)) == FileKind.FILE:
            os.replace(_part(folder, name), folder / name)
    try:  # the renames themselves on the disk (not every system lets a folder be synced)
        fd = os.open(folder, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
    except OSError:
        pass


def discard_parts(folder: Path) -> None:
    """Remove what a write that did not finish left (its parts, a model's own part),
    trainer.json's first: a removal cut short never leaves the sign of a finished write."""
    for name in reversed(ORDER):
        for leftover in (_part(folder, name), folder / (name + PART + PART)):
            if file_kind(leftover) == FileKind.FILE:
                leftover.unlink()


def recover(folder: Path) -> str | None:
    """Finish a checkpoint whose renames were cut short (the model renamed, trainer.json's
    part still there); remove the parts of a write that never finished. What was done, in
    words, or None."""
    model_part, state_part = _part(folder, MODEL_FILE), _part(folder, STATE_FILE)
    if file_kind(state_part) == FileKind.FILE and file_kind(model_part) == FileKind.MISSING:
        commit(folder)
        return "a checkpoint cut short while its files were renamed was completed"
    if any(file_kind(_part(folder, n)) == FileKind.FILE for n in ORDER):
        discard_parts(folder)
        return "the parts of a checkpoint that was never finished were removed"
    return None


def check_one_step(folder: Path, step: int, model_step: int | None, optimizer: dict) -> None:
    """The model's, the optimizer's and trainer.json's steps are one: else the files are
    of different checkpoints (mixed by hand or by an earlier explorer's interrupted
    write), and training on would mix them."""
    counts = sorted({int(entry["step"]) for entry in optimizer.get("state", {}).values()
                     if isinstance(entry, dict) and "step" in entry})  # none before a step
    found = {MODEL_FILE: model_step, OPTIMIZER_FILE: counts[0] if len(counts) == 1 else None,
             STATE_FILE: step}
    if len(counts) > 1 or any(v is not None and v != step for v in found.values()):
        said = ", ".join(f"{name} step {v:,}" if v is not None else f"{name} of mixed steps"
                         for name, v in found.items()
                         if v is not None or (name == OPTIMIZER_FILE and len(counts) > 1))
        raise ValueError(f"{folder}: its files are of different steps ({said}): they are not "
                         "one checkpoint, and resuming would mix them; train a new run "
                         "(another --out) or put back the files of one step")


def model_step(path: Path) -> int | None:
    """The ``train_step`` in a checkpoint's metadata (None when it has none)."""
    from ..weights.hf_files import safetensors_header
    header, _ = safetensors_header(path)
    value = (header.get("__metadata__") or {}).get("train_step")
    return int(value) if isinstance(value, str) and re.fullmatch(r"[0-9]{1,12}", value) else None


def disk_problem(exc: BaseException) -> str:
    """What went wrong in a write, in words: the system's for an OSError or an error
    number inside another library's message ("code: 28": No space left on device), else
    the message's first line."""
    if isinstance(exc, OSError) and exc.errno:
        return exc.strerror or str(exc)
    code = re.search(r"(?:code|errno)[:=]?\s*(\d+)", str(exc), re.IGNORECASE)
    if code:
        return os.strerror(int(code[1]))
    first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    first = re.sub(r"^\[enforce fail at [^\]]*\]\s*\.?\s*", "", first)  # torch's C++ source line
    return f"the write stopped part-way: {first[:120]}; is the disk full?"
