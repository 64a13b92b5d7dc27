"""The contribution graph: tokens across, the residual stream after each block up (the
embeddings at the bottom), and an edge wherever a head (blue, from the token it reads)
or a feed-forward block (orange, within a token) brought more than the threshold's share
of the token's next representation (core.attribution.contributions, after Ferrando &
Voita 2024). Drag the threshold; click an edge for its head or block."""

from __future__ import annotations

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import Qt
from PySide6.QtWidgets import QHBoxLayout, QLabel, QSlider, QVBoxLayout, QWidget

from ....core.attribution.contributions import MAX_TOKENS, ContributionGraph, contribution_graph
from ....core.attribution.direct import Branch
from ....core.gpt.nodes import ATTENTION, FEED_FORWARD, block_hook_name
from ...base.lazy import LazyRefresh
from ...base.session import Session
from ...base.view_jobs import EngineLike, ViewJobs
from ...plots.plot_axes import count_axis, plot_widget
from ...plots.plot_text import set_empty, set_ticks

EMPTY = "Run a prompt (Ctrl+Enter): each token's stream after every block, and what fed it."
HEAD, FF = "#1f4e8c", "#e07b00"


class ContributionsView(LazyRefresh, QWidget):
    def __init__(self, session: Session, engine: EngineLike) -> None:
        super().__init__()
        self.session = session
        self.graph: ContributionGraph | None = None
        self.shown_edges: list = []
        self.jobs = ViewJobs(engine, self._failed, status=session.set_status,
                             title="Contribution graph")
        self.threshold = QSlider(Qt.Horizontal)
        self.threshold.setRange(1, 60)
        self.threshold.setValue(4)  # the stream itself carries most of each token
        self.threshold.setToolTip("The least share of a token's next representation an edge "
                                  "must bring to be drawn")
        self.threshold.valueChanged.connect(lambda _v: self.draw())
        self.threshold_label = QLabel()
        self.note = QLabel(EMPTY)
        self.note.setWordWrap(True)
        bar = QHBoxLayout()
        bar.addWidget(QLabel("Threshold:"))
        bar.addWidget(self.threshold, 1)
        bar.addWidget(self.threshold_label)
        self.plot_widget = plot_widget()
        self.plot = self.plot_widget.getPlotItem()
        self.plot.setMouseEnabled(x=False, y=False)
        self.plot.scene().sigMouseClicked.connect(self._clicked)
        count_axis(self.plot, "left")
        self.plot.setLabel("left", "after block")
        self.plot.getAxis("left").setToolTip("0: the embeddings; n: the stream after block n")
        layout = QVBoxLayout(self)
        layout.addLayout(bar)
        layout.addWidget(self.note)
        layout.addWidget(self.plot_widget, 1)
        session.on_pass(self.request_refresh)
        session.modelChanged.connect(self._forget)
        self.draw()

    def redraw(self) -> None:
        current = self.session.current
        if current is None or self.session.model is None or current.batch is not None:
            self._forget()
            return
        ids = list(current.ids)
        self.note.setText("Computing…")
        self.jobs.run(lambda ctx: contribution_graph(ctx.model, ids, ctx.should_stop),
                      "contribution graph", finished=self._show)

    def _show(self, graph: ContributionGraph) -> None:
        self.graph = graph
        self.draw()

    def _failed(self, message: str) -> None:
        self.graph = None
        self.draw()
        self.note.setText(f"Could not compute the contributions: {message}")

    def _forget(self) -> None:
        self.jobs.forget()
        self.graph = None
        self.draw()

    def draw(self) -> None:
        share = self.threshold.value() / 100
        self.threshold_label.setText(f"{share:.0%}")
        self.plot.clear()
        graph = self.graph
        if graph is None:
            self.shown_edges = []
            set_empty(self.plot, EMPTY)
            self.note.setText(EMPTY)
            return
        set_empty(self.plot, None)
        t, layers = len(graph.ids), graph.heads.shape[0]
        self.shown_edges = graph.edges(share)
        for kind, layer, head, source, target, value in self.shown_edges:
            x = [source, target] if kind == Branch.HEAD else [target + 0.12, target + 0.12]
            self.plot.addItem(pg.PlotCurveItem(x, [layer, layer + 1], pen=pg.mkPen(
                HEAD if kind == Branch.HEAD else FF, width=1 + 6 * value)))
        xs, ys = np.meshgrid(np.arange(t), np.arange(layers + 1))
        self.plot.addItem(pg.ScatterPlotItem(xs.ravel(), ys.ravel(), size=7,
                                             brush=pg.mkBrush("#555555"), pen=None))
        step = max(1, int(np.ceil(t / 16)))
        set_ticks(self.plot.getAxis("bottom"), [[(i, repr(self.session.tokenizer.token_piece(graph.ids[i])))
                                                 for i in range(0, t, step)]])
        self.plot.setRange(xRange=(-0.5, t - 0.5), yRange=(-0.3, layers + 0.3), padding=0)
        cut = f" (the last {MAX_TOKENS} tokens)" if graph.cut else ""
        self.note.setText(f"{len(self.shown_edges)} edges of at least {share:.0%}{cut}: blue "
                          "from a head reading a token, orange from a feed-forward block.")

    def edge_at(self, x: float, y: float):
        """The drawn edge nearest a point of the plot, if within a quarter of a cell."""
        best, where = None, 0.25
        for edge in self.shown_edges:
            kind, layer, head, source, target, value = edge
            if not layer <= y <= layer + 1:
                continue
            along = y - layer
            ex = source + (target - source) * along if kind == Branch.HEAD else target + 0.12
            if abs(x - ex) < where:
                best, where = edge, abs(x - ex)
        return best

    def _clicked(self, event) -> None:
        if not self.shown_edges:
            return
        point = self.plot.vb.mapSceneToView(event.scenePos())
        edge = self.edge_at(point.x(), point.y())
        if edge is not None:
            self.select(edge)

    def select(self, edge) -> None:
        """An edge clicked: its head's attention (or the feed-forward) selected, named."""
        kind, layer, head, source, target, value = edge
        self.session.set_node(block_hook_name(layer, ATTENTION if kind == Branch.HEAD else FEED_FORWARD))
        ids = self.graph.ids
        what = f"head {head}" if kind == Branch.HEAD else "the feed-forward block"
        piece = self.session.tokenizer.token_piece
        self.note.setText(f"Block {layer}, {what}: {piece(ids[source])!r} → "
                          f"{piece(ids[target])!r}, {value:.0%} of the new representation")
