"""Starts the desktop app (the QApplication and the main window), or renders it
offscreen to a PNG for ``--screenshot``."""

from __future__ import annotations

import faulthandler
import logging
import os
import sys
import tempfile
import threading
import time
import traceback

from ...core.base.outputs import OutputError, atomic_output, shown
from ...core.gpt.nodes import all_hook_names, layer_of
from ...core.sources import ModelSpec


class _ErrorRelay:
    """Brings an error raised on any thread to a dialog on the GUI thread: a widget made
    off the GUI thread would take the process down."""

    def __init__(self, window) -> None:
        from PySide6.QtCore import QObject, Signal

        class Relay(QObject):
            raised = Signal(str)

        from ...log import log_dir

        self.relay = Relay()  # lives on the GUI thread: a signal from elsewhere is queued
        where = log_dir() / "explorer.log"
        self.relay.raised.connect(
            lambda text: window.warn(window, "Unexpected error",
                                     f"{text}\n\nThe details are in {where}."))

    def __call__(self, text: str) -> None:
        self.relay.raised.emit(text)


def install_excepthook(window) -> None:
    """Uncaught exceptions (in a slot, or in any thread) are logged and shown, never
    fatal; the dialog always opens on the GUI thread."""
    log = logging.getLogger("explorer.ui")
    relay = _ErrorRelay(window)

    def hook(kind, value, tb) -> None:
        log.error("uncaught exception", exc_info=(kind, value, tb))
        text = "".join(traceback.format_exception_only(kind, value)).strip()
        try:
            relay(text)
        except Exception:  # the window may be gone already
            sys.__excepthook__(kind, value, tb)

    sys.excepthook = hook
    threading.excepthook = lambda args: hook(args.exc_type, args.exc_value, args.exc_traceback)


def run(spec: ModelSpec | None = None, argv: list[str] | None = None,
        open_run: str | None = None, workspace: str | None = None) -> int:
    from ..base.display import display_problem

    problem = display_problem()
    if problem:  # before Qt starts: Qt would abort the process
        print(f"gpt-explorer: error: {problem}", file=sys.stderr)
        return 2
    from PySide6.QtWidgets import QApplication

    from .main_window import MainWindow

    faulthandler.enable()
    app = QApplication.instance() or QApplication(argv or sys.argv[:1])
    app.setApplicationName("GPT Block Explorer")
    app.setOrganizationName("GPT Block Explorer")
    window = MainWindow(spec)
    install_excepthook(window)
    if workspace:
        window.workspaces.show(workspace)
    window.show()
    from .window_gone import watch
    window.gone = watch(app, window)  # kept with the window: the filter lives as long
    from .focus_back import install
    install(app, window)  # a dialog closed: the window's shortcuts work at once
    if open_run:  # an engine job after the model's load: it compares with that model
        window.run_files.open(open_run)
    try:
        code = app.exec()
    finally:
        sys.excepthook = sys.__excepthook__
        threading.excepthook = threading.__excepthook__
    if window.stuck:  # a thread still in a job: Qt would abort when it is destroyed
        logging.shutdown()
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)
    tear_down(app, window)
    return code


def run_view(key: str, spec: ModelSpec | None = None, prompt: str | None = None,
             screenshot: str | None = None, timeout: float = 600.0) -> int:
    """``gpt-explorer view KEY``: one view in a window of its own (view_alone.py), or
    rendered offscreen to ``screenshot`` once the prompt has run."""
    if screenshot:
        os.environ["QT_QPA_PLATFORM"] = "offscreen"
        from ..plots.figures import offscreen_app
        app = offscreen_app()
    else:
        from ..base.display import display_problem
        problem = display_problem()
        if problem:
            print(f"gpt-explorer: error: {problem}", file=sys.stderr)
            return 2
        from PySide6.QtWidgets import QApplication
        faulthandler.enable()
        app = QApplication.instance() or QApplication(sys.argv[:1])
    from .view_alone import DEFAULT_PROMPT, ViewWindow

    window = ViewWindow(key, spec, prompt or DEFAULT_PROMPT)
    errors: list[str] = []
    if screenshot:
        window.warn = lambda parent, title, text: errors.append(text)
    else:
        install_excepthook(window)
    window.show()
    if not screenshot:
        code = app.exec()
        if window.stuck:
            os._exit(code)
        tear_down(app, window)
        return code
    end = time.monotonic() + timeout
    while (window.session.prompt is None or window.running or not window.session.caught_up()) \
            and not errors and time.monotonic() < end:
        app.processEvents()
        time.sleep(0.01)
    if errors or window.session.prompt is None:
        print(f"gpt-explorer: error: {errors[0] if errors else 'the prompt did not run'}",
              file=sys.stderr)
        tear_down(app, window)
        return 2
    try:
        with atomic_output(screenshot) as tmp:
            ok = window.grab().save(str(tmp))
    except OutputError:
        ok = False
    tear_down(app, window)
    if not ok:
        print(f"gpt-explorer: error: could not write {screenshot}", file=sys.stderr)
        return 2
    print(f"saved {shown(screenshot)}", file=sys.stderr)
    return 0


