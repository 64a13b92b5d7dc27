"""What a saved training run holds, checked before it is used: trainer.json's step,
history and settings, the preset it names against the model beside it, and AdamW's
state against that model (read with weights_only=True). Each problem is one ValueError
that names the file; training.py resumes from what passes. A training holds its folder
while it writes it (``RunLock``)."""

from __future__ import annotations

import glob
import os
from pathlib import Path

import torch

from ..gpt.config import GPTConfig, preset
from ..gpt.block_model import BlockModel
from ..base.outputs import shown
from ..base.validate import FileKind, file_kind, regular_file, whole

MODEL_FILE, OPTIMIZER_FILE, STATE_FILE = "model.safetensors", "optimizer.pt", "trainer.json"
SNAPSHOT_DIR = "snapshots"  # beside them: snapshots.py's copies of the weights


class RunExists(ValueError):
    """A folder already holds a training run; ``free`` is the first sibling that does not."""

    def __init__(self, folder: Path, free: Path) -> None:
        super().__init__(f"{folder}: already holds a training run; resume it, or train into "
                         f"another folder ({free} is free)")
        self.folder, self.free = folder, free


def holds_run(folder: str | Path) -> bool:
    """Whether a folder holds any part of a training run (model, optimizer, state or
    snapshots), whole or not."""
    folder = Path(folder)
    return any(file_kind(folder / name) != FileKind.MISSING
               for name in (MODEL_FILE, OPTIMIZER_FILE, STATE_FILE, SNAPSHOT_DIR))


def free_run_dir(folder: str | Path) -> Path:
    """``folder`` when it holds no run, else the first of ``folder-2``, ``folder-3``, …
    that holds none: a new run beside the old ones, never over them."""
    folder = Path(folder)
    n = 1
    candidate = folder
    while holds_run(candidate) or file_kind(candidate) not in (FileKind.MISSING, FileKind.FOLDER):
        n += 1
        candidate = folder.with_name(f"{folder.name}-{n}")
    return candidate


def sibling_runs(folder: str | Path) -> list[Path]:
    """``folder`` and its siblings ``folder-2``, ``folder-3``, … that hold a run."""
    folder = Path(folder)
    return [p for p in [folder, *folder.parent.glob(f"{glob.escape(folder.name)}-*")]
            if (p == folder or p.name[len(folder.name) + 1:].isascii() and p.name[len(folder.name) + 1:].isdigit())
            and file_kind(p / STATE_FILE) == FileKind.FILE]


def latest_run_dir(folder: str | Path) -> Path:
    """Of ``folder`` and its siblings ``folder-2``, ``folder-3``, … the one whose run was
    saved last (its trainer.json the newest); ``folder`` when none holds a run."""
    folder = Path(folder)
    runs = sibling_runs(folder)

    def saved(p: Path) -> int:
        try:
            return (p / STATE_FILE).stat().st_mtime_ns
        except OSError:  # gone since: last
            return -1
    return max(runs, key=saved, default=folder)


def check_out_dir(out_dir: str | Path, fresh: bool = False) -> Path:
    """Where checkpoints go: a folder the user may write in, made now if missing, so a
    place that cannot hold them (under /proc, read-only) is refused before training;
    ``fresh``: a folder that already holds a run is refused (RunExists), as a new run
    would replace it."""
    folder = Path(out_dir)
    kind = file_kind(folder)
    if kind not in (FileKind.MISSING, FileKind.FOLDER):
        what = "a file" if kind == FileKind.FILE else kind
        raise ValueError(f"{folder}: {what}, not a folder for checkpoints")
    if fresh and holds_run(folder):
        raise RunExists(folder, free_run_dir(folder))
    try:
        folder.mkdir(parents=True, exist_ok=True)
        probe = folder / ".write-test.part"
        probe.write_bytes(b"")
        probe.unlink()
    except OSError as exc:
        raise ValueError(f"{folder}: checkpoints cannot be written there "
                         f"({exc.strerror or exc})") from None
    return folder


_HISTORY_TYPES = {"step": int, "train_loss": float, "val_loss": float, "sample": str}
MAX_HISTORY = 100_000


def _is(value, kind) -> bool:
    if isinstance(value, bool):
        return False
    return isinstance(value, (int, float)) if kind is float else isinstance(value, kind)


def resume_state(path: Path, state) -> tuple[int, list, dict]:
    """trainer.json's step, history and settings, of the right types."""
    if not isinstance(state, dict):
        raise ValueError(f"{path}: a training state is a JSON object, not {type(state).__name__}")
    missing = [k for k in ("step", "history", "settings") if k not in state]
    if missing:
        raise ValueError(f"{path}: lacks {', '.join(missing)}")
    step, history, saved = state["step"], state["history"], state["settings"]
    try:
        step = whole(step, "its step", 0, 10**9)
    except ValueError as exc:
        raise ValueError(f"{path}: {exc}") from None
    if not isinstance(history, list) or not isinstance(saved, dict):
        raise ValueError(f"{path}: history must be a list and settings an object")
    if len(history) > MAX_HISTORY:
        raise ValueError(f"{path}: {len(history):,} evaluations in its history; a run keeps "
                         f"at most {MAX_HISTORY:,}")
    for i, entry in enumerate(history):
        if not (isinstance(entry, dict) and all(_is(entry.get(k), t) for k, t in _HISTORY_TYPES.items())
                and 0 <= entry["step"] <= step):
            raise ValueError(f"{path}: history entry {i + 1} is not an evaluation of this run "
                             "(step, train_loss, val_loss and sample, at most the run's step)")
    return step, history, saved


