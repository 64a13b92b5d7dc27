import os

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

import pytest  # noqa: E402
from PySide6.QtCore import QSettings  # noqa: E402
from PySide6.QtWidgets import QMessageBox  # noqa: E402


# ms: the longest a test waits for a trainer's child process, which runs niced below
# whatever else the machine does (two busy processes leave it a small share of a core)
TRAINING = 600_000


@pytest.fixture(autouse=True)
def _long_close_wait(monkeypatch):
    """A window a test closes waits for its jobs far above a loaded machine's worst
    (tests/conftest.py); the app itself waits CLOSE_WAIT_S and then leaves without them."""
    from explorer.ui.window import main_window
    from tests.conftest import TEST_CLOSE_WAIT_S
    monkeypatch.setattr(main_window, "CLOSE_WAIT_S", TEST_CLOSE_WAIT_S)


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
        qtbot.addWidget(window)  # closed, and its threads joined, when the test ends
        window.show()
        qtbot.waitUntil(lambda: window.session.model is not None, timeout=60_000)
        windows.append(window)
        return window

    return make


def run_and_wait(qtbot, window, max_tokens=5):
    """Ctrl+Enter, then wait until the run has ended and every view has had its turn to
    draw what it left (they redraw one per event-loop turn)."""
    window.prompt.max_tokens.setValue(max_tokens)
    window.prompt.request_run()
    qtbot.waitUntil(lambda: not window.running, timeout=120_000)
    settle(qtbot, window)


def settle(qtbot, where, timeout: int = 60_000) -> None:
    """Nothing left to draw in ``where`` (a window, or views alone): the session's
    redraws done (one per loop turn), every job ended, no view busy drawing in turns, and
    the events the drawing posted (layouts, plot ranges, paints) handled."""
    from PySide6.QtCore import QEvent
    from PySide6.QtWidgets import QApplication

    from tests.ui.alone import Alone
    if isinstance(where, Alone):
        where.settle()
    else:
        views = where.views.values()
        qtbot.waitUntil(lambda: where.session.caught_up() and not where.engine.busy()
                        and not any(callable(getattr(v, "busy", None)) and v.busy() for v in views),
                        timeout=timeout)
    QApplication.processEvents()
    QApplication.sendPostedEvents(None, QEvent.DeferredDelete)  # widgets replaced: gone


def wait_rerun(qtbot, window) -> None:
    """The run that a change of the interventions asks for (a loop turn later) has
    started, ended and been drawn."""
    qtbot.waitUntil(lambda: not window.prompt.rerun_pending() and not window.running,
                    timeout=120_000)
    settle(qtbot, window)


def show(qtbot, views, title):
    """The view of this title, alone (on a session and an inline engine) or in a window."""
    from explorer.ui.views.registry import VIEWS
    from tests.ui.alone import Alone
    if isinstance(views, Alone):
        return views.show(title)
    key = next(v.key for v in VIEWS if v.title == title)
    views.show_view(key)  # built and brought to the front, in its workspace
    view = views.view(key)
    qtbot.waitUntil(lambda: view.isVisible(), timeout=60_000)
    settle(qtbot, views)
    return view


@pytest.fixture
def ran(qtbot):
    """A tiny model's prompt pass and two steps, shown to views built alone."""
    from tests.ui.alone import Alone
    alone = Alone(qtbot)
    alone.run(max_tokens=2)
    alone.session.show_step(None)
    return alone
