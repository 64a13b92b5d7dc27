"""Where the norm sits: Pre-LN versus Post-LN side by side — the loaded model and its twin
with the norms moved (same weights, same prompt): residual stream size per layer with
linked axes, histograms of the selected node in both, the next-token candidates of both
— the gradient experiment at initialisation (Xiong et al. 2020), and every placement's
stability experiments (placements_panel.py), run in the engine thread with progress and
Stop."""

from __future__ import annotations

import html

import pyqtgraph as pg
from PySide6.QtCore import QPointF, QRectF, Qt
from PySide6.QtGui import QBrush, QColor, QPainter, QPainterPath, QPen
from PySide6.QtWidgets import (QComboBox, QGraphicsScene, QHBoxLayout, QLabel,
                               QLineEdit, QPushButton, QSpinBox, QTabWidget, QVBoxLayout,
                               QWidget)

from ....core.experiments.ln_compare import (EXPERIMENT_CONFIG, FINAL_NORM_NOTE, INITS, PRE_POST,
                                            GradientResult, RunSummary, compare_prompt,
                                            gradient_experiment, no_twin)
from ....core.base.resources import resource_path
from ....core.gpt.tokenizer import encode
from ....core.gpt.family import NORM_KINDS
from ....core.gpt.nodes import (ATTENTION, BLOCK_INPUT, Kind, as_order, block_hook_name,
                                 block_steps, inside_attention, layer_of, order_at, order_of,
                                 shortcut_sources)
from ...widgets.blocks_drawing import FittedDrawing
from ...widgets.job_controls import JobControls
from ...plots.figures import (NAMES, Compared, clear_plots, comparison_plots, draw_gradients,
                              draw_runs)
from ...widgets.scrolling import scrolling
from ...base.later import BuiltLater
from ...base.session import Session
from ...base.view_jobs import EngineLike, ViewJobs
from ...base.view import ViewHooks
from .placements_panel import PlacementsPanel



EXPERIMENT_INTRO = ("At initialisation, before any training: how large is the gradient "
                    "that reaches each block of a fresh Pre-LN and Post-LN model, and how "
                    "does the last block's change with depth? (Xiong et al. 2020)")


class OrderGraphs(FittedDrawing):
    """Both blocks side by side, each a column of its nodes in forward order from the
    top, with its shortcut arrows on the left (the order and the shortcut sources come
    from the node table). Drawn at the window's font size or larger, never smaller."""

    W, H, GAP, COLUMN = 150.0, 24.0, 12.0, 215.0
    LEAST = 1.0

    def __init__(self) -> None:
        super().__init__()
        self.setScene(QGraphicsScene(self))
        self.setRenderHint(QPainter.Antialiasing)
        self.setHorizontalScrollBarPolicy(Qt.ScrollBarAsNeeded)
        self.setVerticalScrollBarPolicy(Qt.ScrollBarAsNeeded)
        self.draw(PRE_POST)

    def draw(self, orders) -> None:
        """The blocks of ``orders`` (the loaded model's family's, or bare positions:
        GPT-2's), side by side."""
        scene = self.scene()
        scene.clear()
        for column, order in enumerate(orders):
            self._column(scene, column * self.COLUMN, order)
        self.setMinimumHeight(int(scene.itemsBoundingRect().height()) + 8)
        self._fit()

    def _column(self, scene: QGraphicsScene, x0: float, position) -> None:
        w, h, gap = self.W, self.H, self.GAP
        title = scene.addSimpleText(f"{as_order(position).title} block")
        font = title.font()
        font.setBold(True)
        title.setFont(font)
        title.setPos(x0 + 40, 0)
        top, boxes = 28.0, {}
        for i, node in enumerate(block_steps(position)):
            y = top + i * (h + gap)
            colour = "#fff3b0" if node.kind in NORM_KINDS else "#dce8fb" if node.kind == Kind.ADD \
                else "#eeeeee"
            scene.addRect(QRectF(x0 + 40, y, w, h), QPen(QColor("#555555")), QBrush(QColor(colour)))
            text = scene.addSimpleText(node.label)
            text.setPos(x0 + 40 + (w - text.boundingRect().width()) / 2,
                        y + (h - text.boundingRect().height()) / 2)
            if i:
                scene.addLine(x0 + 40 + w / 2, y - gap, x0 + 40 + w / 2, y, QPen(QColor("#444444")))
            boxes[node.key] = y
        for n, (add, source) in enumerate(shortcut_sources(position).items()):
            sy = top - gap if source == BLOCK_INPUT else boxes[source] + h / 2
            ty, bend = boxes[add] + h / 2, x0 + 26 - 14 * n
            path = QPainterPath(QPointF(x0 + 40, sy))
            path.cubicTo(QPointF(bend, sy), QPointF(bend, ty), QPointF(x0 + 40, ty))
            scene.addPath(path, QPen(QColor("#2a7ab0"), 1.5))


