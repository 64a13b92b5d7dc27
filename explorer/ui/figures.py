"""Figures without a window: the offscreen rendering behind ``--screenshot`` and the
CLI's ``--plot`` options, and the plots that a view and a CLI figure share (Pre-LN vs
Post-LN, the loss curve), so that the CLI imports no view."""

from __future__ import annotations

import os
import sys

import numpy as np
import pyqtgraph as pg

from ..core.compare import GradientResult, RunSummary

PENS = {"pre": pg.mkPen("#1f4e8c", width=2), "post": pg.mkPen("#d2691e", width=2)}
NAMES = {"pre": "Pre-LN", "post": "Post-LN"}
TITLE_SIZE = "10pt"


def offscreen_app():
    """The QApplication, made offscreen when none runs yet (no display needed)."""
    os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
    from PySide6.QtWidgets import QApplication

    return QApplication.instance() or QApplication(sys.argv[:1])


def save_widget(widget, path: str) -> None:
    """Show, lay out and grab a widget into a PNG (ValueError if it cannot be written)."""
    app = offscreen_app()
    widget.show()
    app.processEvents()
    ok = widget.grab().save(path)
    widget.close()
    if not ok:
        raise ValueError(f"could not write {path}")


def comparison_plots(layout: pg.GraphicsLayoutWidget) -> dict[str, pg.PlotItem]:
    """The four plots, in a GraphicsLayoutWidget (shared by the view and the CLI figure)."""
    # Short titles (the detail is on the axes), so that two plots fit side by side in a
    # dock; longer ones set the layout's minimum width and the right column was cut off.
    titles = {"residual": "Residual stream after each block", "hist": "Selected node, both orders",
              "grad": "Gradient of ff.layers.2.weight per layer",
              "depth": "Last layer's gradient vs depth"}
    plots = {key: layout.addPlot(row=i // 2, col=i % 2) for i, key in enumerate(titles)}
    for key, plot in plots.items():
        plot.setTitle(titles[key], size=TITLE_SIZE)
        plot.addLegend(offset=(5, 5))
        plot.showGrid(x=True, y=True, alpha=0.2)
        plot.getAxis("left").enableAutoSIPrefix(False)  # plain values, no "(x0.001)"
    plots["residual"].setLabel("bottom", "layer")
    plots["residual"].setLabel("left", "mean norm")
    plots["grad"].setLabel("bottom", "layer")
    plots["grad"].setLabel("left", "grad norm")
    plots["depth"].setLabel("left", "grad norm")
    plots["grad"].setLogMode(y=True)
    plots["depth"].setLabel("bottom", "depth (layers)")
    plots["depth"].setLogMode(x=True, y=True)
    # Until there is data, each plot says what fills it (drawing clears the hint); the
    # log axes get a range of a few decades, or their empty 1..10 crowds its labels.
    for key, press, (y0, y1) in (("residual", "Compare on the prompt", (0, 1)),
                                 ("hist", "Compare on the prompt", (0, 1)),
                                 ("grad", "Gradient experiment", (-3, 0)),  # log10 units
                                 ("depth", "Gradient experiment", (-3, 0))):
        hint = pg.TextItem(f"press “{press}”", color="#888888", anchor=(0.5, 0.5))
        plots[key].addItem(hint)
        plots[key].setRange(xRange=(0, 1), yRange=(y0, y1), padding=0,
                            disableAutoRange=False)  # drawn data still fits itself
        hint.setPos(0.5, (y0 + y1) / 2)
    return plots


def draw_runs(plots: dict[str, pg.PlotItem], runs: dict[str, RunSummary], node: str | None) -> None:
    plots["residual"].clear()
    plots["hist"].clear()
    for position, run in runs.items():
        plots["residual"].plot(np.arange(len(run.residual_norm)), run.residual_norm, pen=PENS[position],
                               symbol="o", symbolSize=5, symbolBrush=PENS[position].color(),
                               name=NAMES[position])
        view = run.views.get(node) if node else None
        if view is not None:
            h = view.stats.hist_range
            plots["hist"].plot(np.asarray(h.edges()), view.stats.hist.astype(float), stepMode="center",
                               pen=PENS[position], name=NAMES[position])


def draw_gradients(plots: dict[str, pg.PlotItem], result: GradientResult, depth: int) -> None:
    plots["grad"].clear()
    plots["depth"].clear()
    for position in ("pre", "post"):
        per_layer = result.per_layer.get((position, depth))
        if per_layer is not None:
            plots["grad"].plot(np.arange(len(per_layer)), per_layer, pen=PENS[position], symbol="o",
                               symbolSize=4, symbolBrush=PENS[position].color(),
                               name=f"{NAMES[position]}, depth {depth}")
        plots["depth"].plot(result.depths, result.last_layer(position), pen=PENS[position], symbol="s",
                            symbolSize=7, symbolBrush=PENS[position].color(), name=NAMES[position])



class LossCurves:
    """The training loss on a plot: every step, and the periodic train / validation
    evaluations."""

    def __init__(self, plot: pg.PlotItem) -> None:
        plot.addLegend(offset=(10, 10))
        plot.setLabel("bottom", "step")
        plot.setLabel("left", "cross-entropy loss")
        plot.showGrid(x=True, y=True, alpha=0.2)
        self.steps = plot.plot([], [], pen=pg.mkPen("#9bb8e0", width=1), name="train (each step)")
        self.train = plot.plot([], [], pen=pg.mkPen("#1f4e8c", width=2), symbol="o",
                               symbolSize=6, symbolBrush="#1f4e8c", name="train (evaluation)")
        self.val = plot.plot([], [], pen=pg.mkPen("#d2691e", width=2), symbol="s",
                             symbolSize=6, symbolBrush="#d2691e", name="validation")

    def set_steps(self, steps: list[tuple[int, float]]) -> None:
        arr = np.asarray(steps, dtype=float).reshape(-1, 2)
        self.steps.setData(arr[:, 0], arr[:, 1])

    def set_evals(self, steps: list[int], train: list[float], val: list[float]) -> None:
        self.train.setData(steps, train)
        self.val.setData(steps, val)


def save_compare_figure(path: str, runs: dict[str, RunSummary], result: GradientResult,
                        depth: int, node: str) -> None:
    """The Pre-LN vs Post-LN comparison as a PNG (``gpt-explorer compare-ln --plot``)."""
    offscreen_app()
    canvas = pg.GraphicsLayoutWidget()
    canvas.setBackground("w")
    canvas.resize(1400, 900)
    plots = comparison_plots(canvas)
    draw_runs(plots, runs, node)
    plots["hist"].setTitle(f"{node}, both orders", size=TITLE_SIZE)
    draw_gradients(plots, result, depth)
    save_widget(canvas, path)


def save_loss_figure(path: str, steps: list[tuple[int, float]], evals: list[dict]) -> None:
    """The loss curve as a PNG (``gpt-explorer train --plot``)."""
    offscreen_app()
    widget = pg.PlotWidget(background="w")
    widget.resize(900, 500)
    curves = LossCurves(widget.getPlotItem())
    if steps:
        curves.set_steps(steps)
    if evals:
        curves.set_evals([e["step"] for e in evals], [e["train_loss"] for e in evals],
                         [e["val_loss"] for e in evals])
    save_widget(widget, path)
