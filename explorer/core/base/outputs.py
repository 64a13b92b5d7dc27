"""The one rule for every file the explorer writes (figures, CSVs, tensors, screenshots):
checked before any work starts, written to a temporary name in the same folder and
renamed when complete — so a FIFO never blocks a finished run, a folder is never
written beside, and a write that fails half-way leaves nothing that looks complete."""

from __future__ import annotations

import os
import stat
import tempfile
import unicodedata
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator


def shown(text: str | os.PathLike) -> str:
    """A file name as printed: a newline, a carriage return or another control character
    in it escaped (\\n, \\r), so that the line stays one line and is not overwritten."""
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in os.fspath(text))


class OutputError(ValueError):
    """A target the explorer will not write to; its text is one line for the user (a
    name with a newline or another control character in it is shown escaped: \\n)."""

    def __init__(self, message: str) -> None:
        super().__init__(shown(message))


def check_output(path: str | os.PathLike, suffix: str = "") -> Path:
    """The target as it will be written (``suffix`` appended when missing, as numpy does
    for .npz): a regular file or nothing yet, in an existing folder the user may write.
    A folder, FIFO, device or socket is refused with one line, and so is a name with a
    control character (C0, DEL or C1: a line break, a carriage return, an escape), which
    no listing or terminal shows as it is."""
    text = os.fspath(path)
    if not text.strip():
        raise OutputError("the output file name is empty")
    control = next((c for c in text if unicodedata.category(c) == "Cc"), None)
    if control is not None:
        raise OutputError(f"the output name {text} has a control character "
                          f"({repr(control)[1:-1]}); choose a name without one")
    target = Path(text).expanduser()
    if target.is_dir():
        raise OutputError(f"{text} is a folder: give a file name, e.g. {Path(text) / ('out' + (suffix or '.png'))}")
    if suffix and not target.name.endswith(suffix):
        _not_special(target)  # /dev/full given: refused, not written beside as /dev/full.npz
        target = target.with_name(target.name + suffix)
    _not_special(target)
    folder = target.parent if str(target.parent) else Path(".")
    if not folder.is_dir():
        raise OutputError(f"the folder {folder} does not exist")
    if not os.access(folder, os.W_OK | os.X_OK):
        raise OutputError(f"the folder {folder} is not writable")
    return target


def _not_special(target: Path) -> None:
    """A folder, FIFO, socket or device at ``target`` is refused in one line."""
    try:
        mode = os.stat(target).st_mode  # follows a link to what it names
    except FileNotFoundError:
        return
    except OSError as exc:
        raise OutputError(f"cannot use {target} as an output: {exc.strerror or exc}") from None
    if stat.S_ISDIR(mode):
        raise OutputError(f"{target} is a folder: give a file name inside it")
    if not stat.S_ISREG(mode):
        kind = ("a FIFO" if stat.S_ISFIFO(mode) else "a socket" if stat.S_ISSOCK(mode)
                else "a device")
        raise OutputError(f"{target} is {kind}, not a file: the explorer writes only to "
                          "regular files")


@contextmanager
def atomic_output(path: str | os.PathLike, suffix: str = "") -> Iterator[Path]:
    """``with atomic_output(target) as tmp:`` write ``tmp``; on success it becomes the
    target (checked again, renamed in one step), on any failure it is removed."""
    target = check_output(path, suffix)
    fd, name = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".partial" + target.suffix,
                                dir=target.parent if str(target.parent) else ".")
    os.close(fd)
    tmp = Path(name)
    try:
        yield tmp
        if not tmp.exists() or tmp.stat().st_size == 0:
            raise OutputError(f"nothing was written for {target}")
        check_output(target)  # it may have become a FIFO meanwhile
        os.replace(tmp, target)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
