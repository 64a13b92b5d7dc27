"""The row under the block graph and the node colours it explains: the strip of all
blocks, then what colours the nodes — a statistic of the shown pass on a log scale (its
two ends and a count of exact zeros) or each branch's part of a logit (the Why view's
answer). While a question is open the colours are hidden: they would tell which node
changed nothing."""

from __future__ import annotations

import math

import numpy as np
from PySide6.QtGui import QColor
from PySide6.QtWidgets import QCheckBox, QHBoxLayout, QLabel

from ...core.gpt.nodes import all_hook_names, node_for_hook, order_of
from ..base.session import Session
from .contribution_colours import colour_by_why
from .graph_colours import colour, colour_bar_pixmap
from .layer_strip import LayerStrip

STATISTICS = {"std": "std", "abs-max": "absmax", "RMS": "rms", "kurtosis": "kurtosis"}
KIND_SCALE = "colour scale of its kind"


class ColourScale(QHBoxLayout):
    def __init__(self, session: Session) -> None:
        super().__init__()
        self.session = session
        self.strip = LayerStrip(session)
        self.legend = QLabel()
        self.legend.setStyleSheet("color: #444444")
        self.lo, self.hi, self.zero_note = QLabel(), QLabel(), QLabel()
        self.zero_note.setStyleSheet("color: #444444")
        self.bar = QLabel()  # its picture drawn when first shown
        self.per_block = QCheckBox("per block")
        self.per_block.setToolTip("The colour scale from the drawn block's own extremes "
                                  "(unticked: the whole model's, one colour one value on "
                                  "every block)")
        self.per_kind = QCheckBox("per kind")
        self.per_kind.setToolTip("A scale for each kind of node (norms, Linears, attention's "
                                 "scores, …) from that kind's extremes in the whole model: "
                                 "attention's steps no longer all sit at the top end; a "
                                 "node's tooltip names its kind's ends")
        for box, other in ((self.per_block, self.per_kind), (self.per_kind, self.per_block)):
            box.toggled.connect(lambda on, other=other: on and other.setChecked(False))
        self.addWidget(self.strip.caption)
        self.addWidget(self.strip, 1)
        for w in (self.legend, self.lo, self.bar, self.hi, self.zero_note, self.per_block,
                  self.per_kind):
            self.addWidget(w)
        self.show_ends(False)
        self._pass, self._key, self._ends, self._said = None, None, None, ""  # _changed's

    def show_ends(self, shown: bool) -> None:
        if shown and self.bar.pixmap().isNull():
            self.bar.setPixmap(colour_bar_pixmap(90, 12))
        for w in (self.lo, self.bar, self.hi):
            w.setVisible(shown)

    def by_statistic(self, items: dict, label: str) -> None:
        """Colour ``items`` (node name → NodeItem) by a statistic of the shown pass."""
        self.strip.totals = None
        stat = STATISTICS[label]
        current = None if self.session.covered else self.session.current
        values = {}
        for name in items:
            view = current.views.get(name) if current else None
            if view is not None:
                v = getattr(view.stats, stat)
                if np.isfinite(v):
                    values[name] = v
        zeros = [n for n, v in values.items() if v == 0]  # no place on a log scale
        logs = {n: math.log10(abs(v)) for n, v in values.items() if v != 0}
        # one scale for every block: its ends are the whole model's nodes (attention's
        # steps, opened on one block, not among them), so a colour means the same value
        # whichever block is drawn and whatever is opened; a step beyond takes the end's
        if self.per_kind.isChecked() and logs:
            self._by_kind(items, values, logs, zeros, current, stat, label)
            return
        scope = {n: v for n, v in values.items() if v != 0} if self.per_block.isChecked() \
            else self._whole_model(current, stat)
        ends = (min(scope, key=lambda n: abs(scope[n])), max(scope, key=lambda n: abs(scope[n]))) \
            if scope else None
        lo, hi = (math.log10(abs(scope[ends[0]])), math.log10(abs(scope[ends[1]]))) if ends else (0.0, 0.0)
        for name, item in items.items():
            if name in logs:
                item.set_fill(colour((logs[name] - lo) / (hi - lo) if hi > lo else 0.5))
            else:
                item.set_fill(QColor("white" if name in zeros else "#e8e8e8"))
        self.zero_note.setText(f"· {len(zeros)} node{'s' * (len(zeros) != 1)} exactly 0 (white)"
                               if zeros else "")
        self.zero_note.setVisible(bool(zeros))
        if not logs:
            self.show_ends(False)
            if values or self.session.covered:
                self.legend.setText("Colours hidden until you answer" if self.session.covered
                                    else f"{label}:")
            return
        vmin, vmax = scope[ends[0]], scope[ends[1]]
        self.legend.setText(f"{label} (log scale{self._changed(current, label, vmin, vmax)}):")
        self.lo.setText(f"{vmin:.3g}")
        self.hi.setText(f"{vmax:.3g}")
        self.show_ends(True)

    def _changed(self, current, label: str, vmin: float, vmax: float) -> str:
        """"; was a–b" when a new pass (the next snapshot of a training run, another
        prompt) moved the scale's ends: the colours changed with the scale, not only with
        the values. Said until the pass after."""
        key = (label, self.per_block.isChecked())
        if current is not self._pass:
            before = self._ends if self._key == key else None
            moved = before is not None and any(abs(a - b) > 1e-3 * max(abs(a), abs(b))
                                               for a, b in zip(before, (vmin, vmax)))
            self._said = f"; was {before[0]:.3g}–{before[1]:.3g}" if moved else ""
            self._pass = current
        self._key, self._ends = key, (vmin, vmax)
        return self._said

    def _by_kind(self, items: dict, values: dict, logs: dict, zeros: list, current, stat: str,
                 label: str) -> None:
        """Each node on its kind's own scale: that kind's extremes over the whole model
        and the nodes drawn (attention's steps, opened, among them)."""
        model = {**self._whole_model(current, stat), **{n: v for n, v in values.items() if v}}
        ends: dict = {}
        for name, v in model.items():
            kind = items[name].node.kind if name in items else self._kind(name)
            lo, hi = ends.get(kind, (abs(v), abs(v)))
            ends[kind] = (min(lo, abs(v)), max(hi, abs(v)))
        for name, item in items.items():
            if name not in logs:
                item.set_fill(QColor("white" if name in zeros else "#e8e8e8"))
                continue
            lo, hi = (math.log10(e) for e in ends[item.node.kind])
            item.set_fill(colour((logs[name] - lo) / (hi - lo) if hi > lo else 0.5))
            low, high = ends[item.node.kind]
            said = [t for t in item.toolTip().split("\n") if not t.startswith(KIND_SCALE)]
            item.setToolTip("\n".join(said + [f"{KIND_SCALE} ({item.node.kind.value}): {label} "
                                               f"{low:.3g}–{high:.3g} in the model"]))
        self.legend.setText(f"{label} (log scale per kind of node; hover a node for its ends)")
        self.show_ends(False)

    def _kind(self, name: str):
        return node_for_hook(name, order_of(self.session.model.config)).kind

    def _whole_model(self, current, stat: str) -> dict[str, float]:
        """The statistic of every node of every block in the pass, zeros left out (the
        steps inside attention only where drawn: a pass keeps them for one block at most)."""
        if current is None or self.session.model is None:
            return {}
        out = {}
        for name in all_hook_names(self.session.model.config):
            view = current.views.get(name)
            v = getattr(view.stats, stat) if view is not None else 0.0
            if np.isfinite(v) and v != 0:
                out[name] = v
        return out

    def by_why(self, items: dict) -> None:
        """Colour ``items`` by their part of the explained logit."""
        self.zero_note.hide()
        self.show_ends(False)
        why = None if self.session.covered else self.session.why
        words, self.strip.totals = colour_by_why(items, why)
        self.legend.setText(words)
        self.strip.update()
