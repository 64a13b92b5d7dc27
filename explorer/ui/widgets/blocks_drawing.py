"""Two blocks side by side, each a column of its steps from the top, the steps that do
the same job joined by a dashed line (Learn ▸ GPT-2 beside Llama)."""

from __future__ import annotations

from PySide6.QtCore import QRectF, Qt
from PySide6.QtGui import QBrush, QColor, QFontMetricsF, QPainter, QPen
from PySide6.QtWidgets import QGraphicsScene, QGraphicsView

from ...core.gpt.nodes import Kind, block_steps

COLOURS = {Kind.NORM: "#fff3b0", Kind.RMSNORM: "#fff3b0", Kind.ATTENTION: "#dce8fb",
           Kind.FFN: "#d8f0d8", Kind.DROPOUT: "#eeeeee", Kind.ADD: "#e8e0f4"}


class FittedDrawing(QGraphicsView):
    """A drawing scaled to its view on every resize: never past 1.3×, never under
    ``LEAST`` (1.0: the window's font size at least)."""

    LEAST = 0.6

    def resizeEvent(self, event) -> None:  # noqa: N802 (Qt name)
        super().resizeEvent(event)
        self._fit()

    def _fit(self) -> None:
        rect = self.scene().itemsBoundingRect()
        if rect.isEmpty():
            return
        port = self.viewport().size()
        scale = max(self.LEAST, min(1.3, (port.width() - 8) / rect.width(),
                                    (port.height() - 8) / rect.height()))
        self.resetTransform()
        self.scale(scale, scale)
        self.centerOn(rect.center())


class BlocksDrawing(FittedDrawing):
    """The two blocks side by side, each a column of its steps from the top; a dashed line
    joins the steps that do the same job, a step the other block has not stands alone."""

    W, H, GAP, APART = 150.0, 24.0, 12.0, 230.0

    def __init__(self) -> None:
        super().__init__()
        self.setScene(QGraphicsScene(self))
        self.setRenderHint(QPainter.Antialiasing)
        self.boxes: list[dict[str, QRectF]] = []

    def draw(self, orders: tuple, titles: tuple[str, str]) -> None:
        scene = self.scene()
        scene.clear()
        steps = [block_steps(order) for order in orders]
        rows = aligned([n.key for n in steps[0]], [n.key for n in steps[1]])
        either = {n.key: n for nodes in steps for n in nodes}
        self.boxes = [self._column(scene, i * self.APART, nodes, rows, i, title, either)
                      for i, (nodes, title) in enumerate(zip(steps, titles))]
        left, right = self.boxes
        dashed = QPen(QColor("#777777"), 1, Qt.DashLine)
        for key, a in left.items():
            if key in right:
                scene.addLine(a.right(), a.center().y(), right[key].left(),
                              right[key].center().y(), dashed)
        self.setMinimumHeight(min(420, int(scene.itemsBoundingRect().height()) + 8))
        self._fit()

    def _column(self, scene, x0: float, nodes, rows: list, side: int, title: str,
                either: dict) -> dict[str, QRectF]:
        head = scene.addSimpleText("")
        font = head.font()
        font.setBold(True)
        head.setFont(font)  # cut to its column, whole in its tooltip: never over the other's
        head.setText(QFontMetricsF(font).elidedText(title, Qt.ElideRight, self.APART - 14))
        head.setToolTip(title)
        head.setPos(x0, 0)
        boxes, by_key = {}, {n.key: n for n in nodes}
        for i, row in enumerate(rows):
            rect = QRectF(x0, 30 + i * (self.H + self.GAP), self.W, self.H)
            key = row[side]
            if key is None:  # the other block's step, which this one has not
                scene.addRect(rect, QPen(QColor("#bbbbbb"), 1, Qt.DotLine))
                text = scene.addSimpleText(f"no {either[row[1 - side]].kind.value}")
                text.setBrush(QBrush(QColor("#888888")))
            else:
                node = by_key[key]
                scene.addRect(rect, QPen(QColor("#555555")),
                              QBrush(QColor(COLOURS.get(node.kind, "#ffffff"))))
                text = scene.addSimpleText(node.label)
                boxes[key] = rect
            text.setPos(rect.x() + (self.W - text.boundingRect().width()) / 2,
                        rect.y() + (self.H - text.boundingRect().height()) / 2)
            if i:
                scene.addLine(rect.center().x(), rect.y() - self.GAP, rect.center().x(),
                              rect.y(), QPen(QColor("#444444")))
        return boxes



def aligned(a: list[str], b: list[str]) -> list[tuple[str | None, str | None]]:
    """The two blocks' steps in rows: a step both have on one row (the longest common
    order of the two), a step only one has beside an empty place."""
    best = [[0] * (len(b) + 1) for _ in range(len(a) + 1)]
    for i in range(len(a) - 1, -1, -1):
        for j in range(len(b) - 1, -1, -1):
            best[i][j] = best[i + 1][j + 1] + 1 if a[i] == b[j] else max(best[i + 1][j],
                                                                         best[i][j + 1])
    rows, i, j = [], 0, 0
    while i < len(a) or j < len(b):
        if i < len(a) and j < len(b) and a[i] == b[j]:
            rows.append((a[i], b[j]))
            i, j = i + 1, j + 1
        elif j >= len(b) or (i < len(a) and best[i + 1][j] >= best[i][j + 1]):
            rows.append((a[i], None))
            i += 1
        else:
            rows.append((None, b[j]))
            j += 1
    return rows
