"""The mouse wheel over a plot in a scrolling panel scrolls the panel; a focused plot zooms."""

import pyqtgraph as pg
from PySide6.QtCore import QPoint, QPointF, Qt
from PySide6.QtGui import QWheelEvent
from PySide6.QtWidgets import QApplication, QVBoxLayout, QWidget

from explorer.ui.widgets.scrolling import scrolling


def wheel(widget, steps=-1):
    centre = QPointF(widget.width() / 2, widget.height() / 2)
    event = QWheelEvent(centre, QPointF(widget.mapToGlobal(centre.toPoint())), QPoint(0, 0),
                        QPoint(0, 120 * steps), Qt.NoButton, Qt.NoModifier, Qt.NoScrollPhase, False)
    QApplication.sendEvent(widget, event)


def test_wheel_scrolls_the_panel_unless_the_plot_has_the_focus(qtbot):
    content = QWidget()
    layout = QVBoxLayout(content)
    plots = [pg.PlotWidget() for _ in range(3)]
    for p in plots:
        p.setMinimumHeight(400)
        p.plot([0, 1, 2], [0, 1, 4])
        layout.addWidget(p)
    area = scrolling(content)
    qtbot.addWidget(area)
    area.resize(400, 300)
    area.show()
    qtbot.waitExposed(area)
    bar = area.verticalScrollBar()
    assert bar.maximum() > 0 and bar.value() == 0
    plot = plots[0]
    before = plot.getViewBox().viewRange()
    wheel(plot.viewport())
    assert bar.value() > 0  # the panel scrolled
    assert plot.getViewBox().viewRange() == before  # the plot did not zoom
    scrolled = bar.value()
    plot.setFocus()
    qtbot.waitUntil(plot.hasFocus, timeout=60_000)
    wheel(plot.viewport())
    assert bar.value() == scrolled  # a focused plot keeps the wheel
    assert plot.getViewBox().viewRange() != before  # and zooms


def test_the_distributions_tab_scrolls_under_the_wheel(qtbot):
    from PySide6.QtWidgets import QScrollArea

    from tests.ui.alone import Alone

    alone = Alone(qtbot)
    alone.run(max_tokens=1)
    view = alone.show("Distributions")
    view.resize(700, 400)  # shorter than its plots: the tab scrolls
    qtbot.waitUntil(lambda: view.height() == 400, timeout=60_000)
    alone.settle()
    QApplication.processEvents()
    bar = view.tabs.currentWidget().findChild(QScrollArea).verticalScrollBar()
    assert bar.maximum() > 0
    plot = view.small_plots["add2"].getViewBox()
    before = plot.viewRange()
    wheel(view.small.viewport())
    assert bar.value() > 0 and plot.viewRange() == before
