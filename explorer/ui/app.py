"""Starts the desktop app (the QApplication and the main window), or renders it
offscreen to a PNG for ``--screenshot``."""

from __future__ import annotations

import faulthandler
import os
import sys
import tempfile
import time

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


def screenshot(path: str, spec: ModelSpec | None = None, prompt: str | None = None,
               node: str | None = None, max_new_tokens: int = 8, timeout: float = 600.0) -> int:
    """Open the window offscreen, run the prompt, select ``node``, save a PNG. Uses a
    throw-away settings file, so the user's remembered layout and model are untouched."""
    os.environ["QT_QPA_PLATFORM"] = "offscreen"
    from PySide6.QtCore import QSettings
    from PySide6.QtWidgets import QApplication

    from .main_window import MainWindow

    app = QApplication.instance() or QApplication(sys.argv[:1])
    errors: list[str] = []
    with tempfile.TemporaryDirectory() as tmp:
        settings = QSettings(os.path.join(tmp, "settings.ini"), QSettings.IniFormat)
        window = MainWindow(spec, settings)
        window.warn = lambda parent, title, text: errors.append(text)
        window.resize(1600, 1000)
        window.show()

        def wait(done) -> bool:
            end = time.monotonic() + timeout
            while not done() and not errors and time.monotonic() < end:
                app.processEvents()
                time.sleep(0.01)
            return done()

        if not wait(lambda: window.session.model is not None):
            print(f"gpt-explorer: error: {errors[0] if errors else 'the model did not load'}",
                  file=sys.stderr)
            window.close()
            return 2
        if prompt is not None:
            window.generation.prompt.setPlainText(prompt)
        window.generation.max_tokens.setValue(max_new_tokens)
        window.generation.request_run()
        wait(lambda: not window.running and window.session.prompt is not None)
        if errors:
            print(f"gpt-explorer: error: {errors[0]}", file=sys.stderr)
            window.close()
            return 2
        window.session.show_step(None)
        if node:
            if node not in window.session.prompt.views:
                print(f"gpt-explorer: error: unknown node {node!r}", file=sys.stderr)
                window.close()
                return 2
            window.session.set_node(node)
        app.processEvents()
        ok = window.grab().save(path)
        window.close()
    if not ok:
        print(f"gpt-explorer: error: could not write {path}", file=sys.stderr)
        return 2
    print(f"saved {path}", file=sys.stderr)
    return 0
