"""The activation: the model's tanh-approximated GELU, the exact erf GELU and ReLU
(optionally their derivatives), with the real GELU inputs of the selected layer and step
overlaid as a histogram on a second axis, and where those inputs fall. On a Llama block,
its SiLU beside the exact GELU and ReLU, with the gate's real inputs (fc1's values) and
the share of gates nearly shut."""

from __future__ import annotations

import numpy as np
import pyqtgraph as pg
from PySide6.QtWidgets import QCheckBox, QGraphicsItem, QHBoxLayout, QLabel, QVBoxLayout, QWidget

from ...plots.plot_axes import add_plot
from ....core.run.analysis import SHUT, gelu_curves, gelu_input_shares, silu_curve, silu_input_shares
from ....core.gpt.nodes import Kind, block_hook_name, block_title, node_for_hook, order_of, role, Role
from ...base.lazy import LazyRefresh
from ...plots.plot_text import legend_row
from ...base.session import Session
from ...base.view_jobs import EngineLike


class GeluView(LazyRefresh, QWidget):
    def __init__(self, session: Session, engine: EngineLike) -> None:
        super().__init__()
        self.session = session
        self.curves = gelu_curves(-4.0, 4.0, 801)
        self._waiting = False  # the layer's GELU inputs are still being counted
        self.canvas = pg.GraphicsLayoutWidget()
        self.canvas.setBackground("w")
        self.plot = add_plot(self.canvas, row=1, col=0)
        self.plot.setLabel("bottom", "x (GELU input)")
        self.plot.setLabel("left", "GELU(x)")
        self.plot.showGrid(x=True, y=True, alpha=0.2)
        c = self.curves
        self.lines = {
            "tanh": self.plot.plot(c.x, c.tanh, pen=pg.mkPen("#1f4e8c", width=2.5),
                                   name="GELU, tanh approximation (the model)"),
            "exact": self.plot.plot(c.x, c.exact, pen=pg.mkPen("#d2691e", width=2, style=pg.QtCore.Qt.DashLine),
                                    name="GELU, exact (erf)"),
            "relu": self.plot.plot(c.x, c.relu, pen=pg.mkPen("#888888", width=1.5), name="ReLU"),
        }
        self.deriv = {
            "tanh": self.plot.plot(c.x, c.d_tanh, pen=pg.mkPen("#1f4e8c", width=1, style=pg.QtCore.Qt.DotLine),
                                   name="derivatives"),
            "exact": self.plot.plot(c.x, c.d_exact, pen=pg.mkPen("#d2691e", width=1, style=pg.QtCore.Qt.DotLine)),
            "relu": self.plot.plot(c.x, c.d_relu, pen=pg.mkPen("#888888", width=1, style=pg.QtCore.Qt.DotLine)),
        }
        # The curves never change: keep them as pixmaps, so a new pass, which changes
        # only the bars, does not redraw 6 x 801 points of wide and dashed lines (~30 ms).
        for line in [*self.lines.values(), *self.deriv.values()]:
            line.setCacheMode(QGraphicsItem.DeviceCoordinateCache)
        self.plot.setXRange(-4, 4, padding=0)
        self.plot.setYRange(-0.5, 4, padding=0)
        self._input_bars()
        self.legend = legend_row(self.canvas.ci, [
            (self.lines["tanh"], "GELU, tanh (the model)"), (self.lines["exact"], "GELU, exact"),
            (self.lines["relu"], "ReLU"), (self.deriv["tanh"], "derivatives"),
            (self.hist_bars, "GELU inputs (right axis)")], columns=2)

        self.show_deriv = QCheckBox("Derivatives")
        self.show_deriv.toggled.connect(self._toggle_deriv)
        self._toggle_deriv(False)
        self.info = QLabel()
        self.info.setWordWrap(True)
        top = QHBoxLayout()
        top.addWidget(self.show_deriv)
        top.addStretch(1)
        layout = QVBoxLayout(self)
        layout.addLayout(top)
        layout.addWidget(self.canvas, 1)
        layout.addWidget(self.info)
        self._silu = False
        session.on_pass(self.request_refresh)
        session.layerChanged.connect(self.request_refresh)
        session.modelChanged.connect(self._set_family)
        self._set_family()
        session.completed.connect(lambda: self._waiting and self.request_refresh())

    def _input_bars(self) -> None:
        """The real GELU inputs of this layer as bars, on a second y axis."""
        self.hist_box = pg.ViewBox()
        item = self.plot
        item.showAxis("right")
        item.scene().addItem(self.hist_box)
        item.getAxis("right").linkToView(self.hist_box)
        item.getAxis("right").setLabel("share of GELU inputs per bin")
        self.hist_box.setXLink(item)
        self.hist_bars = pg.BarGraphItem(x=[0], height=[0], width=0.2, brush=(60, 160, 90, 90), pen=None)
        self.hist_box.addItem(self.hist_bars)
        item.vb.sigResized.connect(lambda: self.hist_box.setGeometry(item.vb.sceneBoundingRect()))

    def _toggle_deriv(self, on: bool) -> None:
        for line in self.deriv.values():
            line.setVisible(on)

    def _set_family(self) -> None:
        """The model's non-linearity drawn as the model's: GELU (tanh) or SiLU."""
        info = self.session.model
        order = order_of(info.config) if info is not None else None
        activation = role(order, Role.ACTIVATION) if order is not None else None
        # a mixture of experts: every expert's SwiGLU gates with SiLU, no node of its own
        silu = order is not None and (activation is None or node_for_hook(
            block_hook_name(0, activation), order).kind == Kind.SILU)
        if silu == self._silu:
            return
        self._silu = silu
        c = self.curves
        y, d = silu_curve(c.x) if silu else (c.tanh, c.d_tanh)
        self.lines["tanh"].setData(c.x, y)
        self.deriv["tanh"].setData(c.x, d)
        what = "SiLU" if silu else "GELU"
        self.plot.setLabel("bottom", "x (SiLU input: fc1's value, the gate)" if silu else "x (GELU input)")
        self.plot.setLabel("left", f"{what}(x)")
        self.plot.getAxis("right").setLabel(f"share of {what} inputs per bin")
        self.legend.clear()
        for item, text in ((self.lines["tanh"], "SiLU (the model)" if silu else "GELU, tanh (the model)"),
                           (self.lines["exact"], "GELU, exact"), (self.lines["relu"], "ReLU"),
                           (self.deriv["tanh"], "derivatives"),
                           (self.hist_bars, f"{what} inputs (right axis)")):
            self.legend.addItem(item, text)

    def _block(self) -> str:
        info = self.session.model
        return block_title(self.session.layer, info.config.n_layers) if info else ""

    def redraw(self) -> None:
        self._set_family()
        c = self.curves
        gap = ("SiLU(x) = x · σ(x), computed exactly." if self._silu else
               f"Largest |tanh approximation − exact| on [−4, 4]: {c.max_gap:.2e} at x = "
               f"{c.max_gap_at:+.2f}.")
        info = self.session.model
        order = order_of(info.config) if info is not None else "pre"
        gate = role(order, Role.ACTIVATION_INPUT)
        what = "SiLU" if self._silu else "GELU"
        if gate is None:  # a mixture of experts: each expert gates its own tokens
            self.hist_bars.setOpts(x=[0], height=[0])
            self.info.setText(gap + " In a mixture of experts each expert's SiLU reads only the "
                              "tokens routed to it: there is no one layer of inputs to overlay.")
            return
        name = block_hook_name(self.session.layer, gate)
        view = self.session.view(name)
        if view is None:
            self.hist_bars.setOpts(x=[0], height=[0])
            self.info.setText(gap + f" Run a prompt to overlay the real {what} inputs.")
            return
        self._waiting = not view.stats.ready  # another layer than at Ctrl+Enter: a moment
        if self._waiting:
            self.hist_bars.setOpts(x=[0], height=[0])
            self.info.setText(f"{self._block()}: counting the {what} inputs… " + gap)
            return
        h = view.stats.hist_range
        counts = view.stats.hist.astype(float)
        total = max(view.stats.count, 1)
        centres = np.asarray(h.edges()[:-1]) + h.width / 2
        self.hist_bars.setOpts(x=centres, height=counts / total, width=h.width * 0.95)
        self.hist_box.setYRange(0, max(float(counts.max()) / total, 1e-6) * 1.1, padding=0)
        shares = None if self._silu else self.session.current.gelu_shares.get(name)  # the engine's
        if shares is None and view.array is not None:  # a generation step, or a SiLU's gates
            shares = (silu_input_shares if self._silu else gelu_input_shares)(view.real_rows())
        where = "prompt" if self.session.current.step is None else f"step {self.session.current.step}"
        width = view.shape[-1]  # what the count counts: vectors × the hidden width
        vectors = view.stats.count // max(width, 1)
        text = (f"{self._block()}, {where}: {vectors:,} token{'s' * (vectors != 1)} × {width:,} "
                f"values = {view.stats.count:,} {what} inputs ({name}).")
        if shares is not None and self._silu:
            text += (f" {100 * shares.negative:.1f}% are negative (SiLU gives −0.28…0 there), "
                     f"{100 * shares.dip:.1f}% lie in the dip around x ≈ −1.28, "
                     f"{100 * shares.identity:.1f}% are above 3 (SiLU ≈ identity); "
                     f"{100 * shares.shut:.1f}% of the gates are nearly shut (|SiLU| < {SHUT:g}): "
                     "fc2's value there barely passes.")
        elif shares is not None:
            text += (f" {100 * shares.negative:.1f}% are negative (GELU gives −0.17…0 there), "
                     f"{100 * shares.dip:.1f}% lie in the dip around x ≈ −0.75, "
                     f"{100 * shares.identity:.1f}% are above 3 (GELU ≈ identity).")
        outside = view.stats.under + view.stats.over
        if outside:
            text += f" {outside:,} fall outside the histogram's range [{h.lo:g}, {h.hi:g}]."
        self.info.setText(text + " " + gap)
