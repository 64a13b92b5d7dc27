"""The block graph's items: a clickable node box (right-click: what-if interventions on
it; the interventions that change it written on it and its fill hatched), a node drawn
as the frame around the nodes it contains, an arrow that shows its tensor when hovered,
and a cap (the embeddings or the head) that unfolds on a click."""

from __future__ import annotations

import math

from PySide6.QtCore import QPointF, QRectF, Qt
from PySide6.QtGui import QBrush, QColor, QFont, QPainterPath, QPainterPathStroker, QPen
from PySide6.QtWidgets import (QGraphicsItem, QGraphicsPathItem, QGraphicsRectItem,
                               QGraphicsSimpleTextItem)

from ...core.experiments.changes import Change
from ...core.gpt.nodes import Node
from ...core.gpt.nodes import node_for_hook as graph_node
from ...core.gpt.nodes import order_of
from .graph_colours import text_colour
from .layout_types import CAP_SIDE, TextKind

SELECTED, MARKED, EDGE, EDGE_HOT = "#ff8c00", "#d40000", "#444444", "#ff8c00"


class NodeItem(QGraphicsRectItem):
    """One clickable node box, centred on its position."""

    diverged = False  # marked by the divergence finder
    idle = False  # an expert that did not run

    def __init__(self, name: str, node: Node, graph: "object", label: str, w: float, h: float,
                 font: QFont, shape_line: bool = False) -> None:
        super().__init__(-w / 2, -h / 2, w, h)
        self.name, self.node, self.graph = name, node, graph
        self.setFlag(QGraphicsItem.ItemIsSelectable, False)
        self.setCursor(Qt.PointingHandCursor)
        self.setAcceptHoverEvents(True)
        self.text = QGraphicsSimpleTextItem(label, self)
        self.text.setFont(font)
        r = self.text.boundingRect()
        # with a shape line (a node inside opened attention) the name is the first line
        self.text.setPos(-r.width() / 2, -h / 2 + 1 if shape_line else -r.height() / 2)
        self.shape_text = None  # the shape line: the graph sets it as it sets edge labels
        if shape_line:
            self.shape_text = QGraphicsSimpleTextItem("", self)
            self.shape_text.setFont(font)
        self.fill = QColor("#e8e8e8")
        self.hatched = False
        self.badge = self.badge_box = None
        self.set_fill(self.fill)
        self.set_selected(False)

    def set_fill(self, colour: QColor) -> None:
        self.fill = colour
        self.setBrush(QBrush(colour))
        self.text.setBrush(QBrush(text_colour(colour)))
        if self.shape_text is not None:
            self.shape_text.setBrush(QBrush(text_colour(colour)))

    def paint(self, painter, option, widget=None) -> None:
        super().paint(painter, option, widget)
        if self.hatched:  # changed by an intervention: its colour under red hatching
            painter.fillRect(self.rect(), QBrush(QColor(200, 30, 30, 150), Qt.BDiagPattern))

    def set_idle(self, idle: bool) -> None:
        """An expert no token was routed to: it did not run, so it has no values; drawn
        with a dashed outline and said so in its tooltip."""
        self.idle = idle
        self.set_selected(False)

    def set_selected(self, selected: bool) -> None:
        colour = SELECTED if selected else MARKED if self.diverged else "#555555"
        self.setPen(QPen(QColor(colour), 4 if selected or self.diverged else 1,
                         Qt.DashLine if self.idle and not selected else Qt.SolidLine))
        self.setZValue(2 if selected else 1)

    def mousePressEvent(self, event) -> None:  # noqa: N802 (Qt name)
        if event.button() == Qt.LeftButton:  # a right press only opens the menu
            self.graph.nodeClicked.emit(self.name)
        event.accept()

    def mouseDoubleClickEvent(self, event) -> None:  # noqa: N802 (Qt name)
        if event.button() == Qt.LeftButton:  # attention and the feed-forward open or fold
            self.graph.node_opened(self.name)
        event.accept()

    def contextMenuEvent(self, event) -> None:  # noqa: N802 (Qt name)
        self.graph.node_menu(self.name, event.screenPos())
        event.accept()

    def set_marks(self, marks: list[str]) -> None:
        """What the interventions do to this node, on a white tab at its top right
        (none: no tab), and its fill hatched."""
        text = "  ".join(marks)
        if self.badge is None and text:
            self.badge_box = QGraphicsRectItem(self)
            self.badge_box.setBrush(QBrush(QColor("white")))
            self.badge_box.setPen(QPen(QColor("#c0392b"), 1))
            self.badge = QGraphicsSimpleTextItem("", self.badge_box)
            self.badge.setBrush(QBrush(QColor("#c0392b")))
            font = QFont(self.text.font())
            font.setBold(True)
            self.badge.setFont(font)
        self.hatched = bool(text)
        self.update()
        if self.badge is None:
            return
        self.badge.setText(text)
        self.badge_box.setVisible(bool(text))
        box = self.badge.boundingRect().adjusted(-3, -1, 3, 1)
        self.badge_box.setRect(box)
        rect = self.rect()
        self.badge_box.setPos(rect.right() - box.width() + 4, rect.top() - box.height() + 4)
        self.badge_box.setToolTip("What if: " + text + " (the What if tab lists and removes it)")


