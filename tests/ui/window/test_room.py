"""Room on a laptop: in a window of 1366×768 and of 1150×700, in every workspace and for
every one of its tabs (and the tabs inside a view), no tab strip scrolls and no view or
table with rows scrolls sideways, every visible plot is at least 220 px tall and 300 px
wide and none is laid out past its widget (at 1366×768 none is scrolled below the fold,
even in part), every text pane shows at least 10 lines (or all it holds), and the whole
block graph still fits."""

import pyqtgraph as pg
import pytest
from PySide6.QtCore import QPoint, QRect
from PySide6.QtWidgets import (QAbstractItemView, QApplication, QPlainTextEdit, QScrollArea,
                               QTabBar, QTabWidget, QTextEdit)

from explorer.ui.views.registry import WORKSPACES
from tests.ui.conftest import run_and_wait
from tests.ui.plots.test_fit import overflowing
from tests.ui.views.shared.test_graph import assert_all_in_view, laptop

PLOT_HEIGHT, PLOT_WIDTH, LINES = 220, 300, 10


def seen(widget) -> QRect:
    """The part of a widget inside every parent's rectangle (not scrolled away or cut
    off), in the window's coordinates."""
    top = widget.window()
    rect = QRect(widget.mapTo(top, QPoint(0, 0)), widget.size())
    parent = widget.parentWidget()
    while parent is not None and parent is not top:
        rect = rect.intersected(QRect(parent.mapTo(top, QPoint(0, 0)), parent.size()))
        parent = parent.parentWidget()
    return rect.intersected(top.rect())


def shown(widget) -> bool:
    return widget is not None and widget.isVisible() and not seen(widget).isEmpty()


def scrolled_in(widget) -> QScrollArea | None:
    """The scroll area the widget is in (the nearest), else None."""
    while widget is not None and not isinstance(widget, QScrollArea):
        widget = widget.parentWidget()
    return widget


def lacking_room(window, checked: list | None = None, fold: bool = False) -> list[str]:
    """What lacks room in the window as it is shown; ``checked`` collects the plots and
    panes looked at. ``fold``: no plot may be scrolled away, even in part (a laptop's
    1366×768 shows every plot whole; a smaller window may scroll)."""
    found, checked = [], checked if checked is not None else []
    for bar in window.findChildren(QTabBar):
        if shown(bar) and bar.count() > 1 and bar.sizeHint().width() > bar.width() + 1:
            texts = [bar.tabText(i) for i in range(bar.count())]
            found.append(f"the tabs {texts} need {bar.sizeHint().width()} px of {bar.width()}")
    for area in window.findChildren(QScrollArea):
        bar = area.horizontalScrollBar()
        if area.objectName() == "view" and shown(area) and bar.isVisible():
            found.append(f"{owner(area.widget())} scrolls sideways ({bar.maximum()} px cut)")
    for table in window.findChildren(QAbstractItemView):
        bar = table.horizontalScrollBar()
        if shown(table) and table.model() is not None and table.model().rowCount() and \
                bar.maximum() > 0 and table.objectName() != "matrix":  # a tensor scrolls
            found.append(f"a {type(table).__name__} in {owner(table)} scrolls sideways "
                         f"({bar.maximum()} px cut)")
    for plot in window.findChildren(pg.GraphicsView):
        room = seen(plot)  # the part not scrolled away or cut
        checked += [plot] if shown(plot) else []
        if shown(plot) and (room.height() < PLOT_HEIGHT or room.width() < PLOT_WIDTH):
            found.append(f"a plot of {room.width()}×{room.height()} in {owner(plot)}")
        elif fold and plot.isVisible() and room.height() < plot.height() and \
                shown(scrolled_in(plot)):  # in a shown panel, scrolled away
            found.append(f"a plot in {owner(plot)} with {plot.height() - max(room.height(), 0)}"
                         f" of its {plot.height()} px below the fold")
    for pane in window.findChildren(QTextEdit) + window.findChildren(QPlainTextEdit):
        if not shown(pane) or not pane.isReadOnly():
            continue
        checked.append(pane)
        line = pane.fontMetrics().lineSpacing()
        port = seen(pane.viewport()).height()
        whole = pane.document().size().height()
        if isinstance(pane, QPlainTextEdit):
            whole = whole * line  # its layout counts lines
        if port < LINES * line and whole > port:
            found.append(f"a text pane of {port / line:.1f} lines in {owner(pane)}")
    return found


def each_inner_tab(view):
    """Every page of the view's own tabs brought to the front in turn (the view itself
    once when it has none): the name of the page in front."""
    tabs = [t for t in view.findChildren(QTabWidget) if t.isVisibleTo(view)]
    yield ""
    for widget in tabs:
        start = widget.currentIndex()
        for i in range(widget.count()):
            if i != start and widget.isTabVisible(i):
                widget.setCurrentIndex(i)
                for _ in range(3):
                    QApplication.processEvents()
                yield f" ▸ {widget.tabText(i)}"
        widget.setCurrentIndex(start)


def owner(widget) -> str:
    while widget is not None and not widget.objectName().startswith("view-"):
        widget = widget.parentWidget()
    return widget.objectName() if widget is not None else "the window"


@pytest.mark.slow
@pytest.mark.parametrize("size", [(1366, 768), (1150, 700)])
def test_every_workspace_gives_every_plot_and_pane_room(qtbot, make_window, size):
    window = make_window()
    laptop(window, *size, banner=True)
    fold = size == (1366, 768)
    run_and_wait(qtbot, window, max_tokens=60)  # an output of several lines
    # the jobs that draw plots with data and titles of their own
    compare = window.view("ln_compare")
    compare.depths.setText("2, 3")
    compare.run_button.click()
    compare._compare()
    window.view("gradients").run_button.click()
    window.view("patching").request()
    qtbot.waitUntil(lambda: compare.result is not None and bool(compare.runs) and window.view(
        "gradients").report is not None and window.view("patching").sweep is not None,
        timeout=60_000)
    window.show_view("why")  # its answer fills the layer table
    qtbot.waitUntil(lambda: window.session.why is not None, timeout=60_000)
    found, checked = [], []
    for ws in WORKSPACES:
        window.workspaces.show(ws.key)
        laptop(window, *size, banner=True)
        for key in window.workspaces.members(ws.key):
            window.show_view(key)
            qtbot.waitUntil(lambda: shown(window.view(key)), timeout=60_000)
            for _ in range(3):
                QApplication.processEvents()
            before = len(checked)
            for tab in each_inner_tab(window.view(key)):
                found += [f"{ws.title} ▸ {key}{tab}: {f}" for f in lacking_room(window, checked, fold)]
                found += [f"{ws.title} ▸ {key}{tab}: cut off: {f}"
                          for f in overflowing(window.docks[key].widget())]
            assert len(checked) > before, f"{key}: nothing looked at"  # the output pane at least
            assert_all_in_view(window.graph)
    assert not found, "\n".join(dict.fromkeys(found))
    assert len({id(c) for c in checked}) >= 20  # every workspace's plots and panes
