"""Checks at the boundaries: numbers that come from a file, a setting or the command line,
and the files themselves. Each failure is one line that names the setting or the file
and says what is wrong and what would be right. Owns no policy beyond that."""

from __future__ import annotations

import json
import math
import os
import stat
from enum import StrEnum
from pathlib import Path
from typing import Any

from .errors import CheckpointError

MAX_JSON_BYTES = 16 * 1024 * 1024  # any config, index or state file the explorer reads
MAX_JSON_DEPTH = 64


def whole(value: Any, name: str, lo: int = 1, hi: int | None = None) -> int:
    """A whole number in [lo, hi]: an int (or a float that is one, such as 4.0); not a
    bool, not 4.7, not a string."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ValueError(f"{name} must be a whole number, got {value!r}")
    if isinstance(value, float):
        if not math.isfinite(value) or not value.is_integer():
            raise ValueError(f"{name} must be a whole number, got {value!r}")
        value = int(value)
    if value < lo or (hi is not None and value > hi):
        bounds = f"at least {lo:,}" if hi is None else f"between {lo:,} and {hi:,}"
        raise ValueError(f"{name} must be {bounds}, got {value:,}")
    return int(value)


def real(value: Any, name: str, lo: float | None = None, hi: float | None = None,
         lo_open: bool = False) -> float:
    """A finite number in [lo, hi] (or (lo, hi] with ``lo_open``)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ValueError(f"{name} must be a number, got {value!r}")
    value = float(value)
    low_ok = lo is None or (value > lo if lo_open else value >= lo)
    if not math.isfinite(value) or not low_ok or (hi is not None and value > hi):
        left = "(" if lo_open else "["
        bounds = f" in {left}{lo:g}, {hi:g}]" if lo is not None and hi is not None else ""
        raise ValueError(f"{name} must be a finite number{bounds}, got {value!r}")
    return value


class FileKind(StrEnum):
    """What a path names, for the kinds a reader acts on; anything else is said in words
    by ``file_kind`` (a FIFO, a socket, a device, unreadable)."""

    FILE = "file"
    FOLDER = "folder"
    MISSING = "missing"


def file_kind(path: Path) -> FileKind | str:
    """A ``FileKind``, or in words what else it is (a FIFO, a socket, a device…), without
    opening it: opening a FIFO would wait for a writer forever."""
    try:
        mode = os.stat(path).st_mode
    except FileNotFoundError:
        return FileKind.MISSING
    except OSError as exc:  # a symlink loop, a name too long, no permission on a folder
        return f"unreadable ({exc.strerror or exc})"
    if stat.S_ISREG(mode):
        return FileKind.FILE
    if stat.S_ISDIR(mode):
        return FileKind.FOLDER
    for test, what in ((stat.S_ISFIFO, "a FIFO (named pipe)"), (stat.S_ISSOCK, "a socket"),
                       (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device")):
        if test(mode):
            return what
    return "not a regular file"


def regular_file(path: str | os.PathLike) -> Path:
    """The path, if it is a regular file; else a CheckpointError saying what it is."""
    p = Path(path)
    kind = file_kind(p)
    if kind == FileKind.MISSING:
        raise CheckpointError(p, "no such file")
    if kind == FileKind.FOLDER:
        raise CheckpointError(p, "a folder, not a file")
    if kind != FileKind.FILE:
        raise CheckpointError(p, f"{kind}, not a regular file: it is not read")
    return p


def _depth(text: str) -> int:
    """How deeply a JSON text nests (brackets outside strings), without parsing it."""
    depth = deepest = 0
    in_string = escaped = False
    for ch in text:
        if in_string:
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == '"':
                in_string = False
        elif ch == '"':
            in_string = True
        elif ch in "[{":
            depth += 1
            deepest = max(deepest, depth)
        elif ch in "]}":
            depth -= 1
    return deepest


def parse_json(text: str | bytes, where: str | os.PathLike, what: str = "JSON") -> Any:
    """JSON with a size and a nesting limit (deep nesting would exhaust Python's stack)."""
    if isinstance(text, bytes):
        try:
            text = text.decode("utf-8")
        except UnicodeDecodeError:
            raise CheckpointError(where, f"not UTF-8 text, so not {what}") from None
    text = text.removeprefix("\ufeff")  # a byte-order mark some editors write: not content
    if len(text) > MAX_JSON_BYTES:
        raise CheckpointError(where, f"{len(text):,} bytes is too large for {what}")
    if _depth(text) > MAX_JSON_DEPTH:
        raise CheckpointError(where, f"{what} nested more than {MAX_JSON_DEPTH} levels deep: "
                                     "not a file the explorer writes or reads")
    try:
        return json.loads(text, parse_int=_bounded_int, parse_float=_finite_float,
                          parse_constant=_no_constant, object_pairs_hook=_unique_keys)
    except _NumberError as exc:
        raise CheckpointError(where, f"{what} holds {exc}") from None
    except (ValueError, RecursionError) as exc:
        raise CheckpointError(where, f"not valid JSON ({exc}), so not {what}") from None


MAX_INT_DIGITS = 30  # far past any count, width or seed; a 400-digit number is refused


class _NumberError(Exception):
    pass


def _bounded_int(text: str) -> int:
    if len(text.lstrip("-")) > MAX_INT_DIGITS:
        raise _NumberError(f"a whole number of {len(text.lstrip('-'))} digits, more than "
                           f"{MAX_INT_DIGITS}")
    return int(text)


def _unique_keys(pairs: list) -> dict:
    """An object whose every name is said once: with a name twice, which value was meant
    cannot be told (Python would keep the last, other readers the first)."""
    out = dict(pairs)
    if len(out) != len(pairs):
        seen = set()
        twice = next(k for k, _ in pairs if k in seen or seen.add(k))
        raise _NumberError(f"the name {ascii(twice)[:60]} twice in one object")
    return out


def _finite_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise _NumberError(f"the number {text[:20]}, beyond a float's range")
    return value


def _no_constant(text: str) -> float:
    raise _NumberError(f"{text}, which is not a number")


def read_json(path: str | os.PathLike, what: str = "JSON") -> Any:
    p = regular_file(path)
    try:
        size = p.stat().st_size
        if size > MAX_JSON_BYTES:
            raise CheckpointError(p, f"{size:,} bytes is too large for {what}")
        return parse_json(p.read_bytes(), p, what)
    except OSError as exc:
        raise CheckpointError(p, f"cannot be read ({exc.strerror or exc})") from None
