"""Where the window remembers its settings (layout, generation settings, the last
prompt): an INI file in the user's configuration folder. A path that is not a regular
file (a FIFO, a device, a folder) would block or break Qt's reader before any window
shows: the window then remembers nothing this time, and says so."""

from __future__ import annotations

import logging
import tempfile
from pathlib import Path

from PySide6.QtCore import QSettings, QStandardPaths

from ...core.base.validate import FileKind, file_kind

ORGANISATION, NAME = "GPT Block Explorer", "gpt-block-explorer"
_KEPT: list[tempfile.TemporaryDirectory] = []  # the stand-in's folder, for the session


def settings_path() -> Path:
    folder = QStandardPaths.writableLocation(QStandardPaths.StandardLocation.GenericConfigLocation)
    return Path(folder) / ORGANISATION / f"{NAME}.conf"


def open_settings() -> tuple[QSettings, str | None]:
    """The window's settings, and a notice when its file could not be used."""
    path = settings_path()
    kind = file_kind(path)
    if kind in (FileKind.MISSING, FileKind.FILE):
        return QSettings(str(path), QSettings.Format.IniFormat), None
    stand_in = tempfile.TemporaryDirectory(prefix="explorer-settings-")
    _KEPT.append(stand_in)
    what = "a folder" if kind == FileKind.FOLDER else kind
    notice = (f"{path} is {what}, not a settings file: the window's settings are not "
              "remembered this time")
    logging.getLogger("explorer").warning(notice)
    return QSettings(str(Path(stand_in.name) / f"{NAME}.conf"), QSettings.Format.IniFormat), notice
