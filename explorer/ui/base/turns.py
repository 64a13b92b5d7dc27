"""Work spread over turns of the event loop: a list of calls made one per turn, so that
input and paints get in between (one batch of queued slots, or one slot doing all of
it, would hold the GUI thread for the whole list)."""

from __future__ import annotations

from typing import Callable

import shiboken6
from PySide6.QtCore import QObject, QTimer


def alive(callback) -> bool:
    """False for a bound method of a Qt object that has been deleted (its view's window
    closed): a call made later drops it instead."""
    owner = getattr(callback, "__self__", None)
    return not isinstance(owner, QObject) or shiboken6.isValid(owner)


class Turns(QObject):
    """``run(calls)`` makes the calls one per loop turn, in order; a new ``run`` replaces
    the calls still pending."""

    def __init__(self, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self._due: list[Callable[[], None]] = []
        self._timer = QTimer(self, singleShot=True, interval=0)
        self._timer.timeout.connect(self._next)

    def run(self, calls) -> None:
        self._due = list(calls)
        if self._due:
            self._timer.start()

    def pending(self) -> int:
        return len(self._due)

    def _next(self) -> None:
        if not self._due:
            return
        call = self._due.pop(0)
        try:
            call()
        finally:
            if self._due:
                self._timer.start()
