"""Explain: for the selected node, what it does in plain words, what it did here with the
current numbers, its formula worked with the last token's numbers (recomputed on the
engine from the pass and the model's parameters, and checked against the capture), and
the common mistake about it (texts from explorer.core.lessons.explain and core.formulas)."""

from __future__ import annotations

import html

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QLabel, QScrollArea, QVBoxLayout, QWidget

from ....core.lessons.explain import explain
from ....core.lessons.formulas import worked
from ....core.gpt.nodes import order_of
from ...base.lazy import LazyRefresh
from ...base.session import Session
from ...base.view_jobs import EngineLike, ViewJobs


class ExplanationView(LazyRefresh, QWidget):
    def __init__(self, session: Session, engine: EngineLike) -> None:
        super().__init__()
        self.session = session
        self.formula = ""  # the worked formula's HTML, once the engine has computed it
        self.jobs = ViewJobs(engine, self._formula_failed)
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
        self._explained = explain(self.session.node, views, pieces, position,
                                  order_of(cfg) if cfg else "pre", cfg,
                                  self.session.tokenizer if cfg else None)
        self.formula = self._ask_formula(current)
        self._show()

    def _show(self) -> None:
        e = self._explained
        self.text.setText(
            f"<h3>{html.escape(e.node)}</h3>"
            f"<p><b>What it does.</b> {html.escape(e.what)}</p>"
            f"<p><b>What it did here.</b> {html.escape(e.here)}</p>" + self.formula +
            f"<p><b>Common mistake.</b> {html.escape(e.mistake)}</p>"
            + self._cache_note(self.session.current))

    def _ask_formula(self, current) -> str:
        """Start the worked formula on the engine; until it comes, a line says so."""
        self.jobs.forget()
        name = self.session.node
        if current is None or name not in current.views:
            return ""
        if current.one_position:
            return ("<p><b>Formula.</b> This step ran one position from the KV cache; the "
                    "formula needs the whole pass: click the prompt, or switch on "
                    "“Recompute the whole context”.</p>")
        if current.views[name].array is None:
            return ""
        views, ids = current.views, list(current.ids)
        pos = len(ids) - 1
        self.jobs.run(lambda ctx: worked(ctx.model, name, views, ids, pos), "formula",
                      finished=self._formula_done)
        return "<p><b>Formula.</b> Working it out with this pass's numbers…</p>"

    def _formula_done(self, w) -> None:
        lines = "".join(f"<br>{html.escape(line)}" for line in w.lines)
        verdict = (f"Recomputed from the captured tensors and the parameters: equal to the "
                   f"captured output within {w.max_error:.1e}." if w.max_error <= 1e-4 else
                   f"Recomputed, it differs from the capture by up to {w.max_error:.3g}: an "
                   "intervention or training mode changed this node.")
        self.formula = (f"<p><b>Formula.</b> <code>{html.escape(w.formula)}</code>{lines}"
                        f"<br><i>{verdict}</i></p>")
        self._show()

    def _formula_failed(self, message: str) -> None:
        self.formula = f"<p><b>Formula.</b> Not worked out here: {html.escape(message)}</p>"
        self._show()

    def _cache_note(self, current) -> str:
        """At a generated step: which token went in and which came out, what the KV cache
        keeps, and what the step computed."""
        if current is None or current.step is None:
            return ""
        steps, prompt = self.session.steps, self.session.prompt
        k = current.step
        piece = self.session.tokenizer.token_piece
        given = (steps[k - 1].token_id if 0 < k <= len(steps) else
                 prompt.ids[-1] if prompt is not None and prompt.ids else None)
        chose = "" if current.token_id is None else (
            f"{piece(current.token_id)!r}" + ("" if current.prob is None else
                                                     f" (p {current.prob:.2g})"))
        io = ("" if given is None or not chose else
              f"<p><b>Step {k}.</b> Input {html.escape(repr(piece(given)))} → chose "
              f"{html.escape(chose)}.</p>")
        if current.whole:
            return io + (f"<p><b>This step.</b> The whole context ran again, {len(current.ids)} "
                    "positions, as the book's generate_text_simple does; its last position "
                    "chose the new token.</p>")
        return io + ("<p><b>This step.</b> Only the new token ran: the KV cache keeps every earlier "
                "position's keys and values, so each node computed one position (1, 1, C). "
                "Switch on “Recompute the whole context” to see every position again.</p>")
