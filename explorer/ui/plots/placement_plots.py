"""The stability experiments for every norm placement drawn side by side: each block's
last feed-forward Linear's gradient at initialisation, the residual stream's size after
each block, and (when trained) the training loss with and without warm-up — one colour
a placement, the same in every plot. The CLI's figure and the window draw these."""

from __future__ import annotations

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import Qt

from ...core.experiments.stability import LAST, WARMUPS, Measure, Placed
from ...core.gpt.norm_position import NormPosition
from .plot_axes import add_plot, count_axis, log_axis
from .plot_text import legend_row, pen_sample, set_empty, set_title

COLOURS = {NormPosition.PRE: "#1f4e8c", NormPosition.POST: "#d2691e",
           NormPosition.BRANCH: "#2e7d32", NormPosition.PERI: "#8e24aa",
           NormPosition.PARALLEL: "#00838f", NormPosition.DYT: "#6d4c41"}
TITLES = {Measure.GRAD: "Gradient per block at initialisation",
          Measure.RESIDUAL: "Stream after each block (solid: at initialisation; dashed: trained)",
          Measure.LOSS: f"Training loss, mean of {LAST} steps (solid: warm-up; dashed: none)"}
TRAINED = next(iter(WARMUPS))  # the trained stream drawn: the run with the warm-up


def pen(position: NormPosition, dashed: bool = False) -> pg.QtGui.QPen:
    return pg.mkPen(COLOURS[position], width=2, style=Qt.DashLine if dashed else Qt.SolidLine)


def legend(layout: pg.GraphicsLayoutWidget, row: int, positions, colspan: int = 3,
           formulas: bool = True) -> None:
    """The placements' colours on a row of their own (three a line), with their
    formulas when asked, across ``colspan`` of the layout's columns."""
    legend_row(layout.ci, [(pen_sample(pen(p)), f"{p.title}: {p.formula}" if formulas else p.title)
                           for p in positions], row=row, colspan=colspan, columns=3)


def placement_plot(layout: pg.GraphicsLayoutWidget, key: Measure, row: int, col: int = 0,
                   size: str = "10pt") -> pg.PlotItem:
    """One of the plots (``TITLES``' keys), titled, its axes labelled."""
    plot = add_plot(layout, row=row, col=col)
    set_title(plot, TITLES[key], size=size)
    plot.showGrid(x=True, y=True, alpha=0.2)
    plot.getAxis("left").enableAutoSIPrefix(False)
    if key in (Measure.GRAD, Measure.RESIDUAL):
        count_axis(plot, "bottom")
        plot.setLabel("bottom", "block")
    if key == Measure.GRAD:
        log_axis(plot, "left")
        plot.setLogMode(y=True)
        plot.setLabel("left", "|∂loss/∂W| of the last Linear")
    elif key == Measure.RESIDUAL:  # trained, a stream can be a hundred times the fresh one
        log_axis(plot, "left")
        plot.setLogMode(y=True)
        plot.setLabel("left", "mean per-token L2 norm")
    else:
        plot.setLabel("bottom", "step")
        plot.setLabel("left", "cross-entropy")
    return plot


def placement_plots(layout: pg.GraphicsLayoutWidget, row: int, positions, trained: bool,
                    size: str = "10pt") -> dict[Measure, pg.PlotItem]:
    """A legend of the placements on ``row``, their plots side by side under it."""
    legend(layout, row, positions)
    keys = tuple(Measure) if trained else (Measure.GRAD, Measure.RESIDUAL)
    return {key: placement_plot(layout, key, row + 1, i, size) for i, key in enumerate(keys)}


def running_mean(curve: list[list[float]], n: int = LAST) -> np.ndarray:
    """(step, mean loss of the ``n`` steps up to it) for each step from the n-th, the
    steps whose loss was not finite left out."""
    points = np.array([(s, loss) for s, loss in curve if loss is not None],
                      dtype=float).reshape(-1, 2)
    if len(points) < n:
        return points
    means = np.convolve(points[:, 1], np.ones(n) / n, mode="valid")
    return np.column_stack([points[n - 1:, 0], means])


def draw_placements(plots: dict[Measure, pg.PlotItem], results: dict[NormPosition, Placed]) -> None:
    for plot in plots.values():
        set_empty(plot, None)
    for position, r in results.items():
        blocks = np.arange(len(r.grad_norms))
        lines = [(Measure.GRAD, r.grad_norms, False), (Measure.RESIDUAL, r.residual_norms, False)]
        if TRAINED in r.trained_residual_norms:
            lines.append((Measure.RESIDUAL, r.trained_residual_norms[TRAINED], True))
        for key, values, dashed in lines:
            if key in plots:
                plots[key].plot(blocks, values, pen=pen(position, dashed), symbol="o",
                                symbolSize=4, symbolBrush=COLOURS[position])
        if Measure.LOSS in plots:
            for name, dashed in zip(WARMUPS, (False, True)):
                curve = running_mean(r.losses.get(name, []))
                plots[Measure.LOSS].plot(curve[:, 0], curve[:, 1], pen=pen(position, dashed))
