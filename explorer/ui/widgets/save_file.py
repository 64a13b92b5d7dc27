"""Saving from a view: the file dialog, then the output rule every writer follows
(``core/base/outputs.py``): a folder, a FIFO or a device is refused, the file is
written under a temporary name and renamed when complete, and a failure is one line to
the user while the previous file stays."""

from __future__ import annotations

from pathlib import Path
from typing import Callable

from PySide6.QtWidgets import QFileDialog, QWidget

from ...core.base.outputs import atomic_output


def save_as(parent: QWidget, title: str, name: str, file_filter: str,
            write: Callable[[Path], None], on_error: Callable[[str], None]) -> Path | None:
    """Ask where, then ``write(temporary path)``; the path written, or None."""
    path, _ = QFileDialog.getSaveFileName(parent, title, name, file_filter)
    if not path:
        return None
    return save_to(path, write, on_error)


def save_to(path: str, write: Callable[[Path], None], on_error: Callable[[str], None]) -> Path | None:
    try:
        with atomic_output(path) as tmp:
            write(tmp)
    except (OSError, ValueError) as exc:
        on_error(f"Could not save {path}: {str(exc).splitlines()[0] if str(exc) else exc}")
        return None
    return Path(path)
