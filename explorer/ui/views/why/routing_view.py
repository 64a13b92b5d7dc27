"""Expert routing: in a mixture of experts (Qwen3-MoE, OLMoE), the shown block's routing
for the pass on screen — a tokens × experts map of each token's weights (the k experts
it went to coloured, every other cell empty), how many tokens each expert got (the idle
ones named), the load-balancing loss the model was trained with and how spread the
router's choice is. "Whole text" maps the prompt and every token generated from it at
once, a row each, as the text grew. A click on the map selects the block's weights node.
The numbers come from the passes' captured router (core.run.routing), so no job is
needed."""

from __future__ import annotations

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import Qt
from PySide6.QtWidgets import QCheckBox, QHBoxLayout, QLabel, QVBoxLayout, QWidget

from ....core.gpt.nodes import Role, block_hook_name, block_title, order_of, role
from ....core.run.routing import RoutingMap, routing_map, text_routing
from ...base.lazy import LazyRefresh
from ...base.session import Session
from ...base.view_jobs import EngineLike
from ...plots.plot_axes import add_plot, colour_bar, count_axis
from ...plots.plot_text import set_empty, set_ticks, set_title
from ...plots.why_plots import SCORES

DENSE = ("This model's feed-forward is dense: no router and no experts. Open a mixture of "
         "experts (Qwen3-MoE, OLMoE, or the qwen3moe-tiny preset) to see its routing.")
EMPTY = "Run a prompt (Ctrl+Enter) to see which experts each token goes to."
MAX_NAMED = 40  # token rows named on the axis; beyond, every k-th


