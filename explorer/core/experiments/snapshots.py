"""Snapshots of a model while it trains: at planned steps (denser at the start, where
most changes) the trainer writes a copy of the weights into its run folder, under
``snapshots/stepNNNNNN.safetensors``. Each is a checkpoint like any other; a run folder
and a step name one (``RUN_FOLDER@step150``), and ``list_snapshots`` finds them again when
the run is opened later."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from .train_files import (MODEL_FILE, SNAPSHOT_DIR, STATE_FILE, read_state, resume_state,
                          sibling_runs)

DEFAULT_SNAPSHOTS = 12
MAX_SNAPSHOTS = 1_000
AT_STEP = re.compile(r"^(?P<folder>.+)@step(?P<step>[0-9]{1,9})$")  # ASCII digits only
NAME = re.compile(r"^step([0-9]{6,9})\.safetensors$")


@dataclass(frozen=True)
class SnapshotEvent:
    """Training wrote a copy of the weights at ``step`` to ``path`` (a checkpoint)."""

    step: int
    path: str
    seconds: float = 0.0  # writing it took


@dataclass(frozen=True)
class Snapshot:
    step: int
    path: Path


def snapshot_plan(max_steps: int, count: int = DEFAULT_SNAPSHOTS) -> list[int]:
    """``count`` steps from 0 (the random start) to ``max_steps``, on a squared scale:
    step ``max_steps * (i / (count - 1))²``, so most fall early, where the weights change
    most. Fewer when steps are fewer than snapshots (each step once)."""
    if count <= 0 or max_steps <= 0:
        return []
    if count == 1:
        return [max_steps]
    return sorted({round(max_steps * (i / (count - 1)) ** 2) for i in range(count)})


class SnapshotSchedule:
    """When training takes its next snapshot: at the planned steps, or, for a run limited
    by time, at planned moments (the same squared spacing over its minutes) and at its
    last step."""

    def __init__(self, max_steps: int, count: int, minutes: float | None = None) -> None:
        self.minutes = minutes
        self.steps = set(snapshot_plan(max_steps, count)) if minutes is None else (
            {0} if count > 0 else set())
        self.times = [] if minutes is None or count < 2 else [
            60 * minutes * (i / (count - 1)) ** 2 for i in range(1, count)]
        self.taken: set[int] = set()

    def due(self, step: int, elapsed: float) -> bool:
        hit = step in self.steps
        while self.times and elapsed >= self.times[0]:
            self.times.pop(0)
            hit = True
        if hit and step not in self.taken:
            self.taken.add(step)
            return True
        return False

    def last(self, step: int) -> bool:
        """A run limited by time has ended at ``step``: its weights there, once."""
        if self.minutes is None or not self.steps or step in self.taken:
            return False
        self.taken.add(step)
        return True


def snapshot_path(folder: str | Path, step: int) -> Path:
    return Path(folder) / SNAPSHOT_DIR / f"step{step:06d}.safetensors"


def list_snapshots(folder: str | Path) -> list[Snapshot]:
    """The snapshots a run folder holds, by step (none when it has no such folder)."""
    where = Path(folder) / SNAPSHOT_DIR
    if not where.is_dir():
        return []
    found = []
    for path in where.iterdir():
        m = NAME.match(path.name)
        if m and path.is_file():
            found.append(Snapshot(int(m[1]), path))
    return sorted(found, key=lambda s: s.step)


def write_snapshot(model, folder: str | Path, step: int) -> SnapshotEvent:
    """The weights as they are now, written beside the run's checkpoints."""
    import time

    from ..weights.checkpoints import save_checkpoint
    path, t0 = snapshot_path(folder, step), time.perf_counter()
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        save_checkpoint(model, path, trained=step > 0, metadata={"train_step": str(step)})
    except Exception as exc:  # a full disk: OSError, or the safetensors library's own error
        from .train_checkpoint import disk_problem
        raise ValueError(f"{path}: the snapshot of step {step} could not be written "
                         f"({disk_problem(exc)})") from None
    return SnapshotEvent(step, str(path), time.perf_counter() - t0)


def clear_snapshots(folder: str | Path) -> None:
    """A new run in ``folder``: the snapshots an earlier run left there go (only files
    named as snapshots are removed)."""
    for snap in list_snapshots(folder):
        snap.path.unlink(missing_ok=True)


def snapshot_label(path: str | Path) -> str | None:
    """'snapshot at step 150 of runs/train' for a snapshot's file, else None."""
    p = Path(path)
    m = NAME.match(p.name)
    if m is None or p.parent.name != SNAPSHOT_DIR:
        return None
    return f"snapshot at step {int(m[1]):,} of {p.parent.parent}"


