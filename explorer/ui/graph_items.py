"""The block graph's items: a clickable node box (right-click: what-if interventions;
a badge counts those applied to it) and a node drawn as the frame around the nodes it
contains."""

from __future__ import annotations

from PySide6.QtCore import QRectF, Qt
from PySide6.QtGui import QBrush, QColor, QFont, QPen
from PySide6.QtWidgets import QGraphicsItem, QGraphicsRectItem, QGraphicsSimpleTextItem

from ..core.nodes import Node
from .graph_colours import text_colour

NODE_W, NODE_H = 190.0, 36.0


class NodeItem(QGraphicsRectItem):
    """One clickable node box."""

    def __init__(self, name: str, node: Node, graph: "object") -> None:
        super().__init__(-NODE_W / 2, -NODE_H / 2, NODE_W, NODE_H)
        self.name, self.node, self.graph = name, node, graph
        self.setFlag(QGraphicsItem.ItemIsSelectable, False)
        self.setCursor(Qt.PointingHandCursor)
        self.setAcceptHoverEvents(True)
        self.text = QGraphicsSimpleTextItem(node.label, self)
        font = QFont()
        font.setPointSize(10)
        self.text.setFont(font)
        self._centre_text()
        self.set_fill(QColor("#e8e8e8"))
        self.set_selected(False)

    def _centre_text(self) -> None:
        r = self.text.boundingRect()
        self.text.setPos(-r.width() / 2, -r.height() / 2)

    def set_fill(self, colour: QColor) -> None:
        self.setBrush(QBrush(colour))
        self.text.setBrush(QBrush(text_colour(colour)))

    diverged = False  # marked by the divergence finder

    def set_selected(self, selected: bool) -> None:
        colour = "#ff8c00" if selected else "#d40000" if self.diverged else "#555555"
        self.setPen(QPen(QColor(colour), 4 if selected or self.diverged else 1))
        self.setZValue(2 if selected else 1)

    def mousePressEvent(self, event) -> None:  # noqa: N802 (Qt name)
        self.graph.nodeClicked.emit(self.name)
        event.accept()

    def set_badge(self, count: int) -> None:
        """How many interventions change this node (none: no badge), red on a white tab
        that reads on any fill."""
        if not hasattr(self, "badge"):
            self.badge_box = QGraphicsRectItem(self)
            self.badge_box.setBrush(QBrush(QColor("white")))
            self.badge_box.setPen(QPen(QColor("#c0392b"), 1))
            self.badge = QGraphicsSimpleTextItem("", self.badge_box)
            self.badge.setBrush(QBrush(QColor("#c0392b")))
            font = QFont()
            font.setBold(True)
            self.badge.setFont(font)
        self.badge.setText(f"✎{count}" if count else "")
        self.badge_box.setVisible(bool(count))
        box = self.badge.boundingRect().adjusted(-3, -1, 3, 1)
        self.badge_box.setRect(box)
        rect = self.rect()
        self.badge_box.setPos(rect.right() - box.width() + 6, rect.top() - box.height() / 2)
        self.badge_box.setToolTip(f"{count} intervention(s) change this node (What if tab)")

    def contextMenuEvent(self, event) -> None:  # noqa: N802 (Qt name)
        self.graph.node_menu(self.name, event.screenPos())
        event.accept()


class FrameItem(NodeItem):
    """A node drawn as the frame around the nodes it contains, its label at the top."""

    def __init__(self, name: str, node: Node, graph: "object", rect: QRectF) -> None:
        super().__init__(name, node, graph)
        self.setRect(rect)
        self.text.setPos(rect.left() + 8, rect.top() + 4)
        self.setZValue(0.5)

    def set_selected(self, selected: bool) -> None:
        super().set_selected(selected)
        self.setZValue(0.5)  # always under the layers it contains
