"""The plots of "Why this token?", shared by the Why and Heads views and the CLI's --plot:
the attribution as a waterfall from the embeddings to the logit, a layers x heads grid
of values (the heads' parts of the logit, or one role's scores)."""

from __future__ import annotations

import numpy as np
import pyqtgraph as pg
from PySide6.QtGui import QFontMetrics

from ...core.attribution.direct import Attribution, Branch, Part
from ...core.gpt.nodes import FINAL_NORM, POSITION_EMBEDDING, TOKEN_EMBEDDING
from ...core.attribution.head_roles import ROLE_EVIDENCE, ROLES, HeadRoles
from ...core.attribution.why import Why
from .figures import TITLE_SIZE, offscreen_app, save_widget
from .plot_axes import add_plot, count_axis
from .plot_text import set_empty, set_ticks, set_title

UP, DOWN, TOTAL = pg.mkBrush("#2e7d32"), pg.mkBrush("#c62828"), pg.mkBrush("#1f4e8c")
DIVERGING = pg.colormap.get("CET-D1")
SCORES = pg.colormap.get("viridis")
SHORT = {TOKEN_EMBEDDING: "token embedding", POSITION_EMBEDDING: "position embedding",
         FINAL_NORM: "final norm's shift"}


def waterfall_bars(attribution: Attribution) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(bottoms, tops, is_total) per bar: each part from the running sum to the next,
    then the total from 0."""
    values = np.array([p.value for p in attribution.parts])
    ends = np.cumsum(values)
    starts = ends - values
    return (np.append(starts, 0.0), np.append(ends, ends[-1] if len(ends) else 0.0),
            np.append(np.zeros(len(values), bool), True))


ROW = 1.0  # a part's row on the waterfall's vertical axis


def waterfall_height(attribution: Attribution | None, line: float) -> int:
    """The plot height at which every part's name has a row of its own."""
    rows = 1 + (len(attribution.parts) if attribution is not None else 8)
    return int(rows * (line + 4) + 70)


def draw_waterfall(plot: pg.PlotItem, attribution: Attribution | None,
                   message: str = "Run a prompt, then ask why a token was chosen.") -> None:
    """The parts from the top (the embeddings) down to the logit, one named row each:
    a bar from the running sum before the part to the one after it, the total from 0."""
    plot.clear()
    if attribution is None:
        set_ticks(plot.getAxis("left"), [[]])
        set_empty(plot, message)
        return
    set_empty(plot, None)
    bottoms, tops, total = waterfall_bars(attribution)
    y = np.arange(len(bottoms)) * ROW
    rising = tops >= bottoms
    brushes = [TOTAL if t else (UP if r else DOWN) for t, r in zip(total, rising)]
    plot.addItem(pg.BarGraphItem(x0=np.minimum(bottoms, tops), x1=np.maximum(bottoms, tops),
                                 y=y, height=0.75 * ROW, brushes=brushes, pen=pg.mkPen(None)))
    plot.addItem(pg.InfiniteLine(pos=0, angle=90, pen=pg.mkPen("#999999")))
    names = [_short(p) for p in attribution.parts] + ["logit"]
    set_ticks(plot.getAxis("left"), [list(zip(y, names))])  # every part named
    axis = plot.getAxis("left")
    axis.setWidth(max(QFontMetrics(axis.font()).horizontalAdvance(n) for n in names) + 14)
    plot.invertY(True)
    what = "logit difference" if attribution.versus is not None else "logit"
    plot.getAxis("bottom").enableAutoSIPrefix(False)  # 0.4, not "(x0.001)" and 400
    plot.setLabel("bottom", what)
    plot.setYRange(-0.6, y[-1] + 0.6, padding=0)
    span = float(max(tops.max(), bottoms.max(), 0.0) - min(tops.min(), bottoms.min(), 0.0)) or 1.0
    plot.setXRange(min(tops.min(), bottoms.min(), 0.0) - 0.05 * span,
                   max(tops.max(), bottoms.max(), 0.0) + 0.05 * span, padding=0)
    plot.setMouseEnabled(x=False, y=False)


def _short(part: Part) -> str:
    """A part's name beside the waterfall: 'B3 attention', 'B3 feed-forward', 'tok'."""
    if part.layer is not None:
        return f"B{part.layer} {Branch.ATTENTION if part.kind == Branch.ATTENTION else Branch.FEED_FORWARD}"
    if part.node in SHORT:
        return SHORT[part.node]
    return "embeddings" if part.kind == Branch.EMBEDDING else part.kind  # the stream entering


def bar_at(attribution: Attribution, y: float) -> int | None:
    """The part at a height of the waterfall (None for the total or outside)."""
    i = int(round(y / ROW))
    return i if 0 <= i < len(attribution.parts) and abs(y - i * ROW) <= 0.4 else None


def draw_grid(plot: pg.PlotItem, values: np.ndarray | None, diverging: bool,
              message: str) -> pg.ImageItem | None:
    """A layers x heads grid (rows: blocks from 0, top first; columns: heads from 0)."""
    plot.clear()
    if values is None:
        set_empty(plot, message)
        return None
    set_empty(plot, None)
    image = pg.ImageItem(axisOrder="row-major")
    if diverging:
        top = float(np.abs(values).max()) or 1.0
        image.setColorMap(DIVERGING)
        image.setImage(values.astype(np.float32), levels=(-top, top))
    else:
        image.setColorMap(SCORES)
        image.setImage(values.astype(np.float32), levels=(0.0, 1.0))
    plot.addItem(image)
    plot.invertY(True)
    count_axis(plot, "left", centred=True)
    count_axis(plot, "bottom", centred=True)
    plot.setLabel("left", "block")
    plot.setLabel("bottom", "head")
    plot.setRange(xRange=(0, values.shape[1]), yRange=(0, values.shape[0]), padding=0)
    plot.setMouseEnabled(x=False, y=False)
    return image


def cell_at(values: np.ndarray, x: float, y: float) -> tuple[int, int] | None:
    layer, head = int(np.floor(y)), int(np.floor(x))
    if 0 <= layer < values.shape[0] and 0 <= head < values.shape[1]:
        return layer, head
    return None


def save_why_figure(path: str, why: Why) -> None:
    offscreen_app()
    canvas = pg.GraphicsLayoutWidget()
    canvas.setBackground("w")
    canvas.resize(1400, max(560, waterfall_height(why.attribution, 16)))
    water = add_plot(canvas, row=0, col=0)
    draw_waterfall(water, why.attribution)
    set_title(water, f"Why {why.question}", size=TITLE_SIZE)
    a = why.attribution
    if a.exact:
        grid = add_plot(canvas, row=0, col=1)
        draw_grid(grid, a.heads, True, "")
        set_title(grid, "each head's part", size=TITLE_SIZE)
        canvas.ci.layout.setColumnStretchFactor(0, 3)
    save_widget(canvas, path)


def save_heads_figure(path: str, roles: HeadRoles) -> None:
    offscreen_app()
    canvas = pg.GraphicsLayoutWidget()
    canvas.setBackground("w")
    shown = ROLES if roles.copying is not None else ROLES[:-1]
    canvas.resize(330 * len(shown), 420)
    for col, role in enumerate(shown):
        plot = add_plot(canvas, row=0, col=col)
        draw_grid(plot, roles.scores[role], False, "")
        set_title(plot, role, size=TITLE_SIZE)
        plot.setToolTip(ROLE_EVIDENCE[role])
    save_widget(canvas, path)