def twin_words(runs: dict, info) -> str:
    """Each order's next tokens; for a trained model, the words that say the other
    order's numbers come from weights trained for this order (a twin, not a model)."""
    words = []
    trained_for = info.config.norm_position if info is not None else None
    for position, run in runs.items():
        cands = ", ".join(f"{p!r} {v:.3g}" for p, v in zip(run.top_pieces, run.top_probs))
        twin = ""
        if info is not None and info.trained and position != trained_for:
            twin = (f" <i>(the same weights, trained for {NAMES[trained_for]}, run in "
                    f"{NAMES[position]} order: not what a model trained as {NAMES[position]} "
                    "would predict)</i>")
        words.append(f"<b>{NAMES[position]}</b> next tokens: {cands}{twin}")
    return "<br>".join(words)


def node_orders_html(orders=PRE_POST) -> str:
    """Each block's node order (GPT-2's, or the loaded model's family's), from the node
    table, a line each."""
    lines = []
    for order in orders:
        keys = [n.label for n in block_steps(order)]
        lines.append(f"<b>{as_order(order).title} block:</b> input → " + " → ".join(keys)
                     + " → output")
    return "<br>".join(lines)


class LnCompareView(BuiltLater, ViewHooks, QWidget):
    # the plots of the tabs behind the first, made a loop turn after the view
    # (base/later.py), the placements' a turn after them: seven plots and their legends
    # in the view's own turn took some 60 ms
    LATER = ("plots",)

    def __init__(self, session: Session, engine: EngineLike) -> None:
        super().__init__()
        self.session = session
        self.runs: dict[str, RunSummary] = {}
        self.result: GradientResult | None = None
        prompt_bar, experiment_bar = self._bars()
        self.canvas = pg.GraphicsLayoutWidget()  # what the prompt does, in both orders
        self.canvas.setBackground("w")
        self.depth_canvas = pg.GraphicsLayoutWidget()  # the gradient experiment
        self.depth_canvas.setBackground("w")
        self.top_label = QLabel()
        self.top_label.setWordWrap(True)
        self.orders = QLabel(node_orders_html())
        self.orders.setWordWrap(True)
        self.claim = QLabel(EXPERIMENT_INTRO)
        self.claim.setWordWrap(True)
        self.claim.setTextInteractionFlags(Qt.TextSelectableByMouse)
        # three tabs: the orders drawn large; the prompt through both; the experiment
        self.order_graphs = OrderGraphs()
        orders = QWidget()
        column = QVBoxLayout(orders)
        column.addWidget(self.order_graphs, 1)
        column.addWidget(self.orders)
        self.tabs = QTabWidget()
        self.tabs.addTab(orders, "Two orders")
        for bar, canvas, words, title in (
                (prompt_bar, self.canvas, self.top_label, "On the prompt"),
                (experiment_bar, self.depth_canvas, self.claim, "Gradient vs depth")):
            canvas.setMinimumHeight(2 * 190)  # two plots, one above the other
            measured = QWidget()
            layout = QVBoxLayout(measured)
            layout.setContentsMargins(0, 0, 0, 0)
            layout.addWidget(canvas, 1)
            layout.addWidget(words)
            panel = QWidget()
            inner = QVBoxLayout(panel)
            inner.addLayout(bar)
            inner.addWidget(scrolling(measured), 1)
            self.tabs.addTab(panel, title)
        self.placements = PlacementsPanel(engine, session.set_status)  # its plots later
        self.tabs.addTab(self.placements, "Every placement")
        outer = QVBoxLayout(self)
        outer.setContentsMargins(0, 0, 0, 0)
        outer.addWidget(self.tabs)
        session.nodeChanged.connect(lambda _: self._redraw_runs())
        session.modelChanged.connect(self._new_model)
        self.comparing = ViewJobs(engine, lambda m: self.top_label.setText(
            f"The comparison failed: {m}"), status=session.set_status,
            title="Pre-LN/Post-LN comparison")
        self.experiment = ViewJobs(engine, self._gradients_failed, controls=self.controls,
                                   status=session.set_status, title="Gradient experiment")
        self._new_model()  # a view made after the model loaded starts from it
        self.later_soon()

    def build_later(self):
        """The two plots of the prompt's tab, a turn later the experiment's two, each
        saying what fills it; then, from the next turn, the placements' page's."""
        prompt = comparison_plots(self.canvas, columns=1, keys=(Compared.RESIDUAL, Compared.HIST))
        yield
        self.plots = {**prompt, **comparison_plots(self.depth_canvas, columns=1,
                                                   keys=(Compared.GRAD, Compared.DEPTH))}
        self.placements.later_soon()

    def _bars(self) -> tuple[QHBoxLayout, QVBoxLayout]:
        """Compare on the prompt; the gradient experiment's Run, Stop, depths, init, seed."""
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
        self.controls = JobControls("Gradient experiment", self._gradients, "Backpropagate the sample "
                                    "text's loss through fresh Pre-LN and Post-LN models of "
                                    "each depth, at initialisation")
        self.run_button, self.stop_button = self.controls.run_button, self.controls.stop_button
        prompt = QHBoxLayout()
        prompt.addWidget(self.compare_button)
        prompt.addStretch(1)
        bar = QVBoxLayout()  # two rows: the tab fits a laptop's narrow right-hand column
        first, second = QHBoxLayout(), QHBoxLayout()
        for w in self.controls.widgets():
            first.addWidget(w)
        for w in (QLabel("Depths:"), self.depths, QLabel("Init:"), self.init_box,
                  QLabel("Seed:"), self.seed):
            second.addWidget(w)
        first.addStretch(1)
        second.addStretch(1)
        bar.addLayout(first)
        bar.addLayout(second)
        return prompt, bar

    def _new_model(self) -> None:
        """The comparison belonged to the model before (the gradient experiment, on
        fresh models of its own, stays)."""
        self.comparing.forget()
        self.runs = {}
        if self.built():  # else they are made empty
            clear_plots(self.plots, [Compared.RESIDUAL, Compared.HIST])
        info = self.session.model
        why = no_twin(info.config) if info is not None else None
        self.compare_button.setEnabled(why is None)  # OLMo's, Gemma's: one placement only
        self.top_label.setText(f"{why[0].upper()}{why[1:]}" if why else "")
        # the model's own family's two orders, drawn (GPT-2's before a model is loaded)
        orders = [o for o in (order_at(info.config, p) for p in PRE_POST) if o is not None] \
            if info is not None else list(PRE_POST)
        self.order_graphs.draw(orders or [order_of(info.config)])
        self.orders.setText(node_orders_html(orders or [order_of(info.config)]))

    # ------------------------------------------------------------------ requests
    def _compare(self) -> None:
        prompt = self.session.prompt
        if prompt is None:
            self.top_label.setText("Run a prompt first (Ctrl+Enter): both orders get it.")
            return
        ids = list(prompt.ids)
        self.tabs.setCurrentIndex(1)  # the answer's tab
        self.top_label.setText("Comparing Pre-LN and Post-LN…")
        self.comparing.run(lambda ctx: compare_prompt(ctx.model, ids, ctx.should_stop),
                           "Pre-LN vs Post-LN", finished=self.show_runs)

    def _gradients(self) -> None:
        try:
            depths = sorted({int(d) for d in self.depths.text().replace(" ", "").split(",") if d})
        except ValueError:
            self.claim.setText("Depths must be whole numbers separated by commas, e.g. 6, 12, 24.")
            return
        if not depths or min(depths) < 1 or max(depths) > 96:
            self.claim.setText("Choose depths between 1 and 96.")
            return
        scheme, seed = self.init_box.currentText(), self.seed.value()
        self.tabs.setCurrentIndex(2)  # the answer's tab

        def experiment(ctx):
            text = resource_path("the-verdict.txt").read_text(encoding="utf-8")[:4000]

            def progress(done: int, total: int) -> bool:
                ctx.report((done, total))
                return not ctx.should_stop()

            return gradient_experiment(EXPERIMENT_CONFIG, encode(text), depths, scheme, seed,
                                       progress)

        self.experiment.run(experiment, "gradient experiment", finished=self.show_gradients,
                            cancelled=lambda: self.show_gradients(None))

    def _gradients_failed(self, message: str) -> None:
        self.claim.setText(f"The gradient experiment failed: {html.escape(message)}")

    # ------------------------------------------------------------------ results
    def show_runs(self, runs: tuple[RunSummary, RunSummary]) -> None:
        self.runs = {r.norm_position.position: r for r in runs}
        self._redraw_runs()
        self.top_label.setText(twin_words(self.runs, self.session.model) + "<br>" + FINAL_NORM_NOTE)

    def _redraw_runs(self) -> None:
        """The runs, with the selected node's histogram in both orders; a step inside
        attention (not run apart in both orders) falls back to its block's attention."""
        if not self.runs:
            return
        node = self.session.node
        if node and layer_of(node) is not None and inside_attention(node):
            node = block_hook_name(layer_of(node), ATTENTION)
        draw_runs(self.plots, self.runs, node)

    def show_gradients(self, result: GradientResult | None) -> None:
        if result is None:
            self.claim.setText("Gradient experiment stopped.")
            return
        self.result = result
        depth = result.depths[len(result.depths) // 2]
        draw_gradients(self.plots, result, depth)
        self.claim.setText(result.summary().replace("\n", "<br>"))
