"""The one cover service. While a Learn question or a round of the prediction game is
open, the session holds what would answer it (core.lessons.facts.Facts: kinds of thing and
exact texts). Every docked view sits in a ``ViewFrame``; the service shows a plain panel
in place of every frame whose view shows such a kind (``ViewSpec.shows``) or holds such a
text anywhere in it — labels, buttons, fields, text panes, tables, tooltips, the texts
of its plots and drawings — looking again after every pass and every half second while
the question is open. The view under a panel is hidden, not drawn over. What is always
on screen (the graph's labels, the title and the status line) masks the texts itself
with ``Facts.mask``. No view keeps a list of its own; the view asking is never covered."""

from __future__ import annotations

import html
import re
from typing import Iterator

from PySide6.QtCore import QObject, Qt, QTimer
from PySide6.QtWidgets import (QAbstractButton, QComboBox, QGraphicsSimpleTextItem,
                               QGraphicsTextItem, QGraphicsView, QGroupBox, QLabel, QLineEdit,
                               QPlainTextEdit, QStackedWidget, QTabBar, QTableWidget,
                               QTextEdit, QWidget)

from ...core.lessons.facts import PREDICTION, Facts
from ..base.session import Session

TEXT = ("Predict first: answer the question in the Learn tab.\n"
        "This view shows the answer, so it is covered until then.")
GAME_TEXT = ("Guess first: the prediction game's round is open (the Game tab in Play).\n"
             "This view shows the answer, so it is covered until then.")
SCAN_MS = 500  # how often an open question looks again at what the views show
TABLE_ROWS = 400  # the rows of a table read (a longer one is covered by its kind)
_TAG = re.compile(r"<[^>]+>")


class ViewFrame(QStackedWidget):
    """A view in its dock: the view, or, while it would answer an open question, a
    panel in its place. The view may come later (``set_content``): a dock's frame
    exists from the start, its view is built when it is first shown."""

    def __init__(self, content: QWidget | None, key: str, shows: frozenset[str]) -> None:
        super().__init__()
        self.key, self.shows = key, frozenset(shows)
        self.content = content or QWidget()  # nothing yet: an empty page
        self.panel = QLabel(TEXT)
        self.panel.setObjectName("learnCover")
        self.panel.setAlignment(Qt.AlignCenter)
        self.panel.setWordWrap(True)
        self.panel.setStyleSheet("QLabel#learnCover { background: #eef1f5; color: #333333; "
                                 "font-size: 11pt; border: 1px dashed #8a8a8a; }")
        self.addWidget(self.content)
        self.addWidget(self.panel)

    def set_content(self, content: QWidget) -> None:
        """The view, now that it is built, in place of the empty page."""
        covered, empty = self.covered, self.content
        self.content = content
        self.insertWidget(0, content)
        self.removeWidget(empty)
        empty.deleteLater()
        self.setCurrentWidget(self.panel if covered else content)

    @property
    def covered(self) -> bool:
        return self.currentWidget() is self.panel

    def set_covered(self, covered: bool, text: str = TEXT) -> None:
        self.panel.setText(text)
        self.setCurrentWidget(self.panel if covered else self.content)

    def minimumSizeHint(self):  # noqa: N802 (Qt name): the view's, not the panel's
        return self.content.minimumSizeHint()


def _plain(text: str) -> str:
    return html.unescape(_TAG.sub(" ", text)) if "<" in text or "&" in text else text


def scene_texts(view: QGraphicsView) -> Iterator[str]:
    """The texts a drawing or plot shows: its text items, their tooltips, and the
    fixed tick labels and titles of its axes."""
    scene = view.scene()
    if scene is None:
        return
    for item in scene.items():
        if isinstance(item, QGraphicsSimpleTextItem):
            yield item.text()
        elif isinstance(item, QGraphicsTextItem):
            yield item.toPlainText()
        if item.toolTip():
            yield item.toolTip()
        levels = getattr(item, "_tickLevels", None)  # a pyqtgraph axis with fixed ticks
        if levels:
            for level in levels:
                for _value, label in level:
                    yield str(label)
        label = getattr(item, "labelText", None)
        if isinstance(label, str) and label:
            yield label


def widget_texts(root: QWidget) -> Iterator[str]:
    """Every text in a widget and its children, shown or in a tab behind: what a user
    reads there now or one click away."""
    for w in [root, *root.findChildren(QWidget)]:
        if w.toolTip():
            yield _plain(w.toolTip())
        if isinstance(w, (QLabel, QAbstractButton, QLineEdit)):
            yield _plain(w.text())
        elif isinstance(w, (QTextEdit, QPlainTextEdit)):
            yield w.toPlainText()
        elif isinstance(w, QComboBox):
            yield w.currentText()
        elif isinstance(w, QGroupBox):
            yield w.title()
        elif isinstance(w, QTabBar):
            yield from (w.tabText(i) for i in range(w.count()))
        elif isinstance(w, QTableWidget):
            for r in range(min(w.rowCount(), TABLE_ROWS)):
                for c in range(w.columnCount()):
                    item = w.item(r, c)
                    if item is not None:
                        yield item.text()
            for header in (w.horizontalHeaderItem(c) for c in range(w.columnCount())):
                if header is not None:
                    yield header.text()
            for header in (w.verticalHeaderItem(r) for r in range(min(w.rowCount(), TABLE_ROWS))):
                if header is not None:
                    yield header.text()
        elif isinstance(w, QGraphicsView):
            yield from scene_texts(w)


def shows_fact(root: QWidget, facts: Facts) -> str | None:
    """The first fact written anywhere in ``root``, or None."""
    for text in widget_texts(root):
        found = facts.found(text)
        if found:
            return found
    return None


class Covers(QObject):
    """The frames of every built view; covers and uncovers them as the session's facts
    change, and looks again while a question is open."""

    def __init__(self, session: Session, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.session = session
        self.frames: list[ViewFrame] = []
        self._look = QTimer(self, interval=SCAN_MS)
        self._look.timeout.connect(self.look)
        session.coverChanged.connect(lambda _facts: self.apply())
        session.caughtUp.connect(self.look)  # the views have drawn the new pass

    def add(self, frame: ViewFrame) -> None:
        self.frames.append(frame)
        self.refresh(frame)

    def refresh(self, frame: ViewFrame) -> None:
        """Cover one frame now if an open question needs it (its view just built)."""
        if self.session.covered:
            self._cover(frame)

    def apply(self) -> None:
        """A question opened or closed: the views that show its kinds covered at once;
        the texts looked at a loop turn later, once every view (the graph first) has
        masked or redrawn what the question changed."""
        facts = self.session.covered
        if not facts:
            self._look.stop()
            for frame in self.frames:
                frame.set_covered(False)
            return
        for frame in self.frames:
            self._cover(frame, texts=False)
        QTimer.singleShot(0, self.look)
        self._look.start()

    def look(self) -> None:
        """Cover the frames whose views came to show a fact since the last look."""
        if self.session.covered:
            for frame in self.frames:
                if not frame.covered:
                    self._cover(frame)

    def _cover(self, frame: ViewFrame, texts: bool = True) -> None:
        facts = self.session.covered
        if frame.key == facts.asker:
            frame.set_covered(False)
            return
        shown = bool(frame.shows & facts.kinds) or (
            texts and shows_fact(frame.content, facts) is not None)
        frame.set_covered(shown, GAME_TEXT if PREDICTION in facts.kinds and facts.asker == "game"
                          else TEXT)
