"""The block graph: the selected transformer block drawn as clickable nodes in forward
order, with both shortcuts, the shape of the tensor on every arrow, and the embeddings
before it and the head after it as caps that unfold on a click.

Built from the core's node table (nodes.py) through the layout (graph_layout.py): order,
labels, shapes and the shortcut sources all come from there. The whole block fits the
view (graph_canvas.py); nodes are coloured by a chosen statistic of the shown pass or by
their part of a token's logit (the Why view's answer), and the interventions that apply
are drawn on the nodes and shortcuts they change. A strip of all blocks below jumps
between them."""

from __future__ import annotations

from PySide6.QtCore import QRectF, Qt, Signal
from PySide6.QtGui import QBrush, QColor, QFont, QFontMetricsF, QPen
from PySide6.QtWidgets import (QCheckBox, QComboBox, QGraphicsScene, QGraphicsSimpleTextItem,
                               QHBoxLayout, QLabel, QPushButton, QSpinBox, QVBoxLayout, QWidget)

from ....core.gpt.nodes import (ATTENTION, FEED_FORWARD, embeddings, inside_attention, layer_of,
                               model_nodes, order_of, parse_hook)
from ....core.lessons.facts import SHAPES
from ....core.run.routing import expert_tokens
from ...graph.colour_scale import STATISTICS, ColourScale
from ...graph.contribution_colours import CONTRIBUTION
from ...graph.graph_canvas import GraphCanvas, font_metrics
from ...graph.graph_items import (CapItem, EdgeItem, NodeItem, frame_item, marks, polyline,
                                 tooltip)
from ...graph.attention_layout import layout_open
from ...graph.attention_opener import opener_for
from ...graph.graph_layout import Metrics, label_floors, layout_block
from ...graph.layout_types import CAP_SIDE, TextKind
from ...graph.node_menu import node_menu
from ...base.session import Session
from ...base.view_jobs import EngineLike
from ...base.view import ViewHooks

SHORTCUT, REMOVED = "#2a7ab0", "#c0392b"


