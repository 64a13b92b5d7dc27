"""Pre-LN versus Post-LN, side by side: the loaded model and its twin with the norms
moved (same weights, same prompt) — residual stream size per layer with linked axes,
histograms of the selected node in both, the next-token candidates of both — and the
gradient experiment at initialisation (Xiong et al. 2020), run in the engine thread
with progress and Stop."""

from __future__ import annotations

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import QPointF, QRectF, Qt, Signal
from PySide6.QtGui import QBrush, QColor, QPainter, QPainterPath, QPen
from PySide6.QtWidgets import (QComboBox, QGraphicsScene, QGraphicsView, QHBoxLayout, QLabel,
                               QLineEdit, QProgressBar, QPushButton, QSpinBox, QVBoxLayout,
                               QWidget)

from ..core.compare import FINAL_NORM_NOTE, INITS, GradientResult, RunSummary
from ..core.nodes import BLOCK_INPUT, block_nodes, shortcut_sources
from .plot_text import set_title
from .scrolling import scrolling
from .session import Session

PENS = {"pre": pg.mkPen("#1f4e8c", width=2), "post": pg.mkPen("#d2691e", width=2)}
NAMES = {"pre": "Pre-LN", "post": "Post-LN"}
TITLE_SIZE = "10pt"


class OrderGraphs(QGraphicsView):
    """Both blocks side by side as small node graphs in forward order, with their
    shortcut arrows (the order and the shortcut sources come from the node table)."""

    def __init__(self) -> None:
        super().__init__()
        scene = QGraphicsScene(self)
        self.setScene(scene)
        self.setRenderHint(QPainter.Antialiasing)
        self.setMaximumHeight(150)
        w, h, gap = 118.0, 22.0, 14.0
        for row, position in enumerate(("pre", "post")):
            y = row * 60.0
            title = scene.addSimpleText(NAMES[position])
            title.setPos(0, y + 3)
            x0 = 70.0
            boxes = {}
            nodes = [n for n in block_nodes(position) if n.parent is None]
            for i, node in enumerate(nodes):
                x = x0 + i * (w + gap)
                colour = "#fff3b0" if node.kind == "norm" else "#dce8fb" if node.kind == "add" else "#eeeeee"
                scene.addRect(QRectF(x, y, w, h), QPen(QColor("#555555")), QBrush(QColor(colour)))
                text = scene.addSimpleText(node.label)
                text.setPos(x + (w - text.boundingRect().width()) / 2, y + 3)
                if i:
                    scene.addLine(x - gap, y + h / 2, x, y + h / 2, QPen(QColor("#444444")))
                boxes[node.key] = x
            for add, source in shortcut_sources(position).items():
                sx = x0 - 10 if source == BLOCK_INPUT else boxes[source] + w / 2
                path = QPainterPath(QPointF(sx, y + h))
                tx = boxes[add] + w / 2
                path.cubicTo(QPointF(sx, y + h + 22), QPointF(tx, y + h + 22), QPointF(tx, y + h))
                scene.addPath(path, QPen(QColor("#2a7ab0"), 1.5))
        self.setHorizontalScrollBarPolicy(Qt.ScrollBarAlwaysOff)
        self.setVerticalScrollBarPolicy(Qt.ScrollBarAlwaysOff)

    def resizeEvent(self, event) -> None:  # noqa: N802 (Qt name)
        super().resizeEvent(event)
        self.fitInView(self.scene().itemsBoundingRect(), Qt.KeepAspectRatio)


def node_orders_html() -> str:
    """Both blocks' node order, from the node table, as two lines of text."""
    lines = []
    for position in ("pre", "post"):
        keys = [n.label for n in block_nodes(position) if n.parent is None]
        lines.append(f"<b>{NAMES[position]} block:</b> input → " + " → ".join(keys) + " → output")
    return "<br>".join(lines)


