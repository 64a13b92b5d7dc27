"""The tensor inspector's statistics as words and as a file: which statistics its table
shows, in what order, and the CSV its Statistics button writes (a page of the inspector,
apart from its widgets)."""

from __future__ import annotations

import csv

from ....core.run.capture import NodeView

STAT_ROWS = [("mean", "mean"), ("std", "std"), ("min", "min"), ("max", "max"),
             ("abs-max", "absmax"), ("RMS", "rms"), ("kurtosis (excess)", "kurtosis"),
             ("share negative", "frac_neg"), ("share exact zeros", "frac_zero")]


def write_stats_csv(path: str, view: NodeView) -> None:
    s = view.stats
    with open(path, "w", newline="", encoding="utf-8") as fh:
        writer = csv.writer(fh)
        writer.writerow(["node", "statistic", "value"])
        for label, key in STAT_ROWS:
            writer.writerow([view.name, label, getattr(s, key)])
        writer.writerow([view.name, "NaN", s.n_nan])
        writer.writerow([view.name, "Inf", s.n_inf])
        writer.writerow([view.name, "top dims", " ".join(str(int(d)) for d in s.top_dims)])


def over_finite(stats) -> str:
    """Said when some values are NaN or ±inf (the masked scores' −inf above the diagonal):
    the statistics above are over the finite ones."""
    finite = stats.count - stats.n_nan - stats.n_inf
    return f"; the statistics are over its {finite:,} finite" if finite < stats.count else ""
