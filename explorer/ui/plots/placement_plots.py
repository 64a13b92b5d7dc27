"""The stability experiments for every norm placement drawn side by side: each block's
last feed-forward Linear's gradient at initialisation, the residual stream's size after
each block, and (when trained) the training loss with and without warm-up — one colour
a placement, the same in every plot. The CLI's figure and the window draw these."""

from __future__ import annotations

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import Qt

from ...core.experiments.stability import WARMUPS, Placed
from ...core.gpt.norm_position import NormPosition
from .plot_axes import add_plot, count_axis, log_axis
from .plot_text import legend_row, pen_sample, set_title

COLOURS = {NormPosition.PRE: "#1f4e8c", NormPosition.POST: "#d2691e",
           NormPosition.BRANCH: "#2e7d32", NormPosition.PERI: "#8e24aa",
           NormPosition.PARALLEL: "#00838f", NormPosition.DYT: "#6d4c41"}
TITLES = {"grad": "Gradient per block at initialisation", "residual": "Stream after each block",
          "loss": "Training loss (solid: warm-up; dashed: none)"}


def pen(position: NormPosition, dashed: bool = False) -> pg.QtGui.QPen:
    return pg.mkPen(COLOURS[position], width=2, style=Qt.DashLine if dashed else Qt.SolidLine)


def placement_plots(layout: pg.GraphicsLayoutWidget, row: int, positions, trained: bool,
                    size: str = "10pt") -> dict[str, pg.PlotItem]:
    """A legend of the placements on ``row``, their plots on the row under it."""
    legend_row(layout.ci, [(pen_sample(pen(p)), f"{p.title}: {p.formula}") for p in positions],
               row=row, colspan=3, columns=3)
    keys = ("grad", "residual", "loss") if trained else ("grad", "residual")
    plots = {key: add_plot(layout, row=row + 1, col=i) for i, key in enumerate(keys)}
    for key, plot in plots.items():
        set_title(plot, TITLES[key], size=size)
        plot.showGrid(x=True, y=True, alpha=0.2)
    for key in ("grad", "residual"):
        count_axis(plots[key], "bottom")
        plots[key].setLabel("bottom", "block")
    log_axis(plots["grad"], "left")
    plots["grad"].setLogMode(y=True)
    plots["grad"].setLabel("left", "|∂loss/∂W| of the last Linear")
    plots["residual"].setLabel("left", "mean per-token L2 norm")
    if trained:
        plots["loss"].setLabel("bottom", "step")
        plots["loss"].setLabel("left", "cross-entropy")
    return plots


def draw_placements(plots: dict[str, pg.PlotItem], results: dict[NormPosition, Placed]) -> None:
    for position, r in results.items():
        blocks = np.arange(len(r.grad_norms))
        plots["grad"].plot(blocks, r.grad_norms, pen=pen(position), symbol="o",
                           symbolSize=4, symbolBrush=COLOURS[position])
        plots["residual"].plot(blocks, r.residual_norms, pen=pen(position), symbol="o",
                               symbolSize=4, symbolBrush=COLOURS[position])
        if "loss" in plots:
            for name, dashed in zip(WARMUPS, (False, True)):
                curve = np.array([(s, loss) for s, loss in r.losses.get(name, ()) if loss is not None],
                                 dtype=float).reshape(-1, 2)
                plots["loss"].plot(curve[:, 0], curve[:, 1], pen=pen(position, dashed))
