"""Keyboard focus back to the main window when a dialog closes (a file chooser, a
message, the model dialog): without a window manager that hands it back — and with some
that do not — the window's shortcuts did nothing until a click. The widget that had the
focus before the dialog gets it again."""

from __future__ import annotations

from PySide6.QtCore import QEvent, QObject, QTimer
from PySide6.QtWidgets import QApplication, QDialog


class FocusBack(QObject):
    """An application event filter: a dialog of ``window`` hidden gives the focus back."""

    def __init__(self, window) -> None:
        super().__init__(window)
        self.window = window
        self.before = None  # the window's focused widget when the dialog showed

    def eventFilter(self, obj, event) -> bool:  # noqa: N802 (Qt's name)
        kind = event.type()
        if kind in (QEvent.Show, QEvent.Hide) and isinstance(obj, QDialog) and obj.isWindow():
            if kind == QEvent.Show:
                focused = QApplication.focusWidget()
                if focused is not None and focused.window() is self.window:
                    self.before = focused
            else:
                QTimer.singleShot(0, self.give_back)
        return False

    def give_back(self) -> None:
        if QApplication.activeModalWidget() is not None or not self.window.isVisible():
            return  # another dialog is still open: it keeps the focus
        self.window.activateWindow()
        self.window.raise_()
        target = self.before if self.before is not None and self.before.isVisible() else \
            self.window
        target.setFocus()


def install(app: QApplication, window) -> FocusBack:
    """Watch ``app``'s dialogs for ``window``; the filter lives as long as the window."""
    watcher = FocusBack(window)
    app.installEventFilter(watcher)
    return watcher
