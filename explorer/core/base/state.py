"""What the explorer remembers between runs outside the window's settings: which model
the default is after a download, and which weight files have been checked against
their published checksum (so a 6 GB file is hashed once, not at every start).

Small JSON files in the platform's state folder, written atomically. A missing,
unreadable or corrupt file reads as empty: losing it costs a re-check, nothing more.
"""

from __future__ import annotations

import json
import logging
import math
import os
import re
import sys
import tempfile
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from .outputs import shown
from .validate import read_json

log = logging.getLogger("explorer.state")

MAX_VERIFIED = 200  # remembered checks; the oldest are forgotten first


def state_dir() -> Path:
    """~/.local/state/gpt-block-explorer (Linux), ~/Library/Application Support/… (macOS),
    %LOCALAPPDATA%\\gpt-block-explorer (Windows); GPT_EXPLORER_STATE_DIR overrides."""
    if os.environ.get("GPT_EXPLORER_STATE_DIR"):
        return Path(os.environ["GPT_EXPLORER_STATE_DIR"]).expanduser()
    if sys.platform == "darwin":
        return Path.home() / "Library" / "Application Support" / "gpt-block-explorer"
    if os.name == "nt":
        return Path(os.environ.get("LOCALAPPDATA", Path.home())) / "gpt-block-explorer"
    state = os.environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    return Path(state) / "gpt-block-explorer"


def data_dir() -> Path:
    """Where the explorer puts what it makes for the user (training runs from the app):
    ~/.local/share/gpt-block-explorer (Linux), ~/Library/Application Support/… (macOS),
    %LOCALAPPDATA%\\gpt-block-explorer (Windows); GPT_EXPLORER_DATA_DIR overrides."""
    if os.environ.get("GPT_EXPLORER_DATA_DIR"):
        return Path(os.environ["GPT_EXPLORER_DATA_DIR"]).expanduser()
    if sys.platform == "darwin" or os.name == "nt":
        return state_dir()
    data = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(data) / "gpt-block-explorer"


def _read(name: str) -> dict[str, Any]:
    """A state file, read as any user file (kind, size, depth, numbers); one that cannot
    be used is set aside as NAME.bad with a line in the log, and the app goes on."""
    path = state_dir() / name
    if not os.path.lexists(path):
        return {}
    try:
        data = read_json(path, "a state file")
    except ValueError as exc:
        _set_aside(path, exc)
        return {}
    if not isinstance(data, dict):
        _set_aside(path, "not a JSON object")
        return {}
    return data


def _set_aside(path: Path, why) -> None:
    log.warning("setting %s aside as %s.bad: %s", path, path.name, why)
    try:
        os.replace(path, path.with_name(path.name + ".bad"))
    except OSError as exc:
        log.warning("could not set %s aside: %s", path, exc)


def _write(name: str, data: dict[str, Any]) -> None:
    folder = state_dir()
    try:
        folder.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=folder, prefix=f".{name}.", suffix=".tmp")
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            json.dump(data, fh, indent=1)  # insertion order: oldest first
        os.replace(tmp, folder / name)
    except OSError as exc:  # a read-only home costs a re-check next time, nothing else
        log.warning("could not write %s: %s", folder / name, exc)


# ------------------------------------------------------------------------ default model

def default_repo() -> str | None:
    """The Hub repository that the last successful download made the default."""
    value = _read("default-model.json").get("repo_id")
    return value if isinstance(value, str) and value else None


def set_default_repo(repo_id: str) -> None:
    _write("default-model.json", {"repo_id": repo_id})


# ------------------------------------------------------------------------ trained here

MAX_TRAINED = 20  # runs remembered, the latest first
MAX_STEP = 10**9  # a remembered step beyond this is not a run's


@dataclass(frozen=True)
class TrainedModel:
    """A training run finished on this machine: where its model is, when, how far."""

    path: str
    date: str  # ISO 8601, local time
    step: int
    val_loss: float | None
    preset: str


def remember_trained(path: str | os.PathLike, step: int, val_loss: float | None, preset: str) -> None:
    """A finished run becomes the first of the runs remembered (the default model when no
    trained GPT-2 is in the cache)."""
    entry = {"path": str(Path(path).resolve()), "date": datetime.now().isoformat(timespec="seconds"),
             "step": int(step), "val_loss": val_loss, "preset": str(preset)}
    runs = [r for r in _read("trained-models.json").get("runs", [])
            if isinstance(r, dict) and r.get("path") != entry["path"]]
    _write("trained-models.json", {"runs": [entry] + runs[:MAX_TRAINED - 1]})


