"""GELU: the model's tanh-approximated GELU, the exact erf GELU and ReLU (optionally
their derivatives), with the real GELU inputs of the selected layer and step overlaid
as a histogram on a second axis, and where those inputs fall."""

from __future__ import annotations

import numpy as np
import pyqtgraph as pg
from PySide6.QtWidgets import QCheckBox, QGraphicsItem, QHBoxLayout, QLabel, QVBoxLayout, QWidget

from ...plots.plot_axes import add_plot
from ....core.run.analysis import gelu_curves, gelu_input_shares
from ....core.gpt.nodes import GELU_INPUT, block_hook_name, block_title
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
        session.on_pass(self.request_refresh)
        session.layerChanged.connect(self.request_refresh)
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

    def _block(self) -> str:
        info = self.session.model
        return block_title(self.session.layer, info.config.n_layers) if info else ""

    def redraw(self) -> None:
        c = self.curves
        gap = (f"Largest |tanh approximation − exact| on [−4, 4]: {c.max_gap:.2e} at x = "
               f"{c.max_gap_at:+.2f}.")
        name = block_hook_name(self.session.layer, GELU_INPUT)
        view = self.session.view(name)
        if view is None:
            self.hist_bars.setOpts(x=[0], height=[0])
            self.info.setText(gap + " Run a prompt to overlay the real GELU inputs.")
            return
        self._waiting = not view.stats.ready  # another layer than at Ctrl+Enter: a moment
        if self._waiting:
            self.hist_bars.setOpts(x=[0], height=[0])
            self.info.setText(f"{self._block()}: counting the GELU inputs… " + gap)
            return
        h = view.stats.hist_range
        counts = view.stats.hist.astype(float)
        total = max(view.stats.count, 1)
        centres = np.asarray(h.edges()[:-1]) + h.width / 2
        self.hist_bars.setOpts(x=centres, height=counts / total, width=h.width * 0.95)
        self.hist_box.setYRange(0, max(float(counts.max()) / total, 1e-6) * 1.1, padding=0)
        shares = self.session.current.gelu_shares.get(name)  # counted by the engine
        if shares is None and view.array is not None:  # a generation step: one vector
            shares = gelu_input_shares(view.real_rows())  # (padding left out)
        where = "prompt" if self.session.current.step is None else f"step {self.session.current.step}"
        width = view.shape[-1]  # what the count counts: vectors × the hidden width
        vectors = view.stats.count // max(width, 1)
        text = (f"{self._block()}, {where}: {vectors:,} token{'s' * (vectors != 1)} × {width:,} "
                f"values = {view.stats.count:,} GELU inputs ({name}).")
        if shares is not None:
            text += (f" {100 * shares.negative:.1f}% are negative (GELU gives −0.17…0 there), "
                     f"{100 * shares.dip:.1f}% lie in the dip around x ≈ −0.75, "
                     f"{100 * shares.identity:.1f}% are above 3 (GELU ≈ identity).")
        outside = view.stats.under + view.stats.over
        if outside:
            text += f" {outside:,} fall outside the histogram's range [{h.lo:g}, {h.hi:g}]."
        self.info.setText(text + " " + gap)
