"""The block graph: the selected transformer block drawn as clickable nodes in forward
order, with the shortcut arrows, the embeddings before it and the head after it.

Built from the core's node table (nodes.py) and nothing else: order, labels, tooltips,
shapes and the shortcut sources all come from there. Nodes are coloured by a chosen
statistic of the shown pass; a layer strip below jumps between blocks.
"""

from __future__ import annotations

import math

import numpy as np
from PySide6.QtCore import QPointF, QRectF, Qt, Signal
from PySide6.QtGui import QBrush, QColor, QFont, QPainter, QPainterPath, QPen
from PySide6.QtWidgets import (QCheckBox, QComboBox, QGraphicsPathItem, QGraphicsScene,
                               QGraphicsSimpleTextItem, QGraphicsView, QHBoxLayout, QLabel,
                               QSpinBox, QVBoxLayout, QWidget)

from ..core.nodes import (BLOCK_INPUT, MODEL_NODES_AFTER, MODEL_NODES_BEFORE, Node,
                          block_hook_name, block_nodes, drawn_beside, layer_of,
                          node_for_hook, shortcut_sources)
from ..core.quiz import SHAPES
from .graph_colours import colour, colour_bar_pixmap
from .graph_items import NODE_H, NODE_W, FrameItem, NodeItem
from .layer_strip import LayerStrip
from .node_menu import node_menu
from .session import Session