class FrameItem(NodeItem):
    """A node drawn as the frame around the nodes it contains, its title at the top."""

    def __init__(self, name: str, node: Node, graph: "object", rect: QRectF, title: str,
                 title_pos, font: QFont) -> None:
        super().__init__(name, node, graph, title, rect.width(), rect.height(), font)
        self.setRect(rect)
        bold = QFont(font)
        bold.setBold(True)
        self.text.setFont(bold)
        self.text.setPos(*title_pos)
        self.setZValue(0.5)

    def set_fill(self, colour: QColor) -> None:
        super().set_fill(colour)
        light = QColor(colour)
        light.setAlpha(70)  # a tint: the layers inside keep their own colours
        self.setBrush(QBrush(light))
        self.text.setBrush(QBrush(QColor("#222222")))

    def set_selected(self, selected: bool) -> None:
        super().set_selected(selected)
        self.setZValue(0.5)  # always under the layers it contains


def frame_item(graph, name: str, rect, kind: TextKind, title: str, title_at, cfg,
               font: QFont) -> FrameItem:
    """The feed-forward's or attention's frame at ``rect`` (x, y, w, h), its title at
    ``title_at`` in the scene, its tooltip the numbers that size what it holds."""
    fx, fy, fw, fh = rect
    item = FrameItem(name, graph_node(name, order_of(cfg)), graph, QRectF(0, 0, fw, fh), title,
                     (title_at[0] - fx, title_at[1] - fy), font)
    item.setPos(fx, fy)
    ff = f"hidden_dim / emb_dim = {cfg.hidden_dim} / {cfg.emb_dim}"
    att = f"{cfg.n_heads} heads of head_dim {cfg.head_dim}" + (
        f" = {cfg.emb_dim} / {cfg.n_heads}" if cfg.head_dim * cfg.n_heads == cfg.emb_dim else "")
    if cfg.kv_heads != cfg.n_heads:
        att += f"; {cfg.kv_heads} key/value heads, each shared by {cfg.n_heads // cfg.kv_heads}"
    item.setToolTip(f"{name}: {ff if kind == TextKind.FF_TITLE else att}")
    return item


def polyline(points, head: bool = True) -> QPainterPath:
    """A path through ``points``, with an arrow head at its end (``head``)."""
    path = QPainterPath(QPointF(*points[0]))
    for p in points[1:]:
        path.lineTo(QPointF(*p))
    if head:
        arrow_head(path, points[-2], points[-1])
    return path


class EdgeItem(QGraphicsPathItem):
    """An arrow; hovering anywhere near it shows its tensor (set by the graph)."""

    def __init__(self, path: QPainterPath, source: str, dashed: bool = False,
                 target: str = "") -> None:
        super().__init__(path)
        self.source, self.target = source, target  # hook names ("" for a cap)
        self.dashed = dashed
        self.setAcceptHoverEvents(True)
        self.set_hot(False)

    def set_hot(self, hot: bool) -> None:
        """The edge the selected node feeds: drawn thick and orange."""
        pen = QPen(QColor(EDGE_HOT if hot else EDGE), 3 if hot else 1.4,
                   Qt.DashLine if self.dashed else Qt.SolidLine)
        self.setPen(pen)
        self.setZValue(1.5 if hot else 0.8)

    def shape(self) -> QPainterPath:  # noqa: D102 (a wide band: easy to hover)
        stroker = QPainterPathStroker()
        stroker.setWidth(10)
        return stroker.createStroke(self.path())


class CapItem(QGraphicsSimpleTextItem):
    """The embeddings (before) or the final norm and head (after): a line of text that
    unfolds them on a click, and folds them again."""

    def __init__(self, text: str, kind: TextKind, graph: "object", font: QFont) -> None:
        super().__init__(text)
        self.which, self.graph = CAP_SIDE[kind], graph
        self.setFont(font)
        self.setBrush(QBrush(QColor("#2a5a8a")))
        self.setCursor(Qt.PointingHandCursor)
        self.setToolTip("Click to unfold or fold: " + (
            "the embeddings and the blocks before this one" if kind == TextKind.CAP_BEFORE
            else "the blocks after this one, the final norm and the output head"))

    def mousePressEvent(self, event) -> None:  # noqa: N802 (Qt name)
        if event.button() == Qt.LeftButton:
            self.graph.toggle_cap(self.which)
        event.accept()


def marks(one) -> tuple[str, str]:
    """(the node it is drawn on, the words) for one intervention (a removed shortcut on
    its add, whose shortcut the graph also draws dashed)."""
    return one.node, {Change.ZERO: "× 0", Change.SCALE: f"× {one.k:g}", Change.MEAN: "mean",
                      Change.STEER: "steered", Change.PATCH: "patched",
                      Change.HEADS: "heads " + ",".join(map(str, one.heads)) + " off",
                      Change.ACTIVATION: f"→ {one.function}",
                      Change.NO_SHORTCUT: "no shortcut",
                      Change.FORCE: f"expert {','.join(map(str, one.experts))} only",
                      Change.BAN: "experts " + ",".join(map(str, one.experts)) + " banned"}[one.kind]


def arrow_head(path: QPainterPath, p0, p1) -> None:
    """Two short strokes at ``p1``, pointing from ``p0``."""
    angle = math.atan2(p1[1] - p0[1], p1[0] - p0[0])
    for da in (2.6, -2.6):
        path.moveTo(QPointF(*p1))
        path.lineTo(p1[0] + 8 * math.cos(angle + da), p1[1] + 8 * math.sin(angle + da))


def tooltip(name: str, view) -> str:
    """A node's shape and moments, for its tooltip."""
    s = view.stats
    return (f"{name}  shape {view.shape}\nmean {s.mean:.4g}   std {s.std:.4g}\n"
            f"min {s.min:.4g}   max {s.max:.4g}   abs-max {s.absmax:.4g}")
