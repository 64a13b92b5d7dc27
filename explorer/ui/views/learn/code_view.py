"""The Code view: the source beside the graph. For the selected node, the class that
produces it — ``__init__`` (which builds the modules) above, the ``forward`` that runs
(Pre-LN and Post-LN each their own) below — with the line that built the
node's module and the line that produced it highlighted (core.code).

It also traces the forward pass: Step / Play walk the nodes in forward order, from the
embeddings through every block to the logits; the graph, the inspector and this view
follow, and one sentence with the pass's numbers says what changed (core.trace).
Keys (with the view focused): Space plays or pauses, Left and Right step."""

from __future__ import annotations

import html

from PySide6.QtCore import Qt, QTimer
from PySide6.QtGui import QColor, QFont, QTextCursor, QTextFormat
from PySide6.QtWidgets import (QComboBox, QHBoxLayout, QLabel, QPlainTextEdit,
                               QPushButton, QTextEdit, QVBoxLayout, QWidget)

from ....core.lessons.listing import listing
from ....core.lessons.trace import trace_order, what_changed
from ....core.gpt.nodes import order_of
from ...base.session import Session
from ...base.view_jobs import EngineLike
from ...base.view import ViewHooks
from ...widgets.scrolling import lines_high

SPEEDS = {"0.5 s per node": 500, "1 s per node": 1000, "2 s per node": 2000}
BUILT, RAN = QColor("#d7e8fb"), QColor("#ffe9a8")


def _code_box() -> QPlainTextEdit:
    box = QPlainTextEdit()
    box.setReadOnly(True)
    box.setLineWrapMode(QPlainTextEdit.NoWrap)
    box.setFocusPolicy(Qt.NoFocus)  # the view keeps the keys (Space, arrows)
    font = QFont("monospace")
    font.setStyleHint(QFont.Monospace)
    box.setFont(font)
    return box


