"""The plots of "Why this token?", shared by the Why and Heads views and the CLI's --plot:
the attribution as a waterfall from the embeddings to the logit, a layers x heads grid
of values (the heads' parts of the logit, or one role's scores)."""

from __future__ import annotations

import numpy as np
import pyqtgraph as pg

from ...core.attribution.direct import Attribution, Part
from ...core.gpt.nodes import EMBEDDINGS, FINAL_NORM, POSITION_EMBEDDING, TOKEN_EMBEDDING
from ...core.attribution.head_roles import ROLE_EVIDENCE, ROLES, HeadRoles
from ...core.attribution.why import Why
from .figures import TITLE_SIZE, offscreen_app, save_widget
from .plot_axes import add_plot, count_axis
from .plot_text import fitted_names, set_empty, set_title

UP, DOWN, TOTAL = pg.mkBrush("#2e7d32"), pg.mkBrush("#c62828"), pg.mkBrush("#1f4e8c")
DIVERGING = pg.colormap.get("CET-D1")
SCORES = pg.colormap.get("viridis")
SHORT = {TOKEN_EMBEDDING: "tok", POSITION_EMBEDDING: "pos", EMBEDDINGS: "emb", FINAL_NORM: "shift"}


def waterfall_bars(attribution: Attribution) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(bottoms, tops, is_total) per bar: each part from the running sum to the next,
    then the total from 0."""
    values = np.array([p.value for p in attribution.parts])
    ends = np.cumsum(values)
    starts = ends - values
    return (np.append(starts, 0.0), np.append(ends, ends[-1] if len(ends) else 0.0),
            np.append(np.zeros(len(values), bool), True))


def draw_waterfall(plot: pg.PlotItem, attribution: Attribution | None,
                   message: str = "Run a prompt, then ask why a token was chosen.") -> None:
    plot.clear()
    if attribution is None:
        set_empty(plot, message)
        return
    set_empty(plot, None)
    bottoms, tops, total = waterfall_bars(attribution)
    x = np.arange(len(bottoms))
    rising = tops >= bottoms
    brushes = [TOTAL if t else (UP if r else DOWN) for t, r in zip(total, rising)]
    plot.addItem(pg.BarGraphItem(x=x, y0=np.minimum(bottoms, tops),
                                 y1=np.maximum(bottoms, tops), width=0.8, brushes=brushes,
                                 pen=pg.mkPen(None)))
    plot.addItem(pg.InfiniteLine(pos=0, angle=0, pen=pg.mkPen("#999999")))
    names = [_short(p) for p in attribution.parts] + ["logit"]
    fitted_names(plot, names)
    what = "logit difference" if attribution.versus is not None else "logit"
    plot.setLabel("left", what)
    plot.setXRange(-0.6, len(names) - 0.4, padding=0)
    plot.setMouseEnabled(x=False, y=False)


def _short(part: Part) -> str:
    """A bar's name under the waterfall: 'B3 attn', 'tok', 'shift'."""
    if part.layer is not None:
        return f"B{part.layer + 1} {'attn' if part.kind == 'attention' else 'ffn'}"
    return SHORT.get(part.node, part.kind)


def bar_at(attribution: Attribution, x: float) -> int | None:
    """The part under an x position of the waterfall (None for the total or outside)."""
    i = int(round(x))
    return i if 0 <= i < len(attribution.parts) and abs(x - i) <= 0.4 else None


def draw_grid(plot: pg.PlotItem, values: np.ndarray | None, diverging: bool,
              message: str) -> pg.ImageItem | None:
    """A layers x heads grid (rows: blocks from 1, top first; columns: heads from 1)."""
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
    count_axis(plot, "left", centred=True, first=1)
    count_axis(plot, "bottom", centred=True, first=1)
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
    canvas.resize(1400, 560)
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
