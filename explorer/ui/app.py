"""Starts the desktop app: the QApplication and the main window."""

from __future__ import annotations

import faulthandler
import sys

from .engine import ModelSpec


def run(spec: ModelSpec | None = None, argv: list[str] | None = None) -> int:
    from PySide6.QtWidgets import QApplication

    from .main_window import MainWindow

    faulthandler.enable()
    app = QApplication.instance() or QApplication(argv or sys.argv[:1])
    app.setApplicationName("GPT Block Explorer")
    app.setOrganizationName("GPT Block Explorer")
    window = MainWindow(spec)
    window.show()
    return app.exec()