class RoutingView(LazyRefresh, QWidget):
    def __init__(self, session: Session, engine: EngineLike) -> None:
        super().__init__()
        self.session = session
        self.map: RoutingMap | None = None
        self.note = QLabel(EMPTY)
        self.note.setWordWrap(True)
        self.canvas = pg.GraphicsLayoutWidget()
        self.canvas.setBackground("w")
        self.grid = add_plot(self.canvas, row=0, col=0, colspan=2)
        self.bar = colour_bar(colorMap=SCORES, values=(0.0, 1.0), interactive=False, width=14)
        self.bar.setImageItem(pg.ImageItem(), insert_in=self.grid)
        self.load = add_plot(self.canvas, row=1, col=0)
        self.depth = add_plot(self.canvas, row=1, col=1)  # every block's routing entropy
        self.canvas.ci.layout.setRowStretchFactor(0, 3)
        self.canvas.ci.layout.setRowStretchFactor(1, 1)
        for plot in (self.grid, self.load, self.depth):
            count_axis(plot, "bottom", centred=plot is not self.depth)
            plot.setLabel("bottom", "block" if plot is self.depth else "expert")
            plot.setMouseEnabled(x=False, y=False)
        self.load.setLabel("left", "tokens")
        self.depth.setLabel("left", "bits")
        self.canvas.setMinimumHeight(2 * 200)
        self.whole = QCheckBox("Whole text (Alt+W)")
        self.whole.setShortcut("Alt+W")
        self.whole.setToolTip("Map the prompt and every token generated from it, a row each "
                              "(the shown block), instead of the pass on screen")
        self.whole.toggled.connect(lambda _: self.request_refresh())
        layout = QVBoxLayout(self)
        top = QHBoxLayout()
        top.addWidget(self.note, 1)
        top.addWidget(self.whole, 0, Qt.AlignTop)
        layout.addLayout(top)
        layout.addWidget(self.canvas, 1)
        session.on_pass(self.request_refresh)
        session.stepsChanged.connect(self.request_refresh)
        session.layerChanged.connect(lambda _: self.request_refresh())
        session.modelChanged.connect(self.request_refresh)
        self.canvas.scene().sigMouseClicked.connect(self._clicked)
        self.redraw()

    def _clicked(self, _event) -> None:
        """A click on the map selects the shown block's routing weights in the graph."""
        info = self.session.model
        key = role(order_of(info.config), Role.ROUTING) if info is not None else None
        if key is not None and self.map is not None:
            self.session.set_node(block_hook_name(self.session.layer, key))

    def redraw(self) -> None:
        info, current = self.session.model, self.session.current
        order = order_of(info.config) if info is not None else None
        for plot in (self.grid, self.load, self.depth):
            plot.clear()
        self.map = None
        self.entropies: list[float] = []
        if order is None or role(order, Role.ROUTING) is None:
            self._say(DENSE if info is not None else EMPTY)
            return
        layer = self.session.layer
        text = text_routing(self.session.prompt, self.session.steps, info.config, layer) \
            if self.whole.isChecked() else None
        self.map = text[0] if text is not None else \
            routing_map(current.views, info.config, layer) if current is not None else None
        if self.map is None:
            self._say(EMPTY if current is None else
                      "This pass kept no router weights for this block (a generation step "
                      "keeps the shown token only): run the prompt again.")
            return
        maps = [routing_map(current.views, info.config, i) for i in range(info.config.n_layers)]
        self.entropies = [float(m.entropy_bits.mean()) for m in maps if m is not None]
        self._draw_depth(self.entropies, self.map.uniform_bits, layer)
        # a generated step: its one token, named by its step; the whole text: each token
        piece = self.session.tokenizer.token_piece
        self._draw(self.map, [piece(i) for i in text[1]] if text is not None else
                   [f"step {current.step}"] if current.one_position else current.pieces)
        title = block_title(layer, info.config.n_layers)
        idle = self.map.idle
        whole = f" (prompt and {len(text[1]) - len(self.session.prompt.ids)} generated)" \
            if text is not None else ""
        self.note.setText(
            f"{title}{whole}: each token's weights on its {self.map.k} of {self.map.weights.shape[1]} "
            f"experts (empty: not routed there). Load-balancing loss {self.map.balance_loss:.3f} "
            f"({self.map.k} if perfectly balanced); routing entropy "
            f"{self.map.entropy_bits.mean():.2f} of {self.map.uniform_bits:.2f} bits. "
            + (f"Idle here: expert{'s' if len(idle) > 1 else ''} {', '.join(map(str, idle))}."
               if idle else "Every expert got a token."))

    def _say(self, text: str) -> None:
        self.note.setText(text)
        self.bar.setVisible(False)
        dense = text == DENSE
        set_empty(self.grid, "No experts: a dense feed-forward" if dense else "Run a prompt")
        set_empty(self.load, "No experts" if dense else "Run a prompt")
        set_empty(self.depth, "No router" if dense else "Run a prompt")

    def _draw(self, routing: RoutingMap, pieces: list[str]) -> None:
        t, n = routing.weights.shape
        shown = np.where(routing.weights != 0, routing.weights, np.nan).astype(np.float32)
        image = pg.ImageItem(shown, axisOrder="row-major", levels=(0.0, 1.0))
        image.setColorMap(SCORES)
        set_empty(self.grid, None)
        self.grid.addItem(image)
        self.grid.invertY(True)
        self.grid.setRange(xRange=(0, n), yRange=(0, t), padding=0)
        self.bar.setVisible(True)
        self.bar.setImageItem(image)
        step = max(1, int(np.ceil(t / MAX_NAMED)))
        names = pieces if len(pieces) == t else [str(i) for i in range(t)]
        label = (lambda i: names[i]) if len(pieces) == 1 else (lambda i: f"{i} {names[i]!r}"[:14])
        set_ticks(self.grid.getAxis("left"), [[(i + 0.5, label(i)) for i in range(0, t, step)]])
        set_title(self.grid, f"Routing weights, {t} tokens × {n} experts")
        tokens = routing.tokens
        bars = pg.BarGraphItem(x=np.arange(n) + 0.5, height=tokens, width=0.8,
                               brush=pg.mkBrush("#4c72b0"))
        set_empty(self.load, None)
        self.load.addItem(bars)
        self.load.setRange(xRange=(0, n), yRange=(0, max(1, int(tokens.max()))), padding=0.05)
        set_title(self.load, "Tokens routed to each expert")

    def _draw_depth(self, entropies: list[float], uniform: float, shown: int) -> None:
        """Each block's mean routing entropy, the shown block marked, the uniform level
        (a router that cannot choose) dashed."""
        set_empty(self.depth, None)
        blocks = np.arange(len(entropies))
        self.depth.addItem(pg.PlotDataItem(blocks, entropies, pen=pg.mkPen("#4c72b0", width=2),
                                           symbol="o", symbolSize=6, symbolBrush="#4c72b0"))
        self.depth.addItem(pg.InfiniteLine(uniform, angle=0, pen=pg.mkPen("#999", style=Qt.DashLine)))
        if shown < len(entropies):
            self.depth.addItem(pg.ScatterPlotItem([shown], [entropies[shown]], size=12,
                                                  brush=None, pen=pg.mkPen("#d2691e", width=2)))
        self.depth.setRange(xRange=(-0.5, max(len(entropies) - 0.5, 0.5)), yRange=(0, uniform * 1.05),
                            padding=0)
        set_title(self.depth, "Routing entropy per block")
