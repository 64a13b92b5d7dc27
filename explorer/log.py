"""Logging for the app and the CLI: a rotating log file in the platform's folder for
application logs, plus stderr; the level comes from --log-level."""

from __future__ import annotations

import logging
import logging.handlers
import os
import sys
from pathlib import Path

LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR")


def log_dir() -> Path:
    """Where the log file goes: ~/.local/state (Linux), ~/Library/Logs (macOS),
    %LOCALAPPDATA% (Windows); GPT_EXPLORER_LOG_DIR overrides."""
    if os.environ.get("GPT_EXPLORER_LOG_DIR"):
        return Path(os.environ["GPT_EXPLORER_LOG_DIR"])
    if sys.platform == "darwin":
        return Path.home() / "Library" / "Logs" / "gpt-block-explorer"
    if os.name == "nt":
        return Path(os.environ.get("LOCALAPPDATA", Path.home())) / "gpt-block-explorer" / "logs"
    state = os.environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    return Path(state) / "gpt-block-explorer"


def setup_logging(level: str = "WARNING", to_file: bool = True) -> Path | None:
    """Configure the 'explorer' logger once; returns the log file's path (None if the
    folder cannot be written, which is not an error)."""
    level = level.upper()
    if level not in LEVELS:
        raise ValueError(f"unknown log level {level!r}; use one of {', '.join(LEVELS)}")
    logger = logging.getLogger("explorer")
    logger.setLevel(level)
    for handler in list(logger.handlers):
        logger.removeHandler(handler)
        handler.close()
    stream = logging.StreamHandler()
    stream.setLevel(level)
    stream.setFormatter(logging.Formatter("%(levelname)s %(name)s: %(message)s"))
    logger.addHandler(stream)
    path = None
    if to_file:
        try:
            folder = log_dir()
            folder.mkdir(parents=True, exist_ok=True)
            path = folder / "explorer.log"
            if path.exists() and not path.is_file():  # a FIFO there would block the open
                raise OSError(f"{path} is not a regular file")
            file_handler = logging.handlers.RotatingFileHandler(path, maxBytes=2_000_000,
                                                                backupCount=3, encoding="utf-8")
            file_handler.setLevel(min(logging.INFO, logging.getLevelName(level)))
            file_handler.setFormatter(logging.Formatter(
                "%(asctime)s %(levelname)s %(threadName)s %(name)s: %(message)s"))
            logger.addHandler(file_handler)
            logger.setLevel(min(logging.INFO, logging.getLevelName(level)))
        except OSError as exc:
            logger.warning("no log file: %s", exc)
            path = None
    return path
