"""The gradient-flow figure, shared by the Gradients view and ``gpt-explorer gradients
--plot`` (so the CLI imports no view): along the residual stream, one node in every
block, and each block's parameters — with the shortcuts (blue) and without (orange),
on the same log axes."""

from __future__ import annotations

import math

import numpy as np
import pyqtgraph as pg

from ..core.gradients import GradientReport, per_layer
from .figures import TITLE_SIZE, offscreen_app, save_widget
from .plot_text import legend_row, pen_sample, set_empty, set_ticks, set_title

PENS = {True: pg.mkPen("#1f4e8c", width=2), False: pg.mkPen("#d2691e", width=2)}
NAMES = {True: "with shortcuts", False: "shortcuts removed"}
EMPTY = "Press “Compute gradients”"


def gradient_plots(layout: pg.GraphicsLayoutWidget) -> dict[str, pg.PlotItem]:
    layout.setBackground("w")
    legend_row(layout.ci, [(pen_sample(PENS[s]), NAMES[s]) for s in PENS], colspan=3)
    # short titles and one y label: three plots share a laptop's bottom area
    titles = {"residual": "Residual stream", "node": "One node, each block",
              "blocks": "Block parameters"}
    plots = {key: layout.addPlot(row=1, col=i) for i, key in enumerate(titles)}
    for key, plot in plots.items():
        set_title(plot, titles[key], size=TITLE_SIZE)
        plot.showGrid(x=True, y=True, alpha=0.2)
        plot.setLogMode(y=True)
        plot.setLabel("bottom", "block")
        plot.getAxis("left").enableAutoSIPrefix(False)
    plots["residual"].setLabel("left", "gradient norm")
    plots["residual"].setLabel("bottom", "into block (0: from the embeddings)")
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
    set_title(plots["residual"], "Residual stream" + (" (0 at 1e-30)" if zeros else ""),
              size=TITLE_SIZE)
    for run in report.runs:
        name = NAMES[run.shortcut] + ("" if run.norms_kept else ", no LayerNorm")
        style = dict(pen=PENS[run.shortcut], symbol="o", symbolSize=5,
                     symbolBrush=PENS[run.shortcut].color(), name=name)
        series = {"residual": run.residual, "node": per_layer(run, key, n_layers),
                  "blocks": run.blocks}
        for name, values in series.items():
            y = np.maximum(np.asarray(values, dtype=float), 1e-30)  # log axes: no zeros
            plots[name].plot(np.arange(len(y)), y, **style)
    for name, plot in plots.items():  # a few readable ticks on each log axis
        ys = [v for item in plot.listDataItems() for v in 10 ** item.getData()[1]]
        set_ticks(plot.getAxis("left"), [log_ticks(min(ys), max(ys))])
    ticks = [(i, str(i)) for i in range(n_layers + 1)]
    set_ticks(plots["residual"].getAxis("bottom"), [ticks[:: max(1, (n_layers + 1) // 12)]])
    for plot in plots.values():
        plot.enableAutoRange()


def log_ticks(lo: float, hi: float) -> list[tuple[float, str]]:
    """Ticks for a log axis (positions in log10): the decades, at most about six of them,
    and 2 and 5 between them when the data spans two decades or less."""
    first, last = math.floor(math.log10(lo)), math.ceil(math.log10(hi))
    step = max(1, (last - first) // 6)
    mantissas = (1, 2, 5) if last - first <= 2 else (1,)
    return [(math.log10(m) + k, f"{m * 10.0 ** k:g}") for k in range(first, last + 1, step)
            for m in mantissas]


def save_gradient_figure(path: str, report: GradientReport, key: str, n_layers: int) -> None:
    """The figure as a PNG."""
    offscreen_app()
    canvas = pg.GraphicsLayoutWidget()
    canvas.resize(1500, 520)
    plots = gradient_plots(canvas)
    draw_report(plots, report, key, n_layers)
    save_widget(canvas, path)
