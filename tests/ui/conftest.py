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
    """Ctrl+Enter, then wait until the run has ended and every view has had its turn to
    draw what it left (they redraw one per event-loop turn)."""
    window.prompt.max_tokens.setValue(max_tokens)
    window.prompt.request_run()
    qtbot.waitUntil(lambda: not window.running, timeout=60_000)
    qtbot.waitUntil(lambda: window.session.pending() == 0, timeout=10_000)


def show(qtbot, views, title):
    """The view of this title, alone (on a session and an inline engine) or in a window."""
    from explorer.ui.views.registry import VIEWS
    from tests.ui.alone import Alone
    if isinstance(views, Alone):
        return views.show(title)
    key = next(v.key for v in VIEWS if v.title == title)
    views.show_view(key)  # built and brought to the front, in its workspace
    view = views.view(key)
    qtbot.waitUntil(lambda: view.isVisible(), timeout=5_000)
    qtbot.wait(50)
    busy = getattr(view, "busy", None)  # a view that draws its plots in turns
    if busy is not None:
        qtbot.waitUntil(lambda: not busy(), timeout=5_000)
    return view


@pytest.fixture
def ran(qtbot):
    """A tiny model's prompt pass and two steps, shown to views built alone."""
    from tests.ui.alone import Alone
    alone = Alone(qtbot)
    alone.run(max_tokens=2)
    alone.session.show_step(None)
    return alone
