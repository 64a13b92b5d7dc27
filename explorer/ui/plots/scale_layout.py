"""Matrices drawn to scale, side by side, each labelled under its box: the largest scale
(pixels per row or column) at which every box and its label fit the plot, with no label
touching a box or another label. The labels keep their size in pixels whatever the scale,
so they are placed in pixels: under their box, or lower where a neighbour is in the way."""

from __future__ import annotations

from dataclasses import dataclass

GAP = 12.0  # px between one box and the next
PAD = 4.0  # px between a label and the box (or label) above it


@dataclass(frozen=True)
class ScaleLayout:
    scale: float  # pixels per row / column
    xs: list[float]  # each box's left edge, in rows / columns
    label_ys: list[float]  # each label's top, in rows / columns
    width: float  # the whole drawing, in rows / columns
    height: float


def _overlap(a, b) -> bool:
    """Rectangles (left, top, right, bottom) in pixels closer than PAD."""
    return a[0] < b[2] + PAD and b[0] < a[2] + PAD and a[1] < b[3] + PAD and b[1] < a[3] + PAD


def _extent(shapes, labels, s: float) -> ScaleLayout:
    xs, taken, x = [], [], 0.0
    for rows, cols in shapes:
        xs.append(x)
        taken.append((x * s, 0.0, (x + cols) * s, rows * s))
        x += cols + GAP / s
    ys = []
    for (rows, _), (w, h), left in zip(shapes, labels, xs):
        word = (left * s, rows * s + PAD, left * s + w, rows * s + PAD + h)
        moved = True
        while moved:  # down past whatever it would touch; each step goes lower
            moved = False
            for other in taken:
                if _overlap(word, other):
                    top = other[3] + PAD
                    word, moved = (word[0], top, word[2], top + h), True
        taken.append(word)
        ys.append(word[1] / s)
    right = max(r[2] for r in taken)
    bottom = max(r[3] for r in taken)
    return ScaleLayout(s, xs, ys, right / s, bottom / s)


def scale_layout(shapes: list[tuple[int, int]], labels: list[tuple[float, float]],
                 width: float, height: float) -> ScaleLayout:
    """``shapes``: each matrix's (rows, columns); ``labels``: each label's (width, height)
    in pixels; the plot's ``width`` × ``height`` in pixels. The largest scale that fits,
    by halving the interval (a larger scale draws larger)."""
    low, high = 1e-9, max(width, height)
    for _ in range(60):
        mid = (low + high) / 2
        drawn = _extent(shapes, labels, mid)
        if drawn.width * mid <= width and drawn.height * mid <= height:
            low = mid
        else:
            high = mid
    return _extent(shapes, labels, low)
