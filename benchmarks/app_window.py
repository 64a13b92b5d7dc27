"""The app's main window for GUI benchmarks: opened offscreen on a preset, in a throwaway
settings file, and a ``wait(done)`` that keeps its event loop turning."""

from __future__ import annotations

import os
import time

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

from PySide6.QtCore import QEventLoop, QSettings, QTimer  # noqa: E402

from explorer.core.sources import ModelSpec  # noqa: E402
from explorer.ui.window.main_window import MainWindow  # noqa: E402


def waiter(app):
    """``wait(done)``: run the event loop until ``done()``, looking every 5 ms. The GUI
    thread sleeps in between, as in the app (a loop of processEvents() calls would keep
    asking for the GIL and slow the engine's Python down)."""
    def wait(done, limit: float = 900.0) -> None:
        end = time.monotonic() + limit
        loop = QEventLoop()
        timer = QTimer(interval=5)

        def look() -> None:
            if done() or time.monotonic() > end:
                loop.quit()

        timer.timeout.connect(look)
        timer.start()
        if not done():
            loop.exec()
        timer.stop()
        if not done():
            raise TimeoutError
    return wait


def open_window(preset: str, folder: str) -> MainWindow:
    window = MainWindow(ModelSpec(preset=preset), QSettings(f"{folder}/s.ini", QSettings.IniFormat))
    window.warn = lambda *a: print("warning:", a[-1])
    window.show()
    return window
