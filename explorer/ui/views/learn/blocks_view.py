"""GPT-2's block beside the Llama / Qwen block: the loaded model's block and a preset of
the other family, each drawn in its own order with the parts that do the same job
joined; the roles each block plays its way, with its numbers; the parameters each
spends per part and the KV cache each keeps per token (core.lessons.compare_blocks,
read from the models); and on the prompt, each role's values in both models, with
RoPE's point shown on the Llama-family model's own attention (core.lessons.rope_shift).
The figures and the prompt run are engine jobs."""

from __future__ import annotations

import html

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import QRectF, Qt
from PySide6.QtGui import QBrush, QColor, QPainter, QPen
from PySide6.QtWidgets import (QComboBox, QGraphicsScene, QGraphicsView, QHBoxLayout, QLabel,
                               QTabWidget, QVBoxLayout, QWidget)

from ....core.gpt.config import preset
from ....core.gpt.nodes import Kind, Role, block_steps, order_of, role
from ....core.lessons.compare_blocks import (Comparison, compare, family_name, others_for,
                                             prompt_values, shape_only)
from ....core.lessons.rope_shift import SHIFTS, rope_shift
from ....core.sources import random_model
from ...base.session import Session
from ...base.view import ViewHooks
from ...base.view_jobs import EngineLike, ViewJobs
from ...plots.plot_axes import plot_widget
from ...plots.plot_text import set_empty, set_title
from ...widgets.job_controls import JobControls
from ...widgets.scrolling import scrolling

COLOURS = {Kind.NORM: "#fff3b0", Kind.RMSNORM: "#fff3b0", Kind.ATTENTION: "#dce8fb",
           Kind.FFN: "#d8f0d8", Kind.DROPOUT: "#eeeeee", Kind.ADD: "#e8e0f4"}
PENS = ("#1f4e8c", "#d2691e")  # the loaded model's, the other's
NEAR_ZERO = 0.05
EMPTY = "Run a prompt (Ctrl+Enter), then “Compare on the prompt”"


class BlocksDrawing(QGraphicsView):
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
        head = scene.addSimpleText(title)
        font = head.font()
        font.setBold(True)
        head.setFont(font)
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

    def resizeEvent(self, event) -> None:  # noqa: N802 (Qt name)
        super().resizeEvent(event)
        self._fit()

    def _fit(self) -> None:
        rect = self.scene().itemsBoundingRect()
        if rect.isEmpty():
            return
        port = self.viewport().size()
        scale = max(0.6, min(1.3, (port.width() - 8) / rect.width(),
                             (port.height() - 8) / rect.height()))
        self.resetTransform()
        self.scale(scale, scale)
        self.centerOn(rect.center())


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


def _table(head: list[str], rows: list[list[str]]) -> str:
    top = "".join(f"<th align=left>{html.escape(h)}</th>" for h in head)
    body = "".join("<tr>" + "".join(f"<td valign=top>{html.escape(c)}</td>" for c in row) + "</tr>"
                   for row in rows)
    return f"<table cellspacing=0 cellpadding=3><tr>{top}</tr>{body}</table>"


def parameters_html(c: Comparison) -> str:
    """Each part's parameters in both models, per block where it is in the blocks; the
    totals; the KV cache per token and what grouped-query attention saves."""
    in_blocks = ("attention matrices", "attention biases", "query and key norms",
                 "feed-forward matrices", "feed-forward biases")
    rows = []
    for part in c.parts[0]:
        counts = [p[part] for p in c.parts]
        if not any(counts):
            continue
        cells = [f"{n:,}" + (f" ({n // b:,} a block)" if part in in_blocks and n else "")
                 if n else "—" for n, b in zip(counts, c.blocks)]
        rows.append([part, *cells])
    rows.append(["in all", *(f"{sum(p.values()):,}" for p in c.parts)])
    words = [_table(["", *c.labels], rows), *(html.escape(n) + "." for n in c.notes())]
    for label, cache in zip(c.labels, c.caches):
        saved = (f"; with a key and value head for each of its {cache.query_heads} query heads "
                 f"it would keep {cache.as_multi_head:,} (grouped-query attention keeps "
                 f"{1 / cache.saved:.2g} of that)" if cache.saved > 1 else
                 "; every query head has its own key and value head")
        words.append(f"<b>{html.escape(label)}</b> KV cache: {cache.layers} blocks × (keys + "
                     f"values) {cache.kv_heads} heads × {cache.head_dim} = "
                     f"{cache.values_per_layer:,} values a block, {cache.per_token:,} bytes a "
                     f"token in bfloat16{saved}.")
    return "<br>".join(words)


