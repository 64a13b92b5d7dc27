"""Starts the desktop app (the QApplication and the main window), or renders it
offscreen to a PNG for ``--screenshot``."""

from __future__ import annotations

import faulthandler
import logging
import os
import sys
import tempfile
import time
import traceback

from ..core.sources import ModelSpec


def install_excepthook(window) -> None:
    """Uncaught exceptions (in a slot, say) are logged and shown, never fatal."""
    log = logging.getLogger("explorer.ui")

    def hook(kind, value, tb) -> None:
        log.error("uncaught exception", exc_info=(kind, value, tb))
        text = "".join(traceback.format_exception_only(kind, value)).strip()
        try:
            window.warn(window, "Unexpected error", f"{text}\n\nThe details are in the log file.")
        except Exception:  # the window may be gone already
            sys.__excepthook__(kind, value, tb)

    sys.excepthook = hook


def run(spec: ModelSpec | None = None, argv: list[str] | None = None) -> int:
    from PySide6.QtWidgets import QApplication

    from .main_window import MainWindow

    faulthandler.enable()
    app = QApplication.instance() or QApplication(argv or sys.argv[:1])
    app.setApplicationName("GPT Block Explorer")
    app.setOrganizationName("GPT Block Explorer")
    window = MainWindow(spec)
    install_excepthook(window)
    window.show()
    try:
        return app.exec()
    finally:
        sys.excepthook = sys.__excepthook__


def screenshot(path: str, spec: ModelSpec | None = None, prompt: str | None = None,
               node: str | None = None, max_new_tokens: int = 8, timeout: float = 600.0) -> int:
    """Open the window offscreen, run the prompt, select ``node``, save a PNG. Uses a
    throw-away settings file, so the user's remembered layout and model are untouched."""
    os.environ["QT_QPA_PLATFORM"] = "offscreen"
    from PySide6.QtCore import QSettings

    from .figures import offscreen_app
    from .main_window import MainWindow

    app = offscreen_app()
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
        settle = time.monotonic() + 0.5  # let queued redraws and layouts finish
        while time.monotonic() < settle:
            app.processEvents()
            time.sleep(0.01)
        ok = window.grab().save(path)
        window.close()
    if not ok:
        print(f"gpt-explorer: error: could not write {path}", file=sys.stderr)
        return 2
    print(f"saved {path}", file=sys.stderr)
    return 0
