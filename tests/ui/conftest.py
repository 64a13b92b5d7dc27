import os

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

import pytest  # noqa: E402
from PySide6.QtCore import QSettings  # noqa: E402
from PySide6.QtWidgets import QMessageBox  # noqa: E402


@pytest.fixture
def warnings(monkeypatch):
    """Message boxes would block a test: record them instead."""
    shown = []
    monkeypatch.setattr(QMessageBox, "warning", lambda parent, title, text: shown.append((title, text)))
    return shown


@pytest.fixture
def make_window(qtbot, tmp_path, warnings):
    from explorer.core.sources import ModelSpec
    from explorer.ui.window.main_window import MainWindow

    windows = []

    def make(preset="tiny", **spec):
        settings = QSettings(str(tmp_path / f"settings{len(windows)}.ini"), QSettings.IniFormat)
        window = MainWindow(ModelSpec(preset=preset, **spec), settings)
        qtbot.addWidget(window)
        window.show()
        qtbot.waitUntil(lambda: window.session.model is not None, timeout=60_000)
        windows.append(window)
        return window

    yield make
    for window in windows:
        window.close()


def run_and_wait(qtbot, window, max_tokens=5):
    window.generation.max_tokens.setValue(max_tokens)
    window.generation.request_run()
    qtbot.waitUntil(lambda: not window.running, timeout=60_000)