class BlocksView(ViewHooks, QWidget):
    def __init__(self, session: Session, engine: EngineLike) -> None:
        super().__init__()
        self.session = session
        self.comparison: Comparison | None = None
        self.values: tuple[dict, dict] | None = None  # each model's role nodes on the prompt
        self.shift = None  # RoPE's shifted scores on the Llama-family model
        self.other = QComboBox()
        self.other.setToolTip("A preset of the other block family, with random weights")
        self.other.activated.connect(lambda _i: self.refresh())
        self.controls = JobControls("Compare on the prompt", self.run_prompt, "Run the prompt "
                                    "through both models and show each role's values")
        self.run_button = self.controls.run_button
        self.figures = ViewJobs(engine, self._failed, status=session.set_status,
                                title="Blocks side by side")
        self.prompt_jobs = ViewJobs(engine, self._failed, controls=self.controls,
                                    status=session.set_status, title="Blocks on the prompt")
        self.drawing = BlocksDrawing()
        self.roles_text, self.parts_text, self.words = QLabel(), QLabel(), QLabel(EMPTY)
        for label in (self.roles_text, self.parts_text, self.words):
            label.setWordWrap(True)
            label.setTextFormat(Qt.RichText)
            label.setTextInteractionFlags(Qt.TextSelectableByMouse)
            label.setAlignment(Qt.AlignTop | Qt.AlignLeft)
        self.role_box = QComboBox()
        self.role_box.currentIndexChanged.connect(lambda _i: self.draw_values())
        self.plot_widget = plot_widget()
        self.plot = self.plot_widget.getPlotItem()
        self.plot.setLabel("left", "density")
        self.plot.setLabel("bottom", "value")
        self.plot.getAxis("left").enableAutoSIPrefix(False)  # 0.4, not "400 (x0.001)"
        self.plot_widget.setMinimumHeight(230)
        set_empty(self.plot, EMPTY)
        self.tabs = QTabWidget()
        self.tabs.addTab(self._drawing_page(), "The blocks")
        self.tabs.addTab(scrolling(self.roles_text), "Roles")
        self.tabs.addTab(scrolling(self.parts_text), "Parameters")
        self.tabs.addTab(self._prompt_page(), "On the prompt")
        bar = QHBoxLayout()
        bar.addWidget(QLabel("Beside:"))
        bar.addWidget(self.other, 1)
        layout = QVBoxLayout(self)
        layout.addLayout(bar)
        layout.addWidget(self.tabs, 1)
        session.modelChanged.connect(self._new_model)
        self._new_model()

    def _drawing_page(self) -> QWidget:
        page = QWidget()
        column = QVBoxLayout(page)
        column.addWidget(self.drawing, 1)
        caption = QLabel("Each block in its own order, from the top; a dashed line joins the "
                         "steps that do the same job. Roles says how each block does it, "
                         "Parameters what each spends, On the prompt what each computes.")
        caption.setWordWrap(True)
        column.addWidget(caption)
        return page

    def _prompt_page(self) -> QWidget:
        page = QWidget()
        column = QVBoxLayout(page)
        row = QHBoxLayout()
        for w in (*self.controls.widgets(), QLabel("Role:"), self.role_box):
            row.addWidget(w)
        row.addStretch(1)
        column.addLayout(row)
        column.addWidget(self.plot_widget, 1)
        column.addWidget(self.words)
        return page

    # ------------------------------------------------------------------ requests
    def _new_model(self) -> None:
        """Another model is loaded: the presets of the other family, the closest first."""
        info = self.session.model
        self.figures.forget()
        self.prompt_jobs.forget()
        self.values = None
        self.other.clear()
        if info is None:
            return
        self.other.addItems(list(others_for(info.config)))
        self.refresh()

    def refresh(self) -> None:
        """The drawing now; the roles, parameters and caches from the models, as a job."""
        info, name = self.session.model, self.other.currentText()
        if info is None or not name:
            return
        cfg = preset(name)
        mine = info.label.split(" · ")[0][:40]  # its name, without the notes after it
        self.drawing.draw((order_of(info.config), order_of(cfg)),
                          (f"{mine} · {family_name(info.config)}", f"{name} · {family_name(cfg)}"))
        self.values = None
        self.draw_values()
        labels = (mine, f"{name} (random weights)")

        def job(ctx):
            return compare(ctx.model, shape_only(name), labels)

        self.figures.run(job, "compare blocks", finished=self.show_comparison)

    def show_comparison(self, c: Comparison) -> None:
        self.comparison = c
        rows = [[r.name, *r.ways] for r in c.roles]
        self.roles_text.setText(_table(["", *c.labels], rows))
        self.parts_text.setText(parameters_html(c))
        keep = self.role_box.currentText()
        self.role_box.blockSignals(True)
        self.role_box.clear()
        self.role_box.addItems([r.name for r in c.roles if all(r.nodes)])
        self.role_box.setCurrentText(keep)
        self.role_box.blockSignals(False)

    def run_prompt(self) -> None:
        c, prompt, name = self.comparison, self.session.prompt, self.other.currentText()
        if prompt is None or prompt.batch is not None or c is None:
            self.words.setText("Run a prompt first (Ctrl+Enter; one prompt, not a batch): "
                               "both models read its tokens.")
            return
        ids = list(prompt.ids)
        nodes = [[r.nodes[i] for r in c.roles if all(r.nodes)] for i in (0, 1)]
        rotary = [i for i, cfg in enumerate((self.session.model.config, preset(name)))
                  if role(order_of(cfg), Role.KEYS_ROPE) is not None]

        def job(ctx):
            other = random_model(name, seed=0, should_stop=ctx.should_stop).model
            models = (ctx.model, other)
            values = tuple(prompt_values(m, ids, n) for m, n in zip(models, nodes))
            shift = None
            if rotary and len(ids) > 1:  # the shifts that keep the prompt in its context
                rope = models[rotary[0]]
                shifts = tuple(s for s in SHIFTS if s + len(ids) <= rope.cfg.context_length)
                shift = rope_shift(rope, ids, shifts=shifts)
            return values, shift

        self.words.setText(f"Running the prompt through both models ({name} is built first)…")
        self.prompt_jobs.run(job, "blocks on the prompt", finished=self.show_values)

    def _failed(self, message: str) -> None:
        self.words.setText(f"The comparison could not be made: {html.escape(message)}")

    # ------------------------------------------------------------------ the prompt
    def show_values(self, answer) -> None:
        self.values, self.shift = answer
        self.draw_values()

    def draw_values(self) -> None:
        self.plot.clear()
        c = self.comparison
        role = next((r for r in c.roles if r.name == self.role_box.currentText()), None) \
            if c is not None else None
        if self.values is None or role is None:
            set_empty(self.plot, EMPTY)
            if self.values is None:
                self.words.setText(EMPTY)
            return
        set_empty(self.plot, None)
        arrays = [self.values[i][role.nodes[i]].array.ravel() for i in (0, 1)]
        finite = np.concatenate([a[np.isfinite(a)] for a in arrays])
        lo, hi = np.percentile(finite, [0.5, 99.5]) if finite.size else (-1.0, 1.0)
        edges = np.linspace(lo, hi if hi > lo else lo + 1, 61)
        lines = []
        for i, a in enumerate(arrays):
            counts, _ = np.histogram(a, edges, density=True)
            self.plot.plot(edges, counts, stepMode="center", pen=pg.mkPen(PENS[i], width=2))
            near = float(np.mean(np.abs(a) <= NEAR_ZERO))
            lines.append(f"<span style='color:{PENS[i]}'>■</span> <b>{html.escape(c.labels[i])}"
                         f"</b> {html.escape(role.nodes[i])}: std {a.std():.4g}, mean "
                         f"{a.mean():.4g}, {near:.1%} within ±{NEAR_ZERO} of 0 — "
                         f"{html.escape(role.ways[i])}")
        set_title(self.plot, f"{role.name} on the prompt, block 0 (0.5–99.5 percentile)")
        self.words.setText("<br>".join(lines + self._rope_words()))

    def _rope_words(self) -> list[str]:
        r = self.shift
        if r is None:
            return []
        scores = ", ".join(f"{s:+.6g}" for s in r.live)
        return [f"<b>RoPE</b>: block {r.block} head {r.head}, the last token's query against "
                f"the first token's key ({r.query} positions apart), both moved on by "
                f"{', '.join(map(str, r.shifts))}: scores {scores} (the model's own attention "
                f"in float32, within {r.spread(r.live):.1g} of each other: its rounding of cos "
                f"and sin at far positions); worked in float64 they are "
                f"{r.spread(r.worked):.1g} apart — the same score wherever the two stand: "
                "only their distance counts."]