def tear_down(app, window) -> None:
    """Close ``window`` and delete it and its children now, while the QApplication
    lives: left to the interpreter's exit, Python and Qt destroy them in an order that
    can crash (a view's plots deleted after their scene)."""
    from PySide6.QtCore import QCoreApplication, QEvent

    window.close()
    window.deleteLater()
    QCoreApplication.sendPostedEvents(None, QEvent.Type.DeferredDelete)
    app.processEvents()


def screenshot(path: str, spec: ModelSpec | None = None, prompt: str | None = None,
               node: str | None = None, max_new_tokens: int = 8, timeout: float = 600.0,
               open_run: str | None = None, workspace: str | None = None) -> int:
    """Open the window offscreen, run the prompt, select ``node``, save a PNG. Uses a
    throw-away settings file, so the user's remembered layout and model are untouched."""
    os.environ["QT_QPA_PLATFORM"] = "offscreen"
    from PySide6.QtCore import QSettings

    from ..plots.figures import offscreen_app
    from .main_window import MainWindow

    app = offscreen_app()
    errors: list[str] = []
    with tempfile.TemporaryDirectory() as tmp:
        settings = QSettings(os.path.join(tmp, "settings.ini"), QSettings.IniFormat)
        window = MainWindow(spec, settings)
        window.warn = lambda parent, title, text: errors.append(text)
        window._placed = True  # the picture's own size, not the (offscreen) screen's
        window.resize(1600, 1000)
        window.show()

        def wait(done) -> bool:
            end = time.monotonic() + timeout
            while not done() and not errors and time.monotonic() < end:
                app.processEvents()
                time.sleep(0.01)
            return done()

        if open_run:
            problem = _open_run(window, wait, errors, open_run)
        else:
            problem = _run_and_select(window, wait, errors, prompt, node, max_new_tokens)
        if problem:
            print(f"gpt-explorer: error: {problem}", file=sys.stderr)
            tear_down(app, window)
            return 2
        if workspace:
            window.workspaces.show(workspace)
        settle = time.monotonic() + 0.5  # let queued redraws and layouts finish
        while time.monotonic() < settle:
            app.processEvents()
            time.sleep(0.01)
        try:
            with atomic_output(path) as tmp:
                ok = window.grab().save(str(tmp))
        except OutputError:  # nothing written, and nothing left that looks complete
            ok = False
        tear_down(app, window)
    if not ok:
        print(f"gpt-explorer: error: could not write {path}", file=sys.stderr)
        return 2
    print(f"saved {shown(path)}", file=sys.stderr)
    return 0


def _open_run(window, wait, errors: list[str], path: str) -> str | None:
    """Open a saved run in the screenshot's window; what went wrong, or None."""
    if not wait(lambda: window.session.model is not None):
        return errors[0] if errors else "the model did not load"
    window.run_files.open(path)
    wait(lambda: window.session.prompt is not None and not window.running
         and window.run_files.expected is None)
    return errors[0].splitlines()[0] if errors else None


def _run_and_select(window, wait, errors: list[str], prompt: str | None, node: str | None,
                    max_new_tokens: int) -> str | None:
    """Load, run the prompt and select the node in the screenshot's window; what went
    wrong, or None."""
    if not wait(lambda: window.session.model is not None):
        return errors[0] if errors else "the model did not load"
    refused = window.prompt.run_text(prompt, max_new_tokens)
    if refused is not None and not errors:  # the panel refused it (an empty prompt…)
        return f"the prompt did not run: {refused}"
    wait(lambda: not window.running and window.session.prompt is not None)
    if errors:
        return errors[0]
    window.session.show_step(None)
    if node:
        if node not in window.session.prompt.views and not _opens(window, node):
            return f"unknown node {node!r}"
        window.session.set_node(node)  # a step inside attention: the graph opens it
        if not wait(lambda: node in window.session.current.views):
            return errors[0] if errors else f"{node} did not open"
    return None


def _opens(window, node: str) -> bool:
    """Whether ``node`` is a step inside attention of one of this model's blocks (the
    pass computes those when attention is opened)."""
    cfg = window.session.model.config  # the pattern too: kept for the block shown only
    return node in all_hook_names(cfg, include_pattern=True, inside=True) and \
        layer_of(node) is not None
