"""Figures without a window: the offscreen rendering behind ``--screenshot`` and the
CLI's ``--plot`` options, and the plots that a view and a CLI figure share (Pre-LN vs
Post-LN, the loss curve), so that the CLI imports no view."""

from __future__ import annotations

import os
import sys
from enum import StrEnum

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import Qt

from ...core.experiments.ln_compare import PRE_POST, GradientResult, RunSummary
from ...core.experiments.training import TrainSettings
from ...core.experiments.stability import Measure
from ...core.gpt.nodes import short_label
from .plot_axes import add_plot, count_axis, log_axis
from .plot_text import legend_row, pen_sample, set_empty, set_title

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


class Compared(StrEnum):
    """The Pre-LN / Post-LN comparison's plots: on the prompt, the residual stream and
    the selected node's histogram; the gradient experiment's gradient per block and the
    last layer's gradient against depth."""
    RESIDUAL = "residual"
    HIST = "hist"
    GRAD = "grad"
    DEPTH = "depth"

    @property
    def title(self) -> str:  # short: a title sets the plot's minimum width
        return {Compared.RESIDUAL: "Residual stream after each block",
                Compared.HIST: "Selected node, both orders",
                Compared.GRAD: "Gradient per block",
                Compared.DEPTH: "Last layer's gradient vs depth"}[self]

    @property
    def axes(self) -> tuple[str | None, str | None]:
        """The bottom and left axes' labels (the detail the short title leaves out)."""
        return {Compared.RESIDUAL: ("block", "mean norm"), Compared.HIST: (None, None),
                Compared.GRAD: ("block", "‖∇ ff.layers.2.weight‖"),
                Compared.DEPTH: ("depth (layers)", "grad norm")}[self]

    @property
    def filled_by(self) -> str:
        """The button that fills it."""
        on_prompt = self in (Compared.RESIDUAL, Compared.HIST)
        return "Compare on the prompt" if on_prompt else "Gradient experiment"


