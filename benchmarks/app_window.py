"""The app's main window for GUI benchmarks: opened offscreen on a preset, in a throwaway
settings file, and a ``wait(done)`` that keeps its event loop turning."""

from __future__ import annotations

import os
import time

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

from PySide6.QtCore import QSettings  # noqa: E402

from explorer.core.sources import ModelSpec  # noqa: E402
from explorer.ui.main_window import MainWindow  # noqa: E402


def waiter(app):
    def wait(done, limit: float = 900.0) -> None:
        end = time.monotonic() + limit
        while not done():
            if time.monotonic() > end:
                raise TimeoutError
            app.processEvents()
            time.sleep(0.001)
    return wait


def open_window(preset: str, folder: str) -> MainWindow:
    window = MainWindow(ModelSpec(preset=preset), QSettings(f"{folder}/s.ini", QSettings.IniFormat))
    window.warn = lambda *a: print("warning:", a[-1])
    window.show()
    return window
