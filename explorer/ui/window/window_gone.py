"""The main window destroyed under the app (X11: ``xdotool windowclose``, a window
manager's force-close): Qt goes on without it, and so would a running generation, its
memory growing, with nothing left to show it. The app watches for its window's
DestroyNotify and closes as when the user closes it: its jobs are stopped, the settings
saved, the process ends."""

from __future__ import annotations

import ctypes
import logging

from PySide6.QtCore import QAbstractNativeEventFilter, QTimer

log = logging.getLogger("explorer.ui.window")

XCB_EVENT = b"xcb_generic_event_t"
XCB_DESTROY_NOTIFY = 17  # xcb_destroy_notify_event_t: type, pad, sequence, event, window


def destroyed_window(event_type, message) -> int | None:
    """The X window a DestroyNotify names (None for any other event)."""
    # ``message`` is a shiboken VoidPtr: its truth is its (unknown) size, not the address
    if bytes(event_type) != XCB_EVENT or message is None or int(message) == 0:
        return None
    raw = ctypes.string_at(int(message), 12)
    if raw[0] & 0x7F != XCB_DESTROY_NOTIFY:
        return None
    return int.from_bytes(raw[8:12], "little")


class WindowGone(QAbstractNativeEventFilter):
    def __init__(self, window) -> None:
        super().__init__()
        self.window = window
        self.gone = False

    def nativeEventFilter(self, event_type, message):  # noqa: N802 (Qt's name)
        wid = destroyed_window(event_type, message)
        if wid is not None and not self.gone and wid == int(self.window.winId()):
            self.gone = True
            log.warning("the main window was destroyed from outside; stopping and closing")
            QTimer.singleShot(0, self.window.close)
        return False, 0


def watch(app, window) -> WindowGone:
    """Install the watch (keep the returned filter referenced while the app runs)."""
    gone = WindowGone(window)
    app.installNativeEventFilter(gone)
    return gone