def comparison_plots(layout: pg.GraphicsLayoutWidget, columns: int = 2,
                     keys: tuple[Compared, ...] = tuple(Compared)
                     ) -> dict[Compared, pg.PlotItem]:
    """The four plots (or those named in ``keys``), in a GraphicsLayoutWidget (shared by
    the view and the CLI figure), ``columns`` side by side: the view puts two in each
    of two tabs, one above the other, as two side by side did not fit a laptop's column
    once the histogram's title named the node and the shares outside its range."""
    # one legend for all of them, above them: the colours mean the same in each plot
    legend_row(layout.ci, [(pen_sample(PENS[p]), NAMES[p]) for p in PENS], colspan=columns)
    plots = {key: add_plot(layout, row=1 + i // columns, col=i % columns)
             for i, key in enumerate(keys)}
    for key, plot in plots.items():
        plot.setTitle(key.title, size=TITLE_SIZE)
        plot.showGrid(x=True, y=True, alpha=0.2)
        plot.getAxis("left").enableAutoSIPrefix(False)  # plain values, no "(x0.001)"
    for key, plot in plots.items():
        if key in (Compared.RESIDUAL, Compared.GRAD):  # blocks, counted from 0 as in the graph
            count_axis(plot, "bottom")
        # log axes labelled with plain numbers (0.05, 0.1, 0.2; 2, 5, 10), as many as fit
        for side in {Compared.GRAD: ("left",), Compared.DEPTH: ("left", "bottom")}.get(key, ()):
            log_axis(plot, side)
        for side, text in zip(("bottom", "left"), key.axes):
            if text:
                plot.setLabel(side, text)
        if key in (Compared.GRAD, Compared.DEPTH):
            plot.setLogMode(x=key == Compared.DEPTH, y=True)
    clear_plots(plots, list(plots))
    return plots


def clear_plots(plots: dict[Compared, pg.PlotItem], keys: list[Compared]) -> None:
    """Until there is data, each plot says what fills it, without axes."""
    for key in keys:
        plots[key].clear()
        set_empty(plots[key], f"Press “{Compared(key).filled_by}”")


def density(hist) -> np.ndarray:
    """A histogram's counts as a density (share of all values per unit of value), so that
    two histograms on different ranges and bin widths can share one plot."""
    total = max(int(hist.counts.sum()) + hist.below + hist.above, 1)
    return hist.counts / (total * np.diff(hist.edges))


def draw_runs(plots: dict[Compared, pg.PlotItem], runs: dict[str, RunSummary],
              node: str | None) -> None:
    """Each order's residual stream, and the node's histogram in both: each on the range
    of its own values (the plot spans both), as densities; the values outside each
    range are counted in the title."""
    for key in (Compared.RESIDUAL, Compared.HIST):
        plots[key].clear()
        set_empty(plots[key], None)
    outside = []
    for position, run in runs.items():
        plots[Compared.RESIDUAL].plot(np.arange(len(run.residual_norm)), run.residual_norm,
                                      pen=PENS[position], symbol="o", symbolSize=5,
                                      symbolBrush=PENS[position].color(), name=NAMES[position])
        hist = run.histograms.get(node) if node else None
        if hist is not None:
            plots[Compared.HIST].plot(hist.edges, density(hist), stepMode="center",
                                      pen=PENS[position], name=NAMES[position])
            total = max(int(hist.counts.sum()) + hist.below + hist.above, 1)
            outside.append(f"{NAMES[position]} {100 * (hist.below + hist.above) / total:.1f}%")
    label = short_label(node) if node else "no node"
    # two short lines: one long line made the plot wider than a laptop's column
    set_title(plots[Compared.HIST], f"{label}<br>outside the range: {', '.join(outside)}" if outside
              else f"{label}: not captured", size=TITLE_SIZE)
    plots[Compared.HIST].setLabel("bottom", "value (each order on its own range)")
    plots[Compared.HIST].setLabel("left", "density")
    plots[Compared.HIST].enableAutoRange()


def draw_gradients(plots: dict[Compared, pg.PlotItem], result: GradientResult,
                   depth: int) -> None:
    for key in (Compared.GRAD, Compared.DEPTH):
        plots[key].clear()
        set_empty(plots[key], None)
    set_title(plots[Compared.GRAD], f"Gradient per block, depth {depth}",
              size=TITLE_SIZE)
    for position in PRE_POST:
        per_layer = result.per_layer.get((position, depth))
        if per_layer is not None:
            plots[Compared.GRAD].plot(np.arange(len(per_layer)), per_layer, pen=PENS[position],
                                      symbol="o", symbolSize=4,
                                      symbolBrush=PENS[position].color(),
                                      name=f"{NAMES[position]}, depth {depth}")
        plots[Compared.DEPTH].plot(result.depths, result.last_layer(position), pen=PENS[position],
                                   symbol="s", symbolSize=7, symbolBrush=PENS[position].color(),
                                   name=NAMES[position])



class LossCurves:
    """The training loss on a plot: every step, and the periodic train / validation
    evaluations; the legend in a row above the plot."""

    def __init__(self, canvas: pg.GraphicsLayoutWidget) -> None:
        canvas.setBackground("w")
        self.plot = plot = add_plot(canvas, row=1, col=0)
        plot.setLabel("bottom", "step")
        plot.setLabel("left", "cross-entropy loss")
        plot.showGrid(x=True, y=True, alpha=0.2)
        self.steps = plot.plot([], [], pen=pg.mkPen("#9bb8e0", width=1), name="train (each step)")
        self.train = plot.plot([], [], pen=pg.mkPen("#1f4e8c", width=2), symbol="o",
                               symbolSize=6, symbolBrush="#1f4e8c", name="train (evaluation)")
        self.val = plot.plot([], [], pen=pg.mkPen("#d2691e", width=2), symbol="s",
                             symbolSize=6, symbolBrush="#d2691e",
                             name=f"validation (estimated on {TrainSettings().eval_batches} batches)")
        self.legend = legend_row(canvas.ci, [(c, c.name()) for c in (self.steps, self.train,
                                                                     self.val)],
                                 columns=1)  # one per line: the Train tab's plot is narrow
        self.beside: list = []  # another run's evaluations, dashed
        set_empty(plot, "Start a training run: its loss appears here, step by step")

    def name_own(self, who: str | None) -> None:
        """The shown run's evaluations named after its model in the legend (while another
        run is drawn beside it), or plainly (None)."""
        for sample, label in self.legend.items:
            for curve in (self.train, self.val):
                if sample.item is curve:
                    label.setText(f"{who}: {curve.name()}" if who else curve.name())

    def set_beside(self, name: str | None, steps: list[int] = (), train: list[float] = (),
                   val: list[float] = ()) -> None:
        """Another run's train and validation evaluations, dashed, named in the legend
        (None: none)."""
        for curve in self.beside:
            self.plot.removeItem(curve)
            self.legend.removeItem(curve)
        self.beside = []
        if name is None:
            return
        for values, colour, what in ((train, "#1f4e8c", "train"), (val, "#d2691e", "validation")):
            curve = self.plot.plot(list(steps), list(values), symbol="t", symbolSize=6,
                                   symbolBrush=colour,
                                   pen=pg.mkPen(colour, width=1.5, style=Qt.DashLine))
            self.legend.addItem(curve, f"{name}: {what}")
            self.beside.append(curve)
        if len(steps):
            set_empty(self.plot, None)

    def set_steps(self, steps: list[tuple[int, float]]) -> None:
        arr = np.asarray(steps, dtype=float).reshape(-1, 2)
        self.steps.setData(arr[:, 0], arr[:, 1])
        if len(arr):
            set_empty(self.plot, None)

    def set_evals(self, steps: list[int], train: list[float], val: list[float]) -> None:
        self.train.setData(steps, train)
        self.val.setData(steps, val)
        if len(steps):
            set_empty(self.plot, None)


def save_compare_figure(path: str, runs: dict[str, RunSummary], result: GradientResult,
                        depth: int, node: str, placed: dict | None = None) -> None:
    """The Pre-LN vs Post-LN comparison as a PNG (``gpt-explorer compare-ln --plot``),
    and under it every placement's stability experiments (``placed``) when given."""
    from .placement_plots import draw_placements, placement_plots

    offscreen_app()
    canvas = pg.GraphicsLayoutWidget()
    canvas.setBackground("w")
    canvas.resize(1400, 1400 if placed else 900)
    plots = comparison_plots(canvas)
    draw_runs(plots, runs, node)
    draw_gradients(plots, result, depth)
    if placed:
        trained = any(r.losses for r in placed.values())
        draw_placements(placement_plots(canvas, 3, list(placed), trained), placed)
    save_widget(canvas, path)


def save_loss_figure(path: str, steps: list[tuple[int, float]], evals: list[dict]) -> None:
    """The loss curve as a PNG (``gpt-explorer train --plot``)."""
    offscreen_app()
    widget = pg.GraphicsLayoutWidget()
    widget.resize(900, 500)
    curves = LossCurves(widget)
    if steps:
        curves.set_steps(steps)
    if evals:
        curves.set_evals([e["step"] for e in evals], [e["train_loss"] for e in evals],
                         [e["val_loss"] for e in evals])
    save_widget(widget, path)


FIGURES = {Measure.GRAD: "placements-gradient.png", Measure.RESIDUAL: "placements-stream.png",
           Measure.LOSS: "placements-loss.png"}  # one picture per experiment, its file's name


def save_placement_figure(path: str, key: str, results: dict,
                          note: str = "") -> None:
    """One experiment (``FIGURES``' key) for every placement measured, as a PNG: the
    legend with each placement's formula, the plot, and ``note`` (what was run) under it."""
    from .placement_plots import draw_placements, legend, placement_plot

    offscreen_app()
    canvas = pg.GraphicsLayoutWidget()
    canvas.setBackground("w")
    canvas.resize(1000, 620)
    legend(canvas, 0, list(results), colspan=1)
    plot = placement_plot(canvas, key, 1, size="12pt")
    draw_placements({key: plot}, results)
    if note:
        canvas.addLabel(note, row=2, col=0, color="#444444", size="9pt")
    save_widget(canvas, path)