def trained_models(notices: list[str] | None = None) -> list[TrainedModel]:
    """The runs remembered whose model file is still there, the latest first. An entry
    that cannot be used (a path the system refuses, a step beyond a billion, a date or
    a preset that is not one) is skipped; one line for all of them goes to the log and,
    given, to ``notices``."""
    found, unusable = [], []
    for r in _read("trained-models.json").get("runs", []):
        try:
            run = _trained_entry(r)
            if Path(run.path).is_file():
                found.append(run)
        except OSError as exc:  # a path too long for the system, …
            unusable.append(exc.strerror or str(exc))
        except (KeyError, TypeError, ValueError) as exc:
            unusable.append(str(exc) if not isinstance(exc, KeyError) else f"no {exc}")
    if unusable:
        line = shown(f"{len(unusable)} of the models remembered as trained here in "
                     f"{state_dir() / 'trained-models.json'} could not be used and "
                     f"{'was' if len(unusable) == 1 else 'were'} skipped (the first: "
                     f"{unusable[0][:120]})")
        log.warning("%s", line)
        if notices is not None:
            notices.append(line)
    return found


_PRESET_NAME = re.compile(r"[\w.\-]{1,64}", re.ASCII)


def _trained_entry(r: Any) -> TrainedModel:
    """One remembered run, each field checked; ValueError or TypeError naming the first
    that is not what a training run writes."""
    if not isinstance(r, dict):
        raise TypeError("an entry that is not an object")
    path, step, date, loss, preset = r["path"], r["step"], r["date"], r.get("val_loss"), r["preset"]
    if not isinstance(path, str) or not os.path.isabs(path) or "\0" in path:
        raise ValueError("a path that is not an absolute file name")
    if isinstance(step, bool) or not isinstance(step, int) or not 0 <= step <= MAX_STEP:
        said = f"{len(str(step))} digits" if isinstance(step, int) and len(str(step)) > 24 \
            else repr(step)[:24]
        raise ValueError(f"a step of {said}, not a count up to {MAX_STEP:,}")
    if not isinstance(date, str):
        raise ValueError("a date that is not text")
    datetime.fromisoformat(date)  # ValueError: "Invalid isoformat string: …"
    if loss is not None and (isinstance(loss, bool) or not isinstance(loss, (int, float))
                             or not math.isfinite(loss)):
        raise ValueError(f"a validation loss of {repr(loss)[:24]}")
    if not isinstance(preset, str) or not _PRESET_NAME.fullmatch(preset):
        raise ValueError(f"a preset named {repr(preset)[:40]}")
    return TrainedModel(path, date, step, None if loss is None else float(loss), preset)


# ------------------------------------------------------------------------ checked files

def _stamp(path: Path) -> tuple[str, int, int] | None:
    try:
        real = path.resolve()
        st = real.stat()
    except OSError:
        return None
    return str(real), st.st_size, st.st_mtime_ns


def was_verified(path: str | os.PathLike, checksum: str) -> bool:
    """True when this very file (same size and modification time) was checked before
    against ``checksum`` (e.g. 'sha256:…' or 'crc32c')."""
    stamp = _stamp(Path(path))
    if stamp is None:
        return False
    entry = _read("verified.json").get(stamp[0])
    return (isinstance(entry, dict) and entry.get("size") == stamp[1]
            and entry.get("mtime_ns") == stamp[2] and entry.get("checksum") == checksum)


def mark_verified(path: str | os.PathLike, checksum: str) -> None:
    stamp = _stamp(Path(path))
    if stamp is None:
        return
    data = _read("verified.json")
    data.pop(stamp[0], None)
    data[stamp[0]] = {"size": stamp[1], "mtime_ns": stamp[2], "checksum": checksum}
    while len(data) > MAX_VERIFIED:
        data.pop(next(iter(data)))
    _write("verified.json", data)


def forget_verified(path: str | os.PathLike) -> None:
    data = _read("verified.json")
    try:
        key = str(Path(path).resolve())
    except OSError:
        return
    if data.pop(key, None) is not None:
        _write("verified.json", data)