class BlockGraphView(ViewHooks, QWidget):
    """Toolbar (block, colour statistic, feed-forward layers, fit) over the graph, and a
    row with the strip of all blocks and the colour scale under it."""

    nodeClicked = Signal(str)

    def __init__(self, session: Session, engine: EngineLike) -> None:
        super().__init__()
        self.session = session
        self.items: dict[str, NodeItem] = {}
        self.edge_labels: dict[str, QGraphicsSimpleTextItem] = {}
        self.edges: dict[str, list[EdgeItem]] = {}  # by the node whose tensor they carry
        self.shortcuts: dict[str, tuple[str, EdgeItem, QGraphicsSimpleTextItem]] = {}
        self.texts: dict[str, QGraphicsSimpleTextItem] = {}  # title, times, caps, notes
        self.open_caps = {"before": False, "after": False}  # the caps unfolded
        self._anchors: dict[str, tuple[float, float, bool]] = {}
        self._widths: tuple[float, float] | None = None  # the labels' room in the layout
        self._tokens: dict[int, int] | None = None  # the experts' tokens the layout shows
        self.scene = QGraphicsScene(self)
        self.view = GraphCanvas(self.scene)
        self.scale = ColourScale(session)
        self.strip = self.scale.strip
        layout = QVBoxLayout(self)
        layout.setContentsMargins(4, 2, 4, 2)
        layout.setSpacing(2)
        layout.addLayout(self._toolbar())
        layout.addWidget(self.view, 1)
        layout.addLayout(self.scale)
        self.opener = opener_for(session, engine)
        self._connect(session)
        if session.model is not None:  # a view made after the model loaded starts from it
            self.rebuild()

    def _toolbar(self) -> QHBoxLayout:
        """Block, colour statistic, feed-forward layers, Fit."""
        self.layer_box = QSpinBox()
        self.layer_box.setPrefix("Block ")
        self.layer_box.setToolTip("The block drawn, from 0 as trf_blocks.N (Up/Down in the graph)")
        self.stat_box = QComboBox()
        self.stat_box.addItems([*STATISTICS, CONTRIBUTION])
        self.stat_box.setToolTip("What colours the nodes: a statistic, or a logit's parts (Why)")
        self.expand_ff = QCheckBox("Feed-forward layers")
        self.expand_ff.setToolTip("Draw the feed-forward's Linear → GELU → Linear inside it")
        self.expand_ff.setChecked(True)
        self.open_att = QCheckBox("Attention steps")
        self.open_att.setToolTip("Open attention (A in the graph): W_query, W_key, W_value, the "
                                 "heads, the scores, the causal mask, softmax, weights · V, the "
                                 "heads joined and out_proj; the feed-forward folds meanwhile")
        self.fit_button = QPushButton("Fit")
        self.fit_button.setToolTip("Fit the whole block to the view again (F in the graph; "
                                   "the wheel zooms, dragging pans)")
        bar = QHBoxLayout()
        for w in (self.layer_box, QLabel("Colour:"), self.stat_box, self.expand_ff, self.open_att,
                  self.fit_button):
            bar.addWidget(w)
        bar.addStretch(1)
        return bar

    def _connect(self, session: Session) -> None:
        self.layer_box.valueChanged.connect(session.set_layer)
        self.stat_box.currentTextChanged.connect(lambda _: self.recolour())
        self.scale.per_block.toggled.connect(lambda _: self.recolour())
        self.scale.per_kind.toggled.connect(lambda _: self.recolour())
        self.expand_ff.toggled.connect(lambda on: self._one_open(self.open_att, on))
        self.open_att.toggled.connect(lambda on: self._one_open(self.expand_ff, on))
        self.view.toggleAttention.connect(self.open_att.toggle)
        self.fit_button.clicked.connect(self.view.fit)
        self.view.blockStep.connect(lambda d: session.set_layer(session.layer + d))
        self.nodeClicked.connect(session.set_node)
        session.modelChanged.connect(self.rebuild)
        session.layerChanged.connect(lambda _: self.rebuild())
        session.on_pass(self.refresh)  # in a loop turn of its own
        session.nodeChanged.connect(self._on_node)
        session.markChanged.connect(self.mark_divergence)
        session.whyChanged.connect(lambda: self.stat_box.currentText() == CONTRIBUTION and self.recolour())
        session.coverChanged.connect(lambda _: self.rebuild())
        session.interventionsChanged.connect(self._badges)

    def _one_open(self, other: QCheckBox, on: bool) -> None:
        """Attention and the feed-forward open one at a time, so that the whole block still
        fits; the one folded to make room opens again when the other folds."""
        if on and other.isChecked() or not on and getattr(self, "_folded", None) is other:
            other.blockSignals(True)
            other.setChecked(not on)
            other.blockSignals(False)
            self._folded = other if on else None
        elif on:
            self._folded = None
        self.rebuild()

    # ---------------------------------------------------------------- building
    def metrics(self) -> Metrics:
        self.font_ = QFont(self.font())
        m, self.big_font = font_metrics(self.font_)
        return m

    def rebuild(self) -> None:
        for store in (self.items, self.edge_labels, self.edges, self.shortcuts, self.texts,
                      self._anchors):
            store.clear()
        self.scene.clear()
        info = self.session.model
        if info is None:
            self.scene.addSimpleText("Loading the model…")
            self.view.set_drawing(self.scene.itemsBoundingRect())
            return
        cfg = info.config
        layer = self.session.layer
        self.layer_box.blockSignals(True)
        self.layer_box.setRange(0, cfg.n_layers - 1)
        self.layer_box.setSuffix(f" of {cfg.n_layers}")  # the last: "Block 11 of 12"
        self.layer_box.setValue(layer)
        self.layer_box.blockSignals(False)
        m = self.metrics()
        self._widths = self._label_widths(m)
        self.session.attention_opened = self.open_att.isChecked()
        self._tokens = self._expert_tokens()
        if self.open_att.isChecked():
            lay = layout_open(cfg, layer, self.open_caps["before"], self.open_caps["after"], m,
                              *self._widths)
        else:
            lay = layout_block(cfg, layer, self.expand_ff.isChecked(), self.open_caps["before"],
                               self.open_caps["after"], m, *self._widths, tokens=self._tokens)
        x, y, w, h = self.layout_frame = lay.frame
        frame = self.scene.addRect(QRectF(x, y, w, h), QPen(QColor("#7a7a7a"), 1, Qt.DashLine),
                                   QBrush(QColor(240, 244, 250)))
        frame.setZValue(-1)
        for box in lay.boxes.values():
            two = box.name in lay.two_line
            item = NodeItem(box.name, box.node, self, self._say(box.label), box.w, box.h,
                            self.font_, shape_line=two)
            item.setPos(box.cx, box.cy)
            self.scene.addItem(item)
            self.items[box.name] = item
            item.set_idle(box.name in lay.idle)
            if two:  # its own shape on its second line
                self.edge_labels[box.name] = item.shape_text
                self._anchors[box.name] = (0.0, box.h / 2 - m.line - 1, None)
        for name, rect, kind in ((lay.ff_name, lay.ff_frame, TextKind.FF_TITLE),
                                 (lay.att_name, lay.att_frame, TextKind.ATT_TITLE)):
            if rect is not None:  # a node drawn as the frame around its steps
                title = next(t for t in lay.texts if t.kind == kind)
                item = frame_item(self, name, rect, title.kind, self._say(title.text),
                                  (title.x, title.y), cfg, self.font_)
                item.setToolTip(self._say(item.toolTip()))
                self.scene.addItem(item)
                self.items[name] = item
        for arrow in lay.arrows:
            self._arrow(arrow)
        for cut in lay.shortcuts:
            self._shortcut(cut)
        for text in lay.texts:
            self._text(text, cfg)
        self.view.set_drawing(self.scene.itemsBoundingRect().adjusted(-3, -3, 3, 3))
        self.refresh()

    def _arrow(self, arrow) -> None:
        edge = EdgeItem(polyline(arrow.points, head=bool(arrow.target)), arrow.source,
                        arrow.dashed, arrow.target)
        self.scene.addItem(edge)
        self.edges.setdefault(arrow.source, []).append(edge)
        if arrow.label is not None:
            text = self.scene.addSimpleText("")
            text.setFont(self.font_)
            text.setBrush(QBrush(QColor("#555555")))
            text.setPos(*arrow.label)
            self.edge_labels[arrow.source] = text
            self._anchors[arrow.source] = (*arrow.label, arrow.label_right)

    def _shortcut(self, cut) -> None:
        edge = EdgeItem(polyline(cut.points), cut.source)
        self.scene.addItem(edge)
        word = self.scene.addSimpleText("shortcut")
        word.setFont(self.font_)
        word.setRotation(-90)
        word.setPos(cut.label[0] - QFontMetricsF(self.font_).height(), cut.label[1])
        self.shortcuts[cut.add] = (cut.source, edge, word)
        self._draw_shortcut(cut.add, removed=False)

    def _draw_shortcut(self, add: str, removed: bool) -> None:
        source, edge, word = self.shortcuts[add]
        edge.setPen(QPen(QColor(REMOVED if removed else SHORTCUT), 2,
                         Qt.DashLine if removed else Qt.SolidLine))
        edge.setZValue(0.9)
        word.setText("✕ removed" if removed else "shortcut")
        word.setBrush(QBrush(QColor(REMOVED if removed else SHORTCUT)))
        edge.setToolTip(f"Shortcut: {source}'s output is added at {add}" +
                        (" — removed by a What if intervention" if removed else ""))

    def _text(self, text, cfg) -> None:
        kind = text.kind
        if kind in (TextKind.FF_TITLE, TextKind.ATT_TITLE):
            return  # a frame's own title
        if kind in CAP_SIDE:
            item = CapItem(self._say(text.text), kind, self, self.font_)
            self.scene.addItem(item)
        else:
            item = self.scene.addSimpleText(self._say(text.text))
            font = self.big_font if kind == TextKind.TIMES else QFont(self.font_)
            font.setBold(kind in (TextKind.TITLE, TextKind.TIMES))
            item.setFont(font)
            item.setBrush(QBrush(QColor("#5a6b85" if kind in (TextKind.TIMES, TextKind.NOTE) else "#333333")))
        if kind == TextKind.TIMES:
            item.setToolTip(self._say(f"The model stacks {cfg.n_layers} blocks like this one, each "
                                      "with weights of its own; the strip below the graph picks "
                                      "which one is drawn."))
            self.block_count = item
        item.setPos(text.x, text.y)
        self.texts[kind if kind != TextKind.NOTE else f"note{len(self.texts)}"] = item

    def _say(self, text: str) -> str:
        """A text as the graph may show it now: an open question's answer masked."""
        return self.session.covered.mask(text)

    def _label_widths(self, m: Metrics) -> tuple[float, float]:
        """The room the shape labels of the shown pass need (at least the floors'), for
        the pattern and for every other node."""
        floors = label_floors(self.session.model.config)
        lw, plw = m.width(floors[0]), m.width(floors[1])
        current = self.session.current
        if current is not None and not self.session.covers(SHAPES):
            for name, view in current.views.items():
                width = m.width(str(view.shape))
                if view.node.per_head:
                    plw = max(plw, width)
                else:
                    lw = max(lw, width)
        return lw, plw

    def _expert_tokens(self) -> dict[int, int] | None:
        """How many tokens each expert of the shown block got in the shown pass."""
        current, info = self.session.current, self.session.model
        return expert_tokens(current.views, info.config, self.session.layer) if (
            current is not None and info is not None and info.config.n_experts) else None

    def toggle_cap(self, which: str) -> None:
        self.open_caps[which] = not self.open_caps[which]
        self.rebuild()

    # ---------------------------------------------------------------- updating
    def refresh(self) -> None:
        current = self.session.current
        if self.session.model is not None and self._widths is not None:
            need = self._label_widths(self.metrics())
            if need[0] > self._widths[0] or need[1] > self._widths[1] or (
                    self.expand_ff.isChecked() and self._expert_tokens() != self._tokens):
                self.rebuild()  # a longer prompt's labels, or other experts ran: room first
                return
        info = self.session.model
        # a Learn question may ask for them, and in Learn mode one seen answers the next
        shapes = not (self.session.covers(SHAPES) or self.session.learning)
        for name, label in self.edge_labels.items():
            view = current.views.get(name) if current else None
            label.setText(self._say(str(view.shape)) if view and shapes else "")
            x, y, right = self._anchors[name]
            if right is None:  # centred on its node's second line
                label.setPos(x - label.boundingRect().width() / 2, y)
            elif right:
                label.setPos(x - label.boundingRect().width(), y)
        for name, edges in self.edges.items():
            view = current.views.get(name) if current else None
            tip = tooltip(name, view) if view is not None and shapes and not self.session.covered else name
            tip = self._say(tip)
            for edge in edges:
                if not any(edge is s[1] for s in self.shortcuts.values()):
                    edge.setToolTip(f"The tensor on this arrow: {tip}")
            if name in self.edge_labels:
                self.edge_labels[name].setToolTip(tip)
        for name, item in self.items.items():
            view = current.views.get(name) if current else None
            if self.session.covered:  # a Learn question is open: the name only
                item.setToolTip(name)
            elif view is None:
                item.setToolTip(f"{name}\n{item.node.description}")
            else:
                item.setToolTip(f"{name}\n{item.node.description}\n{tooltip(name, view)}")
        self.recolour()
        self._badges()
        self._on_node(self.session.node)
        self.opener.want(self.session.layer, steps=self.open_att.isChecked())  # or its pattern
        if self.expand_ff.isChecked():  # a mixture's experts: their boxes' values
            self.opener.want_experts(self.session.layer)
        self.strip.update()
        if info is not None and current is None:
            self.scale.legend.setText("Run a prompt (Ctrl+Enter) to colour the nodes")

    def recolour(self) -> None:
        if self.stat_box.currentText() == CONTRIBUTION:
            self.scale.by_why(self.items)
        else:
            self.scale.by_statistic(self.items, self.stat_box.currentText())

    def _badges(self) -> None:
        words: dict[str, list[str]] = {}
        for one in self.session.active_interventions():
            node, what = marks(one)
            words.setdefault(node, []).append(what)
        for name, item in self.items.items():
            item.set_marks(words.get(name, []))
        for add in self.shortcuts:
            self._draw_shortcut(add, "no shortcut" in words.get(add, []))

    def node_opened(self, name: str) -> None:
        """A double click on attention or the feed-forward opens it (or folds it)."""
        key = parse_hook(name)[1]
        box = {ATTENTION: self.open_att, FEED_FORWARD: self.expand_ff}.get(key)
        if box is not None:
            box.toggle()

    def node_menu(self, name: str, where) -> None:
        """Right-click on a node: what-if interventions on it (``menu``: the last one);
        none on attention's own steps (What if changes whole nodes of the block)."""
        if layer_of(name) is not None and inside_attention(name):
            return
        if getattr(self, "menu", None) is not None:
            self.menu.close()
        self.menu = node_menu(self.session, name, self, self.services)
        self.menu.popup(where)

    def mark_divergence(self, name: str) -> None:
        """Outline the session's marked node (the first divergence) in red, and show its
        block; an empty name clears the outline."""
        layer = layer_of(name) if name else None
        if layer is not None and layer != self.session.layer:
            self.session.set_layer(layer)
        self._on_node(self.session.node)

    def _on_node(self, name: str) -> None:
        if name not in self.items and layer_of(name) is not None and inside_attention(name) \
                and not self.open_att.isChecked():
            self.open_att.setChecked(True)  # a step inside attention: drawn opened
            return
        for cap, keys in zip(("before", "after"), self._cap_keys()):
            if name in keys and name not in self.items and not self.open_caps[cap]:
                self.open_caps[cap] = True  # the selected node is always drawn
                self.rebuild()
                return
        for item_name, item in self.items.items():
            item.diverged = item_name == self.session.mark
            item.set_selected(item_name == name)
        for source, edges in self.edges.items():
            for edge in edges:
                edge.set_hot(source == name)
        if name in self.items:  # nothing moves while the whole drawing is in view
            self.view.ensureVisible(self.items[name], 10, 10)

    def _cap_keys(self) -> tuple[set[str], set[str]]:
        """The nodes drawn only when a cap is open: before the block (what enters block 1
        is its input there, so only from block 2 on) and after it."""
        info = self.session.model
        order = order_of(info.config) if info is not None else "pre"
        before, after = model_nodes(order)
        first = embeddings(order)
        return ({n.key for n in before if n.key != first} | ({first} if self.session.layer else set()),
                {n.key for n in after})

    def keyPressEvent(self, event) -> None:  # noqa: N802 (Qt name): Up/Down on the toolbar too
        if event.key() in (Qt.Key_Up, Qt.Key_Down) and not event.modifiers():
            self.session.set_layer(self.session.layer + (-1 if event.key() == Qt.Key_Up else 1))
        else:
            super().keyPressEvent(event)