def comparison_plots(layout: pg.GraphicsLayoutWidget) -> dict[str, pg.PlotItem]:
    """The four plots, in a GraphicsLayoutWidget (shared by the view and the CLI figure)."""
    # Short titles (the detail is on the axes), so that two plots fit side by side in a
    # dock; longer ones set the layout's minimum width and the right column was cut off.
    titles = {"residual": "Residual stream after each block", "hist": "Selected node, both orders",
              "grad": "Gradient of ff.layers.2.weight per layer",
              "depth": "Last layer's gradient vs depth"}
    plots = {key: layout.addPlot(row=i // 2, col=i % 2) for i, key in enumerate(titles)}
    for key, plot in plots.items():
        plot.setTitle(titles[key], size=TITLE_SIZE)
        plot.addLegend(offset=(5, 5))
        plot.showGrid(x=True, y=True, alpha=0.2)
        plot.getAxis("left").enableAutoSIPrefix(False)  # plain values, no "(x0.001)"
    plots["residual"].setLabel("bottom", "layer")
    plots["residual"].setLabel("left", "mean norm")
    plots["grad"].setLabel("bottom", "layer")
    plots["grad"].setLabel("left", "grad norm")
    plots["depth"].setLabel("left", "grad norm")
    plots["grad"].setLogMode(y=True)
    plots["depth"].setLabel("bottom", "depth (layers)")
    plots["depth"].setLogMode(x=True, y=True)
    # Until there is data, each plot says what fills it (drawing clears the hint); the
    # log axes get a range of a few decades, or their empty 1..10 crowds its labels.
    for key, press, (y0, y1) in (("residual", "Compare on the prompt", (0, 1)),
                                 ("hist", "Compare on the prompt", (0, 1)),
                                 ("grad", "Gradient experiment", (-3, 0)),  # log10 units
                                 ("depth", "Gradient experiment", (-3, 0))):
        hint = pg.TextItem(f"press “{press}”", color="#888888", anchor=(0.5, 0.5))
        plots[key].addItem(hint)
        plots[key].setRange(xRange=(0, 1), yRange=(y0, y1), padding=0,
                            disableAutoRange=False)  # drawn data still fits itself
        hint.setPos(0.5, (y0 + y1) / 2)
    return plots


def draw_runs(plots: dict[str, pg.PlotItem], runs: dict[str, RunSummary], node: str | None) -> None:
    plots["residual"].clear()
    plots["hist"].clear()
    for position, run in runs.items():
        plots["residual"].plot(np.arange(len(run.residual_norm)), run.residual_norm, pen=PENS[position],
                               symbol="o", symbolSize=5, symbolBrush=PENS[position].color(),
                               name=NAMES[position])
        view = run.views.get(node) if node else None
        if view is not None:
            h = view.stats.hist_range
            plots["hist"].plot(np.asarray(h.edges()), view.stats.hist.astype(float), stepMode="center",
                               pen=PENS[position], name=NAMES[position])


def draw_gradients(plots: dict[str, pg.PlotItem], result: GradientResult, depth: int) -> None:
    plots["grad"].clear()
    plots["depth"].clear()
    for position in ("pre", "post"):
        per_layer = result.per_layer.get((position, depth))
        if per_layer is not None:
            plots["grad"].plot(np.arange(len(per_layer)), per_layer, pen=PENS[position], symbol="o",
                               symbolSize=4, symbolBrush=PENS[position].color(),
                               name=f"{NAMES[position]}, depth {depth}")
        plots["depth"].plot(result.depths, result.last_layer(position), pen=PENS[position], symbol="s",
                            symbolSize=7, symbolBrush=PENS[position].color(), name=NAMES[position])


class LnCompareView(QWidget):
    compareRequested = Signal(str)  # prompt text
    gradientsRequested = Signal(object, str, int)  # depths, init, seed
    stopRequested = Signal()

    def __init__(self, session: Session) -> None:
        super().__init__()
        self.session = session
        self.runs: dict[str, RunSummary] = {}
        self.result: GradientResult | None = None
        self.compare_button = QPushButton("Compare on the prompt")
        self.compare_button.setToolTip("Run the prompt through the model and its twin with the norms moved")
        self.compare_button.clicked.connect(self._compare)
        self.depths = QLineEdit("6, 12, 24")
        self.depths.setToolTip("Depths for the gradient experiment, comma separated")
        self.depths.setMinimumWidth(self.depths.fontMetrics().horizontalAdvance("6, 12, 24, 48") + 16)
        self.init_box = QComboBox()
        self.init_box.addItems(list(INITS))
        self.seed = QSpinBox()
        self.seed.setRange(0, 2**31 - 1)
        self.run_button = QPushButton("Gradient experiment")
        self.run_button.clicked.connect(self._gradients)
        self.stop_button = QPushButton("Stop")
        self.stop_button.setEnabled(False)
        self.stop_button.clicked.connect(self.stopRequested.emit)
        self.progress = QProgressBar()
        self.progress.setMaximumWidth(140)
        self.progress.hide()
        bar = QHBoxLayout()
        for w in (self.compare_button, QLabel("Depths:"), self.depths, QLabel("Init:"), self.init_box,
                  QLabel("Seed:"), self.seed, self.run_button, self.stop_button, self.progress):
            bar.addWidget(w)
        bar.addStretch(1)
        self.canvas = pg.GraphicsLayoutWidget()
        self.canvas.setBackground("w")
        self.plots = comparison_plots(self.canvas)
        self.top_label = QLabel()
        self.top_label.setWordWrap(True)
        self.orders = QLabel(node_orders_html())
        self.orders.setWordWrap(True)
        self.claim = QLabel(FINAL_NORM_NOTE)
        self.claim.setWordWrap(True)
        self.claim.setTextInteractionFlags(Qt.TextSelectableByMouse)
        outer = QVBoxLayout(self)
        outer.addLayout(bar)
        content = QWidget()
        layout = QVBoxLayout(content)
        layout.setContentsMargins(0, 0, 0, 0)
        self.order_graphs = OrderGraphs()
        layout.addWidget(self.order_graphs)
        layout.addWidget(self.orders)
        self.canvas.setMinimumHeight(360)  # two rows of plots; below it the tab scrolls
        layout.addWidget(self.canvas, 1)
        layout.addWidget(self.top_label)
        layout.addWidget(self.claim)
        outer.addWidget(scrolling(content), 1)
        session.nodeChanged.connect(lambda _: self._redraw_runs())

    # ------------------------------------------------------------------ requests
    def _compare(self) -> None:
        text = self.session_prompt()
        if text:
            self.compareRequested.emit(text)

    def session_prompt(self) -> str:
        prompt = self.session.prompt
        from ..core.tokenizer import decode
        return decode(prompt.ids) if prompt is not None else ""

    def _gradients(self) -> None:
        try:
            depths = sorted({int(d) for d in self.depths.text().replace(" ", "").split(",") if d})
        except ValueError:
            self.claim.setText("Depths must be whole numbers separated by commas, e.g. 6, 12, 24.")
            return
        if not depths or min(depths) < 1 or max(depths) > 96:
            self.claim.setText("Choose depths between 1 and 96.")
            return
        self.set_running(True)
        self.gradientsRequested.emit(depths, self.init_box.currentText(), self.seed.value())

    def set_running(self, running: bool) -> None:
        self.run_button.setEnabled(not running)
        self.stop_button.setEnabled(running)
        self.progress.setVisible(running)
        if running:
            self.progress.setValue(0)

    # ------------------------------------------------------------------ results
    def show_runs(self, runs: tuple[RunSummary, RunSummary]) -> None:
        self.runs = {r.norm_position: r for r in runs}
        self._redraw_runs()
        words = []
        for position, run in self.runs.items():
            cands = ", ".join(f"{p!r} {v:.3g}" for p, v in zip(run.top_pieces, run.top_probs))
            words.append(f"<b>{NAMES[position]}</b> next tokens: {cands}")
        self.top_label.setText("<br>".join(words))

    def _redraw_runs(self) -> None:
        if self.runs:
            draw_runs(self.plots, self.runs, self.session.node)
            set_title(self.plots["hist"], f"{self.session.node}, both orders", size=TITLE_SIZE)

    def show_progress(self, done: int, total: int) -> None:
        self.progress.setMaximum(total)
        self.progress.setValue(done)

    def show_gradients(self, result: GradientResult | None) -> None:
        self.set_running(False)
        if result is None:
            self.claim.setText("Gradient experiment stopped.")
            return
        self.result = result
        depth = result.depths[len(result.depths) // 2]
        draw_gradients(self.plots, result, depth)
        self.claim.setText(result.summary().replace("\n", "<br>") + "<br>" + FINAL_NORM_NOTE)


def save_figure(path: str, runs: dict[str, RunSummary], result: GradientResult, depth: int,
                node: str = "trf_blocks.0.add2") -> None:
    """Render the comparison offscreen to a PNG (for ``gpt-explorer compare-ln --plot``)."""
    import os
    import sys

    os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
    from PySide6.QtWidgets import QApplication

    app = QApplication.instance() or QApplication(sys.argv[:1])
    canvas = pg.GraphicsLayoutWidget()
    canvas.setBackground("w")
    canvas.resize(1400, 900)
    plots = comparison_plots(canvas)
    draw_runs(plots, runs, node)
    plots["hist"].setTitle(f"{node}, both orders", size=TITLE_SIZE)
    draw_gradients(plots, result, depth)
    canvas.show()
    app.processEvents()
    if not canvas.grab().save(path):
        raise ValueError(f"could not write {path}")
    canvas.close()
