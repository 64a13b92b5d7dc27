"""The gradient-flow figure, shared by the Gradients view and ``gpt-explorer gradients
--plot`` (so the CLI imports no view): along the residual stream, one node in every
block, and each block's parameters — with the shortcuts (blue) and without (orange),
on the same log axes."""

from __future__ import annotations

import numpy as np
import pyqtgraph as pg

from ...core.experiments.gradients import GradientReport, per_layer
from .figures import TITLE_SIZE, offscreen_app, save_widget
from .plot_axes import add_plot, count_axis, log_axis
from .plot_text import legend_row, pen_sample, set_empty, set_title

PENS = {True: pg.mkPen("#1f4e8c", width=2), False: pg.mkPen("#d2691e", width=2)}
NAMES = {True: "with shortcuts", False: "shortcuts removed"}
EMPTY = "Press “Compute gradients”"


def gradient_plots(layout: pg.GraphicsLayoutWidget, columns: int = 3) -> dict[str, pg.PlotItem]:
    """The three plots in a row (``columns=3``, a wide figure) or one above another
    (``columns=1``, a column a laptop's dock holds whole): there they share the block axis,
    labelled once under the last."""
    layout.setBackground("w")
    legend_row(layout.ci, [(pen_sample(PENS[s]), NAMES[s]) for s in PENS], colspan=columns)
    titles = {"residual": "Residual stream", "node": "One node, each block",
              "blocks": "Block parameters"}
    plots = {key: add_plot(layout, row=1 + i // columns, col=i % columns)
             for i, key in enumerate(titles)}
    for key, plot in plots.items():
        set_title(plot, titles[key], size=TITLE_SIZE)
        plot.showGrid(x=True, y=True, alpha=0.2)
        plot.setLogMode(y=True)
        count_axis(plot, "bottom")  # blocks: whole numbers only
        log_axis(plot, "left")
        plot.setLabel("bottom", "block")
        plot.getAxis("left").enableAutoSIPrefix(False)
    plots["residual"].setLabel("left", "gradient norm")
    plots["residual"].setLabel("bottom", "into block (0: from the embeddings)")
    if columns == 1:
        for plot in (plots["residual"], plots["node"]):
            plot.getAxis("bottom").showLabel(False)
            plot.getAxis("bottom").setStyle(showValues=False)
            plot.getAxis("bottom").setHeight(4)
        for plot in (plots["node"], plots["blocks"]):
            plot.setXLink(plots["residual"])
    plots["residual"].base_title = ("Stream into each block (0: the embeddings)" if columns == 1
                                    else "Residual stream into each block")
    set_title(plots["residual"], plots["residual"].base_title, size=TITLE_SIZE)
    for plot in plots.values():  # after the labels, which would show the axes again
        set_empty(plot, EMPTY)
    return plots


def draw_report(plots: dict[str, pg.PlotItem], report: GradientReport | None, key: str,
                n_layers: int) -> None:
    for plot in plots.values():
        plot.clear()
        set_empty(plot, None if report is not None else EMPTY)
    if report is None:
        return
    set_title(plots["node"], f"{key}, each block", size=TITLE_SIZE)
    zeros = any(0 in run.residual or 0 in run.blocks for run in report.runs)
    set_title(plots["residual"], plots["residual"].base_title + (" (0 at 1e-30)" if zeros else ""),
              size=TITLE_SIZE)
    for run in report.runs:
        name = NAMES[run.shortcut] + ("" if run.norms_kept else f", no {report.norm}")
        style = dict(pen=PENS[run.shortcut], symbol="o", symbolSize=5,
                     symbolBrush=PENS[run.shortcut].color(), name=name)
        series = {"residual": run.residual, "node": per_layer(run, key, n_layers),
                  "blocks": run.blocks}
        for name, values in series.items():
            y = np.maximum(np.asarray(values, dtype=float), 1e-30)  # log axes: no zeros
            plots[name].plot(np.arange(len(y)), y, **style)
    for plot in plots.values():
        plot.enableAutoRange()


def save_gradient_figure(path: str, report: GradientReport, key: str, n_layers: int) -> None:
    """The figure as a PNG."""
    offscreen_app()
    canvas = pg.GraphicsLayoutWidget()
    canvas.resize(1500, 520)
    plots = gradient_plots(canvas)
    draw_report(plots, report, key, n_layers)
    save_widget(canvas, path)
