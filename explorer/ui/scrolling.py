"""A frameless scroll area for a view's dense content: in a small window the content
keeps the minimum height its plots need and scrolls, instead of being squeezed until
the plots show only their titles (at 1280x800 the right-hand dock is ~390 px high)."""

from __future__ import annotations

from PySide6.QtWidgets import QFrame, QScrollArea, QWidget


def scrolling(content: QWidget) -> QScrollArea:
    area = QScrollArea()
    area.setWidgetResizable(True)
    area.setFrameShape(QFrame.NoFrame)
    area.setWidget(content)
    return area
