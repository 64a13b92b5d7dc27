"""A plot's right-click menu is made the first time it opens, then is pyqtgraph's own:
View All, each axis, the mouse mode, the plot's options; a plot whose menu is turned
off opens none."""

import pyqtgraph as pg
from PySide6.QtCore import QPoint, Qt

from explorer.ui.plots.plot_axes import MenuWhenAsked, add_plot, plot_widget


def _right_click(qtbot, widget: pg.PlotWidget) -> None:
    box = widget.getViewBox()
    centre = box.mapRectToScene(box.boundingRect()).center()
    qtbot.mouseClick(widget.viewport(), Qt.RightButton,
                     pos=widget.mapFromScene(centre) + QPoint(0, 0))


def test_the_menu_is_made_when_a_right_click_opens_it(qtbot):
    widget = plot_widget()
    qtbot.addWidget(widget)
    widget.resize(400, 300)
    widget.show()
    qtbot.waitExposed(widget)
    box = widget.getViewBox()
    assert isinstance(box, MenuWhenAsked)
    assert box.menu is None and box.menuEnabled()
    _right_click(qtbot, widget)
    qtbot.waitUntil(lambda: box.menu is not None and box.menu.isVisible(), timeout=10_000)
    texts = [a.text() for a in box.menu.actions()]
    assert "View All" in texts and "X axis" in texts and "Y axis" in texts
    assert "Mouse Mode" in texts
    # the plot's own options join it, as pyqtgraph adds its parents' menus
    assert any(a.text() == "Plot Options" for a in box.menu.actions())
    box.menu.hide()


def test_a_plot_made_in_a_layout_asks_the_same_and_a_plot_with_its_menu_off_has_none(qtbot):
    canvas = pg.GraphicsLayoutWidget()
    qtbot.addWidget(canvas)
    plot = add_plot(canvas, row=0, col=0)
    box = plot.getViewBox()
    assert isinstance(box, MenuWhenAsked) and box.menu is None
    assert "View All" in [a.text() for a in box.getContextMenus(None)]
    other = plot_widget()
    qtbot.addWidget(other)
    other.getPlotItem().setMenuEnabled(False)  # as the candidates' menu turns it off
    assert other.getViewBox().getContextMenus(None) == []
    assert other.getViewBox().getMenu(None) is None


def test_a_colour_bar_is_pyqtgraphs_without_the_menus_it_turns_off(qtbot):
    import numpy as np

    from explorer.ui.plots.plot_axes import colour_bar
    theirs = pg.ColorBarItem(values=(-1.0, 1.0), colorMap=pg.colormap.get("viridis"),
                             interactive=False)
    ours = colour_bar(values=(-1.0, 1.0), colorMap=pg.colormap.get("viridis"), interactive=False)
    assert isinstance(ours, pg.ColorBarItem)
    # pyqtgraph's made its menu, then dropped it; ours never made one
    assert not isinstance(theirs.getViewBox(), MenuWhenAsked)
    assert isinstance(ours.getViewBox(), MenuWhenAsked)
    assert ours.getViewBox().menu is None and not ours.getViewBox().menuEnabled()
    assert ours.getViewBox().getContextMenus(None) == []
    widget = plot_widget()
    qtbot.addWidget(widget)
    image = pg.ImageItem(np.arange(6.0).reshape(2, 3))
    widget.addItem(image)
    ours.setImageItem(image, insert_in=widget.getPlotItem())
    ours.setLevels((0.0, 5.0))
    assert tuple(ours.levels()) == (0.0, 5.0)
    assert tuple(image.getLevels()) == (0.0, 5.0)
    assert image.lut is not None or image.getColorMap() is not None  # the bar's map given
