"""A plain panel laid over a view while a Learn-mode question or a round of the
prediction game is open, so that the view cannot give the answer away; it lifts when the
question is answered. Which views it
covers, and for which kinds of question, is said once in the view list (views/registry.py)."""

from __future__ import annotations

from PySide6.QtCore import QEvent, QObject, Qt
from PySide6.QtWidgets import QLabel, QWidget

from ...core.lessons.game import PREDICTION
from ..base.session import Session

TEXT = ("Predict first: answer the question in the Learn tab (Ctrl+3).\n"
        "This view shows the answer, so it is covered until then.")
GAME_TEXT = ("Guess first: the prediction game's round is open (the Game tab, Ctrl+Shift+J).\n"
             "This view shows the answer, so it is covered until then.")


class Cover(QLabel):
    def __init__(self, target: QWidget, session: Session, kinds: frozenset[str]) -> None:
        super().__init__(TEXT, target)
        self.kinds = frozenset(kinds)
        self.setObjectName("learnCover")
        self.setAlignment(Qt.AlignCenter)
        self.setWordWrap(True)
        self.setAutoFillBackground(True)
        self.setStyleSheet("QLabel#learnCover { background: #eef1f5; color: #333333; "
                           "font-size: 11pt; border: 1px dashed #8a8a8a; }")
        self.target = target
        self.hide()
        session.coverChanged.connect(self._changed)
        self._changed(session.covered)

    def eventFilter(self, watched: QObject, event: QEvent) -> bool:  # noqa: N802
        if event.type() == QEvent.Resize:
            self.setGeometry(watched.rect())
        return False

    def _changed(self, covered: frozenset[str]) -> None:
        """Shown, it follows the view's size (a Python event filter only while shown: on
        every view's every event it would cost the window time while the engine runs)."""
        shown = bool(self.kinds & covered)
        if shown and self.isHidden():
            self.setGeometry(self.target.rect())
            self.target.installEventFilter(self)
        elif not shown and not self.isHidden():
            self.target.removeEventFilter(self)
        self.setVisible(shown)
        if shown:
            self.setText(GAME_TEXT if PREDICTION in covered else TEXT)
            self.raise_()
