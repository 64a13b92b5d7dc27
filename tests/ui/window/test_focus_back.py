"""A dialog closed gives the keyboard back to the widget that had it, in the window: its
shortcuts work at once, without a click."""

from PySide6.QtWidgets import QApplication, QMessageBox

from explorer.ui.window.focus_back import install


def test_a_closed_dialog_gives_the_focus_back(qtbot, make_window):
    window = make_window()
    install(QApplication.instance(), window)
    window.activateWindow()
    graph = window.graph.view
    graph.setFocus()
    qtbot.waitUntil(lambda: QApplication.focusWidget() is graph, timeout=60_000)
    box = QMessageBox(QMessageBox.Warning, "A message", "Something to read", parent=window)
    box.open()
    qtbot.waitUntil(lambda: QApplication.focusWidget() is not graph, timeout=60_000)
    box.done(0)
    qtbot.waitUntil(lambda: QApplication.focusWidget() is graph, timeout=60_000)
    assert window.isActiveWindow()
    # a second dialog opened from the first keeps the focus while it is open
    first = QMessageBox(QMessageBox.Information, "First", "one", parent=window)
    first.open()
    second = QMessageBox(QMessageBox.Information, "Second", "two", parent=first)
    second.open()
    qtbot.waitUntil(lambda: QApplication.activeModalWidget() is second, timeout=60_000)
    second.done(0)
    qtbot.wait(50)
    assert QApplication.focusWidget() is not graph and QApplication.activeModalWidget() is first
    first.done(0)
    qtbot.waitUntil(lambda: QApplication.focusWidget() is graph, timeout=60_000)