def read_state(path: Path) -> tuple[int, list, dict]:
    """trainer.json checked as a resume checks it, its step within its own run's end."""
    from ..base.validate import read_json
    step, history, saved = resume_state(path, read_json(path, "a training state"))
    end = saved.get("max_steps")
    if isinstance(end, int) and not isinstance(end, bool) and step > end:
        raise ValueError(f"{path}: says step {step:,}, past the run's own end at {end:,} "
                         "steps: the file is damaged")
    return step, history, saved


def check_preset(path: Path, name: str, cfg: GPTConfig) -> None:
    """The preset trainer.json names is the model in model.safetensors."""
    try:
        named = preset(name)
    except (KeyError, ValueError):
        raise ValueError(f"{path}: names the preset {name!r}, which is not one") from None
    keys = ("vocab_size", "context_length", "emb_dim", "n_heads", "n_layers")
    if any(getattr(named, k) != getattr(cfg, k) for k in keys):
        raise ValueError(f"{path}: names the preset {name!r} ({named.n_layers} blocks, "
                         f"{named.emb_dim} wide), but {MODEL_FILE} beside it has "
                         f"{cfg.n_layers} blocks, {cfg.emb_dim} wide: the files are of "
                         "different runs")


def read_optimizer(path: Path, model: BlockModel) -> dict:
    """AdamW's state, read with weights_only=True and checked against the model: one
    entry per parameter, each moment of the parameter's shape, finite."""
    import pickle
    regular_file(path)
    try:
        state = torch.load(path, map_location="cpu", weights_only=True)
    except pickle.UnpicklingError:
        raise ValueError(f"{path}: refused: the pickle holds more than tensors; nothing in it "
                         "was run") from None
    except Exception as exc:  # torch's errors about a damaged archive, in one line
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise ValueError(f"{path}: corrupt optimizer state ({first})") from None
    if not isinstance(state, dict) or "state" not in state or "param_groups" not in state:
        raise ValueError(f"{path}: not an optimizer state")
    _check_moments(path, state, model)
    return state


def _check_moments(path: Path, state: dict, model: BlockModel) -> None:
    params = [p for _, p in model.named_parameters() if p.dim() >= 2] + [
        p for _, p in model.named_parameters() if p.dim() < 2]  # the order of the groups
    groups, moments = state["param_groups"], state["state"]
    ids = ([i for g in groups if isinstance(g, dict) for i in g.get("params", [])]
           if isinstance(groups, list) else [])
    if ids != list(range(len(params))) or not isinstance(moments, dict):
        raise ValueError(f"{path}: holds the state of {len(ids):,} parameters; this model has "
                         f"{len(params):,}: the files are of different runs")
    for i, entry in moments.items():
        if not isinstance(i, int) or not 0 <= i < len(params) or not isinstance(entry, dict):
            raise ValueError(f"{path}: not AdamW's state for this model (entry {i!r})")
        for key in ("exp_avg", "exp_avg_sq"):
            t = entry.get(key)
            if not isinstance(t, torch.Tensor) or tuple(t.shape) != tuple(params[i].shape):
                got = tuple(t.shape) if isinstance(t, torch.Tensor) else type(t).__name__
                raise ValueError(f"{path}: {key} of parameter {i} is {got}, the model's "
                                 f"parameter is {tuple(params[i].shape)}: the files are of "
                                 "different runs")
            if not t.is_floating_point() or not torch.isfinite(t).all():
                raise ValueError(f"{path}: {key} of parameter {i} is not finite floating point")
        step = entry.get("step")
        if isinstance(step, bool) or not isinstance(step, (torch.Tensor, int, float)) or (
                isinstance(step, torch.Tensor) and step.numel() != 1):
            raise ValueError(f"{path}: the step of parameter {i} is not a number")


LOCK_FILE = ".training.lock"  # held while a training writes the folder


class RunLock:
    """A training's hold on its folder: an exclusive lock on ``LOCK_FILE`` (the OS drops
    it when the process ends, however it ends), the holder's process id written in it."""

    def __init__(self, folder: Path) -> None:
        self.folder, self._file = Path(folder), None

    def __enter__(self) -> "RunLock":
        try:
            import fcntl
        except ImportError:  # no advisory locks here (Windows): the folder is not held
            return self
        self.folder.mkdir(parents=True, exist_ok=True)
        f = open(self.folder / LOCK_FILE, "a+")
        try:
            fcntl.flock(f.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            f.seek(0)
            holder = f.read().strip()[:20]
            f.close()
            raise ValueError(f"{shown(self.folder)}: another training is writing this run"
                             + (f" (process {holder})" if holder.isdigit() else "")
                             + "; wait for it to end, or train into another folder") from None
        f.seek(0)
        f.truncate()
        f.write(str(os.getpid()))
        f.flush()
        self._file = f
        return self

    def __exit__(self, *exc) -> None:
        if self._file is not None:  # the folder as it was: the lock file gone with the lock
            (self.folder / LOCK_FILE).unlink(missing_ok=True)
            self._file.close()
            self._file = None