ROW = 62.0
STATISTICS = {"std": "std", "abs-max": "absmax", "RMS": "rms", "kurtosis": "kurtosis"}
class BlockGraphView(QWidget):
    """Toolbar (layer, colour statistic, expand feed-forward) over the graph and a strip
    of all layers."""

    nodeClicked = Signal(str)

    def __init__(self, session: Session, engine=None) -> None:
        super().__init__()
        self.session = session
        self.items: dict[str, NodeItem] = {}
        self.edge_labels: dict[str, QGraphicsSimpleTextItem] = {}

        self.layer_box = QSpinBox()
        self.layer_box.setPrefix("layer ")
        self.layer_box.setToolTip("Which transformer block is drawn (Up/Down keys)")
        self.stat_box = QComboBox()
        self.stat_box.addItems(list(STATISTICS))
        self.stat_box.setToolTip("Statistic that colours the nodes")
        self.expand_ff = QCheckBox("Expand feed-forward")
        self.expand_ff.setChecked(True)
        self.legend = QLabel()  # a line of its own: the toolbar fits a narrow centre
        self.legend.setStyleSheet("color: #444444")
        bar = QHBoxLayout()
        for w in (QLabel("Block:"), self.layer_box, QLabel("Colour by:"), self.stat_box,
                  self.expand_ff):
            bar.addWidget(w)
        bar.addStretch(1)

        self.scene = QGraphicsScene(self)
        self.view = QGraphicsView(self.scene)
        self.view.setRenderHint(QPainter.Antialiasing)
        self.view.setFocusPolicy(Qt.StrongFocus)
        self.strip = LayerStrip(session)

        layout = QVBoxLayout(self)
        layout.setContentsMargins(4, 4, 4, 4)
        layout.addLayout(bar)
        # the colour scale: its two ends' values on either side of a viridis bar
        self.scale_lo, self.scale_hi = QLabel(), QLabel()
        self.scale_bar = QLabel()
        self.scale_bar.setPixmap(colour_bar_pixmap(140, 12))
        legend_row = QHBoxLayout()
        for w in (self.legend, self.scale_lo, self.scale_bar, self.scale_hi):
            legend_row.addWidget(w)
        legend_row.addStretch(1)
        layout.addLayout(legend_row)
        self._show_scale(False)
        layout.addWidget(self.view, 1)
        layout.addWidget(self.strip.caption)
        layout.addWidget(self.strip)

        self.layer_box.valueChanged.connect(session.set_layer)
        self.stat_box.currentTextChanged.connect(lambda _: self.recolour())
        self.expand_ff.toggled.connect(lambda _: self.rebuild())
        self.nodeClicked.connect(session.set_node)
        session.modelChanged.connect(self.rebuild)
        session.layerChanged.connect(self._on_layer)
        session.on_pass(self.refresh)  # in a loop turn of its own
        session.nodeChanged.connect(self._on_node)
        session.markChanged.connect(self.mark_divergence)
        session.coverChanged.connect(lambda _: self.refresh())
        session.interventionsChanged.connect(self._badges)
        if session.model is not None:  # a view made after the model loaded starts from it
            self.rebuild()

    # ---------------------------------------------------------------- building
    def rebuild(self) -> None:
        self.scene.clear()
        self.items.clear()
        self.edge_labels.clear()
        info = self.session.model
        if info is None:
            self.scene.addSimpleText("Loading the model…")
            return
        cfg = info.config
        self.layer_box.blockSignals(True)
        self.layer_box.setRange(0, cfg.n_layers - 1)
        self.layer_box.setSuffix(f" of {cfg.n_layers - 1}")
        self.layer_box.setValue(self.session.layer)
        self.layer_box.blockSignals(False)
        layer = self.session.layer
        expand = self.expand_ff.isChecked()

        y = 0.0
        tok, pos = MODEL_NODES_BEFORE[0], MODEL_NODES_BEFORE[1]
        self._add(tok.key, tok, -NODE_W * 0.6, y)
        self._add(pos.key, pos, NODE_W * 0.6, y)
        chain: list[str] = []
        for node in MODEL_NODES_BEFORE[2:]:
            y += ROW
            self._add(node.key, node, 0, y)
            chain.append(node.key)
        for source in (tok, pos):  # both embeddings feed the sum
            self._arrow(self.items[source.key], self.items[MODEL_NODES_BEFORE[2].key])

        block_top = y + ROW * 0.55
        y += ROW * 0.35
        block_input = chain[-1]
        beside = drawn_beside(cfg.norm_position)
        aside = {n.key for n in beside.values()}
        # a node whose layers are drawn is their frame, not a step after them
        frames = {n.parent for n in block_nodes(cfg.norm_position)
                  if n.parent and n.key not in aside} if expand else set()
        inside: dict[str, list[str]] = {key: [] for key in frames}
        for node in block_nodes(cfg.norm_position):
            name = block_hook_name(layer, node.key)
            if node.key in aside or node.key in frames or (node.in_ffn and not expand):
                continue
            if node.parent in frames and not inside[node.parent]:
                y += ROW * 0.4  # room for the frame's title
            y += ROW
            self._add(name, node, 0, y)
            chain.append(name)
            if node.parent in frames:
                inside[node.parent].append(name)
            if node.key in beside:  # e.g. the attention pattern beside attention
                child = beside[node.key]
                child_name = block_hook_name(layer, child.key)
                self._add(child_name, child, NODE_W * 1.15, y)
                self._arrow(self.items[name], self.items[child_name], dashed=True)
        for key, children in inside.items():
            self._frame(block_hook_name(layer, key), children)
        block_bottom = y + ROW * 0.45
        self._block_frame(cfg, layer, block_top, block_bottom)
        first_after = len(chain)
        for node in MODEL_NODES_AFTER:
            y += ROW
            self._add(node.key, node, 0, y)
            chain.append(node.key)
        for a, b in zip(chain, chain[1:]):
            self._arrow(self.items[a], self.items[b], label_for=a)
        self._elsewhere(chain[first_after - 1], chain[first_after], block_input,
                        chain[chain.index(block_input) + 1], layer, cfg.n_layers)
        for add_key, source_key in shortcut_sources(cfg.norm_position).items():
            source = block_input if source_key == BLOCK_INPUT else block_hook_name(layer, source_key)
            self._shortcut(self.items[source], self.items[block_hook_name(layer, add_key)])
        self.view.setSceneRect(self.scene.itemsBoundingRect().adjusted(-20, -20, 20, 20))
        self.refresh()

    def _frame(self, name: str, children: list[str]) -> None:
        """The node that contains ``children`` (the feed-forward around its three layers),
        drawn as a clickable frame around them with its label as the title."""
        first, last = self.items[children[0]].pos(), self.items[children[-1]].pos()
        top = first.y() - NODE_H / 2 - ROW * 0.4 - 4
        item = FrameItem(name, node_for_hook(name), self,
                         QRectF(-NODE_W / 2 - 16, 0, NODE_W + 32, last.y() + NODE_H / 2 + 8 - top))
        item.setPos(0, top)
        self.scene.addItem(item)
        self.items[name] = item

    def _block_frame(self, cfg, layer: int, top: float, bottom: float) -> None:
        """The block's frame and "× n": one of n identical blocks. (Shadow frames behind it
        cost the window ~10 ms of lateness in each 1024-token pass, GELU tab in front.)"""
        rect = QRectF(-NODE_W * 1.0, top, NODE_W * 2.75, bottom - top)
        n = cfg.n_layers
        frame = self.scene.addRect(rect, QPen(QColor("#7a7a7a"), 1, Qt.DashLine),
                                   QBrush(QColor(240, 244, 250)))
        frame.setZValue(-1)
        order = "Pre-LN" if cfg.norm_position == "pre" else "Post-LN"
        title = self.scene.addSimpleText(f"Transformer block {layer} ({order})")
        title.setPos(rect.right() - title.boundingRect().width() - 10, top + 4)  # clear of the edge labels
        times = self.scene.addSimpleText(f"× {n}")
        font = QFont()
        font.setPointSize(20)
        font.setBold(True)
        times.setFont(font)
        times.setBrush(QBrush(QColor("#5a6b85")))
        times.setPos(rect.right() - times.boundingRect().width() - 10, rect.bottom() - 44)
        times.setToolTip(f"The model stacks {n} blocks like this one, each with weights of its "
                         "own; the strip below the graph picks which one is drawn.")
        self.block_count = times

    def _elsewhere(self, last_node: str, after: str, before_first: str, first_node: str,
                   layer: int, n: int) -> None:
        """Say which blocks sit between the embeddings and this one, and between this
        one and the final norm."""
        for a, b, text in ((before_first, first_node, f"blocks 0–{layer - 1} run first"
                            if layer else ""),
                           (last_node, after, f"blocks {layer + 1}–{n - 1} run in between"
                            if layer < n - 1 else "")):
            if text:
                pa, pb = self.items[a].pos(), self.items[b].pos()
                label = self.scene.addSimpleText(f"⋮ {text}")
                label.setBrush(QBrush(QColor("#5a6b85")))
                label.setPos(-NODE_W * 0.95, (pa.y() + pb.y()) / 2 - 9)

    def _add(self, name: str, node: Node, x: float, y: float) -> None:
        item = NodeItem(name, node, self)
        item.setPos(x, y)
        self.scene.addItem(item)
        self.items[name] = item

    def _arrow(self, a: NodeItem, b: NodeItem, dashed: bool = False, label_for: str | None = None) -> None:
        start, end = a.pos(), b.pos()
        if abs(start.y() - end.y()) < 1:  # side by side
            p0, p1 = QPointF(start.x() + NODE_W / 2, start.y()), QPointF(end.x() - NODE_W / 2, end.y())
        else:
            p0 = QPointF(start.x(), start.y() + NODE_H / 2)
            p1 = QPointF(end.x(), end.y() - NODE_H / 2)
        path = QPainterPath(p0)
        path.lineTo(p1)
        self._head(path, p0, p1)
        pen = QPen(QColor("#444444"), 1.4, Qt.DashLine if dashed else Qt.SolidLine)
        self.scene.addPath(path, pen)
        if label_for is not None:
            text = self.scene.addSimpleText("")
            text.setBrush(QBrush(QColor("#555555")))
            text.setPos((p0.x() + p1.x()) / 2 + 8, (p0.y() + p1.y()) / 2 - 9)
            self.edge_labels[label_for] = text

    @staticmethod
    def _head(path: QPainterPath, p0: QPointF, p1: QPointF) -> None:
        angle = math.atan2(p1.y() - p0.y(), p1.x() - p0.x())
        for da in (2.6, -2.6):
            path.moveTo(p1)
            path.lineTo(p1.x() + 9 * math.cos(angle + da), p1.y() + 9 * math.sin(angle + da))

    def _shortcut(self, a: NodeItem, b: NodeItem) -> None:
        x = -NODE_W * 0.5 - 10
        p0 = QPointF(a.pos().x() - NODE_W / 2, a.pos().y())
        p1 = QPointF(b.pos().x() - NODE_W / 2, b.pos().y())
        path = QPainterPath(p0)
        path.cubicTo(QPointF(x - 60, p0.y()), QPointF(x - 60, p1.y()), p1)
        self._head(path, QPointF(p1.x() - 20, p1.y()), p1)
        item = QGraphicsPathItem(path)
        item.setPen(QPen(QColor("#2a7ab0"), 2))
        self.scene.addItem(item)
        label = self.scene.addSimpleText("shortcut")
        label.setBrush(QBrush(QColor("#2a7ab0")))
        label.setPos(x - 95, (p0.y() + p1.y()) / 2 - 8)

    # ---------------------------------------------------------------- updating
    def refresh(self) -> None:
        current = self.session.current
        info = self.session.model
        shapes = not self.session.covers(SHAPES)  # a Learn question may ask for them
        for name, label in self.edge_labels.items():
            view = current.views.get(name) if current else None
            label.setText(str(view.shape) if view and shapes else "")
        for name, item in self.items.items():
            view = current.views.get(name) if current else None
            if self.session.covered:  # a Learn question is open: the name only
                item.setToolTip(name)
            elif view is None:
                item.setToolTip(f"{name}\n{item.node.description}")
            else:
                s = view.stats
                item.setToolTip(
                    f"{name}\n{item.node.description}\nshape {view.shape}\n"
                    f"mean {s.mean:.4g}   std {s.std:.4g}\nmin {s.min:.4g}   max {s.max:.4g}\n"
                    f"abs-max {s.absmax:.4g}   RMS {s.rms:.4g}")
        self.recolour()
        self._badges()
        self._on_node(self.session.node)
        self.strip.update()
        if info is not None and current is None:
            self.legend.setText("Run a prompt (Ctrl+Enter) to colour the nodes")

    def recolour(self) -> None:
        stat = STATISTICS[self.stat_box.currentText()]
        current = self.session.current
        values = {}
        for name in self.items:
            view = current.views.get(name) if current else None
            if view is not None:
                v = getattr(view.stats, stat)
                if np.isfinite(v):
                    values[name] = v
        if not values:
            for item in self.items.values():
                item.set_fill(QColor("#e8e8e8"))
            self._show_scale(False)
            return
        logs = {n: math.log10(abs(v) + 1e-12) for n, v in values.items()}
        lo, hi = min(logs.values()), max(logs.values())
        for name, item in self.items.items():
            if name in logs:
                item.set_fill(colour((logs[name] - lo) / (hi - lo) if hi > lo else 0.5))
            else:
                item.set_fill(QColor("#e8e8e8"))
        vmin, vmax = min(values.values(), key=abs), max(values.values(), key=abs)
        self.legend.setText(f"{self.stat_box.currentText()} (log scale):")
        self.scale_lo.setText(f"{vmin:.3g}")
        self.scale_hi.setText(f"{vmax:.3g}")
        self._show_scale(True)

    def _show_scale(self, shown: bool) -> None:
        for w in (self.scale_lo, self.scale_bar, self.scale_hi):
            w.setVisible(shown)

    def _badges(self) -> None:
        counts = {}
        for one in self.session.active_interventions():
            counts[one.node] = counts.get(one.node, 0) + 1
        for name, item in self.items.items():
            item.set_badge(counts.get(name, 0))

    def node_menu(self, name: str, where) -> None:
        """Right-click on a node: what-if interventions on it."""
        node_menu(self.session, name, self).exec(where)

    def _on_layer(self, layer: int) -> None:
        self.rebuild()

    def mark_divergence(self, name: str) -> None:
        """Outline the session's marked node (the first divergence) in red, and show its
        layer; an empty name clears the outline."""
        layer = layer_of(name) if name else None
        if layer is not None and layer != self.session.layer:
            self.session.set_layer(layer)
        self._on_node(self.session.node, scroll=False)

    def _on_node(self, name: str, scroll: bool = True) -> None:
        for item_name, item in self.items.items():
            item.diverged = item_name == self.session.mark
            item.set_selected(item_name == name)
        if scroll and name in self.items:
            self.view.ensureVisible(self.items[name], 20, 40)

    def keyPressEvent(self, event) -> None:  # noqa: N802
        if event.key() == Qt.Key_Up:
            self.session.set_layer(self.session.layer - 1)
        elif event.key() == Qt.Key_Down:
            self.session.set_layer(self.session.layer + 1)
        else:
            super().keyPressEvent(event)
