"""Explain: for the selected node, what it does in plain words, what it did here with the
current numbers, and the common mistake about it (text from explorer.core.explain)."""

from __future__ import annotations

import html

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QLabel, QScrollArea, QVBoxLayout, QWidget

from ..core.explain import explain
from .lazy import LazyRefresh
from .session import Session


class ExplanationView(LazyRefresh, QWidget):
    def __init__(self, session: Session, engine=None) -> None:
        super().__init__()
        self.session = session
        self.text = QLabel()
        self.text.setWordWrap(True)
        self.text.setTextFormat(Qt.RichText)
        self.text.setAlignment(Qt.AlignTop | Qt.AlignLeft)
        self.text.setTextInteractionFlags(Qt.TextSelectableByMouse)
        scroll = QScrollArea()
        scroll.setWidgetResizable(True)
        scroll.setWidget(self.text)
        layout = QVBoxLayout(self)
        layout.addWidget(scroll)
        session.on_pass(self.request_refresh)
        session.nodeChanged.connect(self.request_refresh)

    def redraw(self) -> None:
        current = self.session.current
        views = current.views if current is not None else {}
        prompt = self.session.prompt
        pieces = [] if prompt is None else (
            [p for b in range(prompt.batch.size) for p in prompt.batch.pieces(b)]
            if prompt.batch is not None else prompt.pieces)  # one per vector, sample-major
        position = None if current is None or not current.one_position else 0
        if current is not None and current.one_position:
            pieces = [f"generated token {current.step}"]
        elif current is not None and current.whole:
            pieces = list(current.pieces)
        cfg = self.session.model.config if self.session.model else None
        e = explain(self.session.node, views, pieces, position,
                    cfg.norm_position if cfg else "pre", cfg)
        self.text.setText(
            f"<h3>{html.escape(e.node)}</h3>"
            f"<p><b>What it does.</b> {html.escape(e.what)}</p>"
            f"<p><b>What it did here.</b> {html.escape(e.here)}</p>"
            f"<p><b>Common mistake.</b> {html.escape(e.mistake)}</p>" + self._cache_note(current))

    @staticmethod
    def _cache_note(current) -> str:
        """At a generated step: what the KV cache keeps, and what the step computed."""
        if current is None or current.step is None:
            return ""
        if current.whole:
            return (f"<p><b>This step.</b> The whole context ran again, {len(current.ids)} "
                    "positions, as the book's generate_text_simple does; its last position "
                    "chose the new token.</p>")
        return ("<p><b>This step.</b> Only the new token ran: the KV cache keeps every earlier "
                "position's keys and values, so each node computed one position (1, 1, C). "
                "Switch on “Recompute the whole context” to see every position again.</p>")