class CodeView(ViewHooks, QWidget):
    def __init__(self, session: Session, engine: EngineLike) -> None:
        super().__init__()
        self.session = session
        self.setFocusPolicy(Qt.StrongFocus)
        self.title = QLabel()
        self.note = QLabel()
        self.note.setWordWrap(True)
        self.init_label, self.forward_label = QLabel(), QLabel()
        self.init_box, self.forward_box = _code_box(), _code_box()
        self.back = QPushButton("◀ Step back")
        self.play = QPushButton("▶ Play")
        self.forward = QPushButton("Step ▶")
        for button, tip in ((self.back, "Left"), (self.play, "Space"), (self.forward, "Right")):
            button.setFocusPolicy(Qt.NoFocus)
            button.setToolTip(f"Trace the forward pass node by node ({tip}, with this view focused)")
        self.speed = QComboBox()
        self.speed.addItems(list(SPEEDS))
        self.speed.setCurrentIndex(1)
        self.speed.setFocusPolicy(Qt.NoFocus)
        self.sentence = QLabel("Step or Play to walk the forward pass node by node.")
        self.sentence.setWordWrap(True)
        self.timer = QTimer(self, interval=SPEEDS[self.speed.currentText()])
        self.timer.timeout.connect(self._tick)

        bar = QHBoxLayout()
        for w in (QLabel("Trace:"), self.back, self.play, self.forward, self.speed):
            bar.addWidget(w)
        bar.addStretch(1)
        self.title.setWordWrap(True)  # a row of its own: the view fits a laptop's width
        code = QVBoxLayout()  # one above the other: a line of code keeps the column's width
        for label, box in ((self.init_label, self.init_box), (self.forward_label, self.forward_box)):
            code.addWidget(label)
            code.addWidget(box, 1)
            lines_high(box)
        layout = QVBoxLayout(self)
        layout.addLayout(bar)
        layout.addWidget(self.title)
        layout.addWidget(self.sentence)
        layout.addLayout(code, 1)
        layout.addWidget(self.note)

        self.back.clicked.connect(lambda: self.step(-1))
        self.forward.clicked.connect(lambda: self.step(1))
        self.play.clicked.connect(self.toggle_play)
        self.speed.currentTextChanged.connect(lambda t: self.timer.setInterval(SPEEDS[t]))
        session.nodeChanged.connect(self.show_node)
        session.modelChanged.connect(self._model_changed)
        session.on_pass(self._on_pass)
        self._shown: tuple | None = None
        self.show_node(session.node)

    # ----------------------------------------------------------------- the code
    def _norm_position(self) -> str:
        return order_of(self.session.model.config) if self.session.model else "pre"

    def show_node(self, name: str) -> None:
        found = listing(name, self._norm_position())
        key = (found.title, found.forward_name)
        if self._shown != key:  # a new class or forward: new text
            self._shown = key
            self.init_box.setPlainText("\n".join(found.init))
            self.forward_box.setPlainText("\n".join(found.forward))
        self.title.setText(f"<b>{html.escape(found.title)}</b> — {html.escape(name)}")
        self.init_label.setText("<b>__init__</b>: builds the modules")
        self.forward_label.setText(f"<b>{found.forward_name}</b>: runs them, in this order")
        self.note.setText(found.note)
        self._highlight(self.init_box, found.init_line, BUILT)
        self._highlight(self.forward_box, found.forward_line, RAN)
        self._say(name)

    def _on_pass(self) -> None:
        self._say(self.session.node)

    @staticmethod
    def _highlight(box: QPlainTextEdit, line: int | None, colour: QColor) -> None:
        if line is None:
            box.setExtraSelections([])
            return
        selection = QTextEdit.ExtraSelection()
        selection.format.setBackground(colour)
        selection.format.setProperty(QTextFormat.FullWidthSelection, True)
        cursor = QTextCursor(box.document().findBlockByNumber(line))
        selection.cursor = cursor
        box.setExtraSelections([selection])
        box.setTextCursor(cursor)
        box.centerCursor()

    def highlighted(self) -> tuple[str | None, str | None]:
        """The highlighted lines' text (init, forward), for tests and tooltips."""
        def text(box):
            selections = box.extraSelections()
            return selections[0].cursor.block().text() if selections else None
        return text(self.init_box), text(self.forward_box)

    # ----------------------------------------------------------------- the trace
    def _order(self) -> list[str]:
        return trace_order(self.session.model.config) if self.session.model else []

    def _say(self, name: str) -> None:
        current, info = self.session.current, self.session.model
        if current is None or info is None:
            self.sentence.setText("Run a prompt (Ctrl+Enter) to see what each node does to "
                                  "the numbers; Step and Play walk the code all the same.")
        else:
            self.sentence.setText(what_changed(name, current.views, info.config))

    def step(self, delta: int) -> bool:
        """Select the next (or previous) node in forward order; False at either end."""
        order = self._order()
        if not order:
            return False
        node = self.session.node
        i = order.index(node) if node in order else -1
        j = i + delta
        if not 0 <= j < len(order):
            self.pause()
            return False
        self.session.set_node(order[j])
        return True

    def toggle_play(self) -> None:
        if self.timer.isActive():
            self.pause()
        else:
            order = self._order()
            if order and self.session.node == order[-1]:  # from the start again
                self.session.set_node(order[0])
            self.timer.start()
            self.play.setText("⏸ Pause")

    def pause(self) -> None:
        self.timer.stop()
        self.play.setText("▶ Play")

    def _tick(self) -> None:
        if not self.step(1):
            self.pause()

    def _model_changed(self) -> None:
        self.pause()
        self._shown = None
        self.show_node(self.session.node)

    def keyPressEvent(self, event) -> None:  # noqa: N802
        key = event.key()
        if key == Qt.Key_Space:
            self.toggle_play()
        elif key in (Qt.Key_Right, Qt.Key_Left):
            self.step(1 if key == Qt.Key_Right else -1)
        else:
            super().keyPressEvent(event)
