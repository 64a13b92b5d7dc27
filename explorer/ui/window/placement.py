"""Where the window goes: a first window fills most of a large screen and never more
than the screen it opens on, a restored one is brought onto the current screen, and the
dock tabs are narrow enough that all ten show in a 1500 px window."""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtGui import QGuiApplication
from PySide6.QtWidgets import QDockWidget, QMainWindow, QTabBar

BOTTOM_MIN = 170  # the tallest minimum of a bottom tab: more and the graph loses the room

DEFAULT_SIZE = (1500, 950)  # a first window at least (the screen permitting)
SCREEN_SHARE = 0.9  # or this share of a larger screen's free area
TAB_STYLE = "QTabBar::tab { padding: 3px 5px; }"


def first_size(window: QMainWindow) -> tuple[int, int]:
    """A first window's size: 90% of a large screen's free area, at least 1500 x 950
    (fit_to_screen then clamps it to a smaller screen)."""
    screen = window.screen() or QGuiApplication.primaryScreen()
    if screen is None:
        return DEFAULT_SIZE
    area = screen.availableGeometry()
    return (max(DEFAULT_SIZE[0], int(area.width() * SCREEN_SHARE)),
            max(DEFAULT_SIZE[1], int(area.height() * SCREEN_SHARE)))


def fit_to_screen(window: QMainWindow, size: tuple[int, int] | None = None) -> None:
    """Resize (to ``size``, or keep the size) and move so that the whole window lies on
    the screen it opens on: never larger than its available area."""
    screen = window.screen() or QGuiApplication.primaryScreen()
    if screen is None:
        return
    area = screen.availableGeometry()
    frame = window.frameGeometry().size() - window.size()  # title bar and borders
    width, height = size or (window.width(), window.height())
    width = max(min(width, area.width() - frame.width()), window.minimumSizeHint().width())
    height = max(min(height, area.height() - frame.height()), 1)
    window.resize(width, height)
    left = min(max(window.x(), area.left()), area.right() - width - frame.width() + 1)
    top = min(max(window.y(), area.top()), area.bottom() - height - frame.height() + 1)
    window.move(max(left, area.left()), max(top, area.top()))


def style_dock_tabs(window: QMainWindow) -> None:
    """Tabbed docks show whole titles, with narrow padding so that all ten fit a 630 px
    column (a 1500 px window) without scroll buttons; a narrower column scrolls them
    rather than eliding the titles to 'GE…' and 'Le…'."""
    for bar in window.findChildren(QTabBar):
        if bar.parent() is window:  # the main window's dock tab bars, not a view's tabs
            bar.setElideMode(Qt.ElideNone)
            bar.setUsesScrollButtons(True)
            bar.setStyleSheet(TAB_STYLE)


def default_dock_sizes(window: QMainWindow, bottom: QDockWidget, right: QDockWidget) -> None:
    """The graph keeps the room: a prompt panel of about 28% of the height under it, and
    the right-hand tabs at about 40% of the width."""
    window.resizeDocks([bottom], [max(BOTTOM_MIN, int(window.height() * 0.28))], Qt.Vertical)
    window.resizeDocks([right], [max(440, int(window.width() * 0.42))], Qt.Horizontal)