def run_history(folder: str | Path) -> list[dict]:
    """A run folder's evaluations (step, train_loss, val_loss, sample), checked as a
    resume checks them; none when the folder has no readable trainer.json."""
    from ..base.validate import read_json
    path = Path(folder) / STATE_FILE
    try:
        return resume_state(path, read_json(path))[1] if path.is_file() else []
    except (ValueError, OSError):
        return []  # a damaged or foreign file: the timeline shows its snapshots only


@dataclass(frozen=True)
class KeptRun:
    """A training run kept on disk, to draw beside another: its folder, the model it
    trained and its evaluations."""

    folder: Path
    preset: str
    step: int
    history: list[dict]

    @property
    def label(self) -> str:
        loss = f", validation {self.history[-1]['val_loss']:.2f}" if self.history else ""
        return f"{self.preset}, {self.step:,} steps{loss} ({self.folder.name})"


def kept_runs(folder: str | Path) -> list[KeptRun]:
    """The runs kept in ``folder`` and its numbered siblings (runs/train, runs/train-2,
    …; any of them names them all), each whose trainer.json reads; in the order of their
    folders' names."""
    folder = Path(folder)
    root = folder.with_name(re.sub(r"-\d+$", "", folder.name))
    out = []
    for path in sorted(sibling_runs(root), key=lambda p: (len(p.name), p.name)):
        try:
            step, history, settings = read_state(path / STATE_FILE)
        except (ValueError, OSError):
            continue  # a damaged or foreign file: not offered
        preset = settings.get("preset") if isinstance(settings.get("preset"), str) else "a model"
        out.append(KeptRun(path, preset[:40], step, history))
    return out


def trained_label(path: str | Path) -> str | None:
    """'trained here: mini, 200 steps, validation loss 5.83 (runs/train)' for the model of
    a training run's folder (its trainer.json beside it), else None."""
    p = Path(path)
    if p.is_dir() and (p / MODEL_FILE).is_file():  # the run's folder, opened as a folder
        p = p / MODEL_FILE
    if p.name != MODEL_FILE or not (p.parent / STATE_FILE).is_file():
        return None
    try:
        step, history, settings = read_state(p.parent / STATE_FILE)
        loss = history[-1]["val_loss"] if history else None
        said = f", validation loss {loss:.2f}" if isinstance(loss, (int, float)) else ""
        return f"trained here: {settings['preset']}, {step:,} steps{said} ({p.parent})"
    except (ValueError, OSError, KeyError, TypeError, IndexError):
        return None  # a damaged trainer.json: the checkpoint's own label stays


def run_folder_of(checkpoint: str | None) -> Path | None:
    """The training run a checkpoint belongs to (its folder, its model.safetensors, one
    of its snapshots, ``RUN@stepN``), or None for any other model."""
    if not checkpoint:
        return None
    m = AT_STEP.match(checkpoint)
    p = Path(m["folder"] if m else checkpoint)
    if NAME.match(p.name) and p.parent.name == SNAPSHOT_DIR:
        p = p.parent.parent
    elif p.name == MODEL_FILE:
        p = p.parent
    return p if p.is_dir() and (p / MODEL_FILE).is_file() and (p / STATE_FILE).is_file() else None


def resolve(checkpoint: str) -> str:
    """``RUN_FOLDER@stepN`` as the snapshot's path; anything else as it is. A step the
    folder has no snapshot of is refused with the steps it has."""
    m = AT_STEP.match(checkpoint)
    if m is None or not Path(m["folder"]).is_dir():
        return checkpoint
    step, folder = int(m["step"]), m["folder"]
    path = snapshot_path(folder, step)
    if not path.is_file():
        have = [s.step for s in list_snapshots(folder)]
        raise ValueError(f"{folder} has no snapshot of step {step:,}; it has "
                         + (", ".join(f"@step{s}" for s in have) if have else "none (train "
                            "with --snapshots N to keep them)"))
    _check_belongs(Path(folder), step, path)
    return str(path)


def _check_belongs(folder: Path, step: int, path: Path) -> None:
    """A snapshot file is of this run: the step it records is its name's, and its model's
    configuration that of the run's model beside it."""
    from ..weights.hf_files import safetensors_header

    def metadata(p: Path) -> dict:
        return safetensors_header(p)[0].get("__metadata__") or {}
    own = metadata(path)
    model = folder / MODEL_FILE
    if model.is_file() and own.get("config") != metadata(model).get("config"):
        raise ValueError(f"{path}: a snapshot of another model (its configuration is not that "
                         f"of {model}): not this run's")
    if own.get("train_step", str(step)) != str(step):
        raise ValueError(f"{path}: records step {own['train_step'][:12]!r}, not {step:,}: "
                         "not the snapshot its name says")
