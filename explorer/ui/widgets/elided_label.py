"""A one-line label that gives way: narrower than its text, it draws the text cut with an
ellipsis and shows the whole of it as its tooltip, rather than pushing its neighbours out
of the window or being clipped mid-word."""

from __future__ import annotations

from PySide6.QtCore import QSize, Qt
from PySide6.QtGui import QPainter
from PySide6.QtWidgets import QLabel, QSizePolicy


class ElidedLabel(QLabel):
    """``text()`` is always the whole text; only the drawing is cut."""

    def __init__(self, text: str = "", parent=None) -> None:
        super().__init__(text, parent)
        self.setSizePolicy(QSizePolicy.Ignored, QSizePolicy.Preferred)

    def minimumSizeHint(self) -> QSize:  # noqa: N802 (Qt name)
        height = super().minimumSizeHint().height()
        return QSize(self.fontMetrics().horizontalAdvance("…") * 4, height)

    def elided(self) -> str:
        """The text as drawn at the label's present width."""
        room = self.contentsRect().width()
        return self.fontMetrics().elidedText(self.text(), Qt.ElideRight, room)

    def setText(self, text: str) -> None:  # noqa: N802 (Qt name)
        super().setText(text)
        self.setToolTip(text)

    def paintEvent(self, _event) -> None:  # noqa: N802 (Qt name)
        painter = QPainter(self)
        painter.setPen(self.palette().windowText().color())
        painter.drawText(self.contentsRect(), int(Qt.AlignLeft | Qt.AlignVCenter), self.elided())
