"""The activation-patching figure, shared by the Patching view and ``gpt-explorer patch
--plot``: for the last position, one heatmap of nodes × layers; for every position, one
heatmap of positions × layers for each of the residual stream, attention and the
feed-forward. Cells are the share of the logit difference restored, on a diverging
scale centred on 0 (red: towards the clean answer)."""

from __future__ import annotations

from enum import StrEnum

import numpy as np
import pyqtgraph as pg
from PySide6.QtGui import QFontMetrics

from .plot_axes import add_plot, colour_bar
from ...core.gpt.nodes import ATTENTION, FEED_FORWARD, block_output
from ...core.experiments.patching import Sweep
from .figures import TITLE_SIZE, offscreen_app, save_widget
from .plot_text import set_ticks, set_title

CMAP = pg.colormap.get("CET-D1A")  # blue - white - red


class Panel(StrEnum):
    """A heatmap of the figure: every node at the last position, or one node's kind at
    every position."""
    NODES = "nodes"
    STREAM = "stream"
    ATTENTION = "attention"
    FEED_FORWARD = "feed-forward"

    @property
    def title(self) -> str:
        return {Panel.NODES: "every node, last position", Panel.STREAM: "residual stream",
                Panel.ATTENTION: "attention output",
                Panel.FEED_FORWARD: "feed-forward output"}[self]


PANELS = (Panel.STREAM, Panel.ATTENTION, Panel.FEED_FORWARD)  # every position: the classic three


def panel_keys(sweep: Sweep, norm_position: str) -> dict[Panel, str]:
    return {Panel.STREAM: block_output(norm_position), Panel.ATTENTION: ATTENTION,
            Panel.FEED_FORWARD: FEED_FORWARD}


def draw_sweep(layout: pg.GraphicsLayoutWidget, sweep: Sweep, norm_position: str = "pre") -> dict:
    """Draw the sweep; returns {panel: (plot, image, rows)} for clicks."""
    layout.clear()
    layout.setBackground("w")
    top = float(np.abs(sweep.restored).max()) or 1.0
    levels = (-top, top)
    shown = {}
    if len(sweep.positions) == 1:
        panels = {Panel.NODES: (sweep.restored[:, :, 0], list(sweep.keys))}
    else:
        pieces = sweep.corrupt_pieces
        keys = panel_keys(sweep, norm_position)
        panels = {name: (sweep.restored[sweep.keys.index(keys[name])].T,  # (positions, layers)
                         [f"{p} {pieces[p]!r}" for p in sweep.positions]) for name in PANELS}
    image = None
    for col, (name, (table, rows)) in enumerate(panels.items()):
        plot = add_plot(layout, row=0, col=col)
        image = pg.ImageItem(axisOrder="row-major")
        image.setColorMap(CMAP)
        image.setImage(table.astype(np.float32), levels=levels)
        plot.addItem(image)
        plot.invertY(True)
        plot.setLabel("bottom", "layer")
        left = plot.getAxis("left")
        fit_rows(plot, rows)
        plot.getViewBox().sigResized.connect(lambda _vb, p=plot, r=rows: fit_rows(p, r))
        if col == 0:  # the rows' names once, wide enough for the longest
            left.setWidth(max(QFontMetrics(left.font()).horizontalAdvance(r) for r in rows) + 16)
        else:
            left.setStyle(showValues=False)
        set_ticks(plot.getAxis("bottom"), [[(i + 0.5, str(i)) for i in range(sweep.layers)]])
        set_title(plot, name.title, size=TITLE_SIZE)
        plot.setMouseEnabled(x=False, y=False)
        shown[name] = (plot, image, rows)
    bar = colour_bar(colorMap=CMAP, values=levels, interactive=False, width=14)
    bar.setImageItem(image)
    layout.addItem(bar, row=0, col=len(panels))
    bar.axis.setLabel("logit difference restored")
    return shown


def fit_rows(plot: pg.PlotItem, rows: list[str]) -> None:
    """A label on every row where rows are tall enough for text, else on every k-th."""
    height = plot.getViewBox().height() or 400.0
    line = QFontMetrics(plot.getAxis("left").font()).height()
    step = max(1, int(np.ceil(line * len(rows) / max(height, 1.0))))
    set_ticks(plot.getAxis("left"), [[(i + 0.5, r) for i, r in enumerate(rows)][::step]])


def sweep_title(sweep: Sweep) -> str:
    return (f"{sweep.answer!r} vs {sweep.wrong!r}: clean {sweep.clean_diff:.3g}, corrupted "
            f"{sweep.corrupt_diff:.3g}" + (f" — {sweep.note}" if sweep.note else ""))


def save_sweep_figure(path: str, sweep: Sweep, norm_position: str = "pre") -> None:
    offscreen_app()
    canvas = pg.GraphicsLayoutWidget()
    canvas.resize(1300 if len(sweep.positions) > 1 else 700, 600)
    draw_sweep(canvas, sweep, norm_position)
    canvas.ci.addLabel(sweep_title(sweep), row=1, col=0, colspan=4)
    save_widget(canvas, path)
