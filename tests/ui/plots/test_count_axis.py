"""A counted axis names every count of its range after any number of redraws: a grid
drawn again over the same range (the Heads grid after the induction battery) kept an axis
that read '1' alone."""

import numpy as np
import pyqtgraph as pg

from explorer.ui.plots.plot_axes import add_plot
from explorer.ui.plots.why_plots import draw_grid
from tests.ui.plots.test_axes import tick_texts


def test_the_heads_grid_counts_every_block_and_head_after_a_redraw(qtbot):
    canvas = pg.GraphicsLayoutWidget()
    canvas.resize(500, 400)
    qtbot.addWidget(canvas)
    canvas.show()
    grid = add_plot(canvas, row=0, col=0)
    values = np.linspace(0, 1, 4 * 6).reshape(4, 6)
    for _ in range(3):  # the prompt's scores, then the battery's, then another role
        draw_grid(grid, values, False, "")
        qtbot.waitUntil(lambda: len(tick_texts(grid.getAxis("bottom"))) == 6, timeout=60_000)
        heads = [t for t, _ in tick_texts(grid.getAxis("bottom"))]
        blocks = [t for t, _ in tick_texts(grid.getAxis("left"))]
        assert heads == ["0", "1", "2", "3", "4", "5"], heads
        assert blocks == ["0", "1", "2", "3"], blocks
