"""Before the first pass every plot says in one line what fills it, and shows no axes
(empty axes read as data: "count (x0.001)" from -400 to 400)."""

import pyqtgraph as pg
from PySide6.QtWidgets import QWidget

from explorer.ui.plots.plot_text import empty_message
from explorer.ui.views.registry import VIEWS
from tests.ui.alone import Alone

# plots with data before any pass: the GELU curves are the function itself, the weight
# matrices the model's own parameters
ALWAYS_DRAWN = {"gelu", "weights"}


def plots_of(widget: QWidget) -> list[pg.PlotItem]:
    found = []
    for view in widget.findChildren(pg.GraphicsView):
        found += [i for i in view.scene().items()
                  if isinstance(i, pg.PlotItem) and not isinstance(i, pg.ColorBarItem)]
    return found


def test_every_plot_of_every_view_says_what_fills_it_before_the_first_pass(qtbot):
    alone = Alone(qtbot)
    seen = 0
    for spec in VIEWS:
        if spec.key in ALWAYS_DRAWN:
            continue
        widget = alone.view(spec.cls)
        for plot in plots_of(widget):
            if not plot.isVisible():
                continue
            seen += 1
            message = empty_message(plot)
            assert message, (spec.key, plot.titleLabel.text)
            assert "\n" not in message  # one line
            assert not plot.getAxis("left").isVisible() and not plot.getAxis("bottom").isVisible()
    assert seen >= 20  # inspector, generation chart, distributions, attention, comparison, …
