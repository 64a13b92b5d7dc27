"""Axes of counted things — blocks, layers, tokens, positions, heads, vocabulary ids:
ticks at whole numbers only (never 0.5 between two layers), as many labels as the
axis has room for by the font's metrics; and log axes labelled with numbers a reader
knows (1, 2, 5, 10, 20, …), as many as have room."""

from __future__ import annotations

import math

import pyqtgraph as pg
from PySide6.QtGui import QFontMetricsF

STEPS = (1, 2, 5)


def position_ticks(count: int, most: int = 12) -> list:
    """Whole-number ticks for ``count`` positions (never 0.5), at most ``most`` of them,
    for ``set_ticks`` on a bar chart's axis."""
    step = max(1, math.ceil(count / most))
    return [[(i, str(i)) for i in range(0, count, step)]]


class MenuWhenAsked(pg.ViewBox):
    """A plot's view box whose right-click menu (View All, each axis's range, the mouse
    mode) is made the first time it opens: pyqtgraph makes it with every plot, a third
    of the plot's making (a view of several plots is built in one turn of the window's
    event loop), and most plots' menus are never opened. The menu is the same."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **{**kwargs, "enableMenu": False})
        self.state["enableMenu"] = True  # on, made when first asked for

    def getMenu(self, ev):  # noqa: N802 (pyqtgraph's name)
        if self.menu is None and self.menuEnabled():
            self.setMenuEnabled(True)  # makes it
        return self.menu

    def getContextMenus(self, event):  # noqa: N802 (pyqtgraph's name)
        menu = self.getMenu(event)
        return menu.actions() if menu is not None and self.menuEnabled() else []


def plot_widget(**kwargs) -> pg.PlotWidget:
    """A white plot without pyqtgraph's auto-range button ("A"), which would sit over
    an axis once the range is set by hand (the views set their ranges themselves); its
    menu made when first opened (``MenuWhenAsked``)."""
    widget = pg.PlotWidget(background="w", **{"viewBox": MenuWhenAsked(), **kwargs})
    widget.getPlotItem().hideButtons()
    return widget


class _PlotMenuWhenAsked(pg.PlotItem):
    """A PlotItem on a ``MenuWhenAsked`` view box, for classes made on PlotItem."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **{"viewBox": MenuWhenAsked(), **kwargs})


class _ColourBar(pg.ColorBarItem, _PlotMenuWhenAsked):
    """pyqtgraph's colour bar, whose plot's menus (which it turns off) are never made."""


def colour_bar(**kwargs) -> pg.ColorBarItem:
    """``pg.ColorBarItem(**kwargs)``: the same bar, made without the menus it turns off
    (a third of its making)."""
    return _ColourBar(**kwargs)


def bar_plot(colour: str, left: str | None = None, bottom: str | None = None):
    """A plot of one bar a position, (the plot widget, its bars), its axes named."""
    plot = plot_widget()
    for side, text in (("left", left), ("bottom", bottom)):
        if text is not None:
            plot.setLabel(side, text)
    bars = pg.BarGraphItem(x=[0], height=[0], width=0.8, brush=colour)
    plot.addItem(bars)
    return plot, bars


def add_plot(layout, **kwargs) -> pg.PlotItem:
    """``layout.addPlot(...)``, without the auto-range button, its menu made when first
    opened."""
    plot = layout.addPlot(**{"viewBox": MenuWhenAsked(), **kwargs})
    plot.hideButtons()
    return plot


def nice_step(least: float) -> int:
    """The smallest whole 1, 2 or 5 × 10^k that is at least ``least``."""
    least = max(1.0, least)
    power = 10 ** math.floor(math.log10(least))
    for m in STEPS + (10,):
        if m * power >= least - 1e-9:
            return int(m * power)
    return int(10 * power)


class CountAxis(pg.AxisItem):
    """Whole-number ticks. ``centred``: each count is drawn as a cell from i to i + 1
    (a heatmap's rows and columns), so its tick stands at i + 0.5. Counts start at 0, as
    blocks, heads and positions do everywhere."""

    def __init__(self, orientation: str, centred: bool = False, **kwargs) -> None:
        super().__init__(orientation, **kwargs)
        self.offset = 0.5 if centred else 0.0
        self.enableAutoSIPrefix(False)

    def tickValues(self, minVal, maxVal, size):  # noqa: N802 (pyqtgraph's name)
        lo = math.ceil(min(minVal, maxVal) - self.offset - 1e-9)
        hi = math.floor(max(minVal, maxVal) - self.offset + 1e-9)
        if hi < lo or size <= 0:
            return []
        fm = QFontMetricsF(self.style.get("tickFont") or self.font())
        if self.orientation in ("bottom", "top"):
            room = max(fm.horizontalAdvance(str(v)) for v in (lo, hi)) + 10
        else:
            room = fm.height() + 2
        per_unit = size / max(abs(maxVal - minVal), 1e-9)  # pixels per count
        step = nice_step(room / per_unit)
        start = math.ceil(lo / step) * step
        return [(step, [v + self.offset for v in range(start, hi + 1, step)])]

    def tickStrings(self, values, scale, spacing):  # noqa: N802 (pyqtgraph's name)
        return [str(int(round(v - self.offset))) for v in values]


def count_axis(plot: pg.PlotItem, side: str = "bottom", centred: bool = False) -> CountAxis:
    """Give ``plot`` a counted axis on ``side`` (its label kept); one it has already is
    kept. A new axis takes the view's range now: it follows the view only from its next
    change, and a redraw over the same range makes none (the axis read '1' alone)."""
    old = plot.getAxis(side)
    if isinstance(old, CountAxis) and old.offset == (0.5 if centred else 0.0):
        return old
    axis = CountAxis(side, centred=centred)
    plot.setAxisItems({side: axis})
    axis.linkedViewChanged(plot.vb)
    if old.labelText:
        axis.setLabel(old.labelText, units=old.labelUnits)
    return axis


class LogAxis(pg.AxisItem):
    """A log10 axis (the plot in log mode) labelled with plain numbers: 1, 2, 5 × 10^k
    while their labels have room, else every decade or every k-th decade — never
    '2·10¹' or stacked minor labels (0.06, 0.07, 0.08 … on top of each other)."""

    def __init__(self, orientation: str, **kwargs) -> None:
        super().__init__(orientation, **kwargs)
        self.enableAutoSIPrefix(False)

    def tickValues(self, minVal, maxVal, size):  # noqa: N802 (pyqtgraph's name)
        lo, hi = min(minVal, maxVal), max(minVal, maxVal)
        if not (math.isfinite(lo) and math.isfinite(hi)) or size <= 0:
            return []
        fm = QFontMetricsF(self.style.get("tickFont") or self.font())
        per_decade = size / max(hi - lo, 1e-9)  # pixels per factor of 10
        vertical = self.orientation in ("left", "right")
        decades = range(math.floor(lo), math.ceil(hi) + 1)
        found = []
        # 1..9 and its thinnings: a range within one decade still gets a few labels
        for mults in ((1, 2, 5), tuple(range(1, 10)), (1, 2, 3, 5, 7), (2, 3, 5), (2, 5), (1,)):
            ticks = [d + math.log10(m) for d in decades for m in mults
                     if lo - 1e-9 <= d + math.log10(m) <= hi + 1e-9]
            found.append(ticks)
            if len(ticks) >= 2 and self._fits(ticks, per_decade, fm, vertical):
                return [(1.0, ticks)]
        for step in (2, 3, 5, 10, 20, 50):
            ticks = [float(d) for d in decades if d % step == 0 and lo - 1e-9 <= d <= hi + 1e-9]
            if len(ticks) >= 2 and self._fits(ticks, per_decade, fm, vertical):
                return [(float(step), ticks)]
        return [(1.0, found[0][:1] or found[1][:1])]  # one labelled value rather than none

    def _fits(self, ticks, per_decade, fm, vertical) -> bool:
        for a, b in zip(ticks, ticks[1:]):
            room = (fm.height() + 2 if vertical else
                    (fm.horizontalAdvance(_plain(10 ** a)) + fm.horizontalAdvance(_plain(10 ** b))) / 2 + 8)
            if (b - a) * per_decade < room:
                return False
        return True

    def tickStrings(self, values, scale, spacing):  # noqa: N802 (pyqtgraph's name)
        return [_plain(10.0 ** v) for v in values]


def log_axis(plot: pg.PlotItem, side: str) -> LogAxis:
    """Give ``plot`` a plain-number log axis on ``side`` (call setLogMode for it too)."""
    old = plot.getAxis(side)
    axis = LogAxis(side)
    plot.setAxisItems({side: axis})
    if old.labelText:
        axis.setLabel(old.labelText, units=old.labelUnits)
    return axis


def _plain(x: float) -> str:
    return f"{x:.3g}"


def nice_below(x: float) -> float:
    """The largest 1, 2 or 5 times a power of ten that is at most x (x > 0)."""
    power = 10.0 ** math.floor(math.log10(x))
    return max(m * power for m in (1, 2, 5) if m * power <= x * (1 + 1e-9))
