"""GPT-2's block beside the Llama / Qwen block: the loaded model's block and a preset of
the other family, each drawn in its own order with the parts that do the same job
joined; the roles each block plays its way, with its numbers; the parameters each
spends per part and the KV cache each keeps per token (core.lessons.compare_blocks,
read from the models); and on the prompt, each role's values in both models, with
RoPE's point shown on the Llama-family model's own attention (core.lessons.rope_shift).
The figures and the prompt run are engine jobs."""

from __future__ import annotations

import html
from pathlib import Path

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import Qt
from PySide6.QtWidgets import (QComboBox, QFileDialog, QHBoxLayout, QLabel, QTabWidget,
                               QVBoxLayout, QWidget)

from ....core.gpt.config import preset
from ....core.gpt.nodes import Role, order_of, role
from ....core.lessons.compare_blocks import (Comparison, compare, family_name, others_for,
                                             prompt_values, shape_only)
from ....core.lessons.rope_shift import SHIFTS, rope_shift
from ....core.base.state import data_dir
from ....core.experiments.snapshots import kept_runs
from ....core.sources import ModelSpec, open_model, random_model
from ...base.session import Session
from ...base.view import ViewHooks
from ...base.view_jobs import EngineLike, ViewJobs
from ...plots.plot_axes import plot_widget
from ...plots.plot_text import set_empty, set_title
from ...widgets.blocks_drawing import BlocksDrawing
from ...widgets.job_controls import JobControls
from ...widgets.scrolling import scrolling

PENS = ("#1f4e8c", "#d2691e")  # the loaded model's, the other's
NEAR_ZERO = 0.05
EMPTY = "Run a prompt (Ctrl+Enter), then “Compare on the prompt”"
BROWSE = "Other checkpoint or folder…"


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
        self.other.setToolTip("The model set beside the loaded one: a preset of the other "
                              "block family (random weights), a run kept here, or any "
                              "checkpoint or model folder")
        self.other.activated.connect(self._chosen)
        self._other = None  # the checkpoint set beside, once loaded (a preset is built)
        self._other_cfg = None
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
        """Another model is loaded: the presets of the other family (the closest first),
        the runs kept here, and any other checkpoint."""
        info = self.session.model
        self.figures.forget()
        self.prompt_jobs.forget()
        self.values = None
        self.other.clear()
        if info is None:
            return
        for name in others_for(info.config):
            self.other.addItem(name, ModelSpec(preset=name))
        for run in kept_runs(data_dir() / "runs" / "train"):
            self.other.addItem(f"run: {run.label}", ModelSpec(checkpoint=str(run.folder)))
        self.other.addItem(BROWSE, BROWSE)
        self.refresh()

    def _chosen(self, _index: int) -> None:
        """A choice in Beside: "Other checkpoint…" asks for the file first."""
        if self.other.currentData() == BROWSE:
            path, _ = QFileDialog.getOpenFileName(
                self, "A checkpoint to set beside the loaded model", "",
                "Checkpoints (*.safetensors *.pth *.pt *.bin config.json);;All files (*)")
            if not path:
                self.other.setCurrentIndex(0)
                return
            self.choose_checkpoint(path)
            return
        self.refresh()

    def choose_checkpoint(self, path: str) -> None:
        """Set the checkpoint at ``path`` (a file, or a folder's config.json) beside."""
        if Path(path).name == "config.json":  # a Hugging Face folder, picked by its config
            path = str(Path(path).parent)
        at = self.other.count() - 1
        self.other.insertItem(at, Path(path).name, ModelSpec(checkpoint=path))
        self.other.setCurrentIndex(at)
        self.refresh()

    def refresh(self) -> None:
        """The drawing and the roles, parameters and caches: a preset's at once (from its
        shapes), a checkpoint's once the engine has loaded it."""
        info, spec = self.session.model, self.other.currentData()
        if info is None or not isinstance(spec, ModelSpec):
            return
        mine = info.label.split(" · ")[0][:40]  # its name, without the notes after it
        self._other = None
        self.values = None
        if spec.preset:
            name = spec.preset
            self._draw(preset(name), f"{name} · {family_name(preset(name))}")
            labels = (mine, f"{name} (random weights)")
            self.figures.run(lambda ctx: compare(ctx.model, shape_only(name), labels),
                             "compare blocks", finished=self.show_comparison)
            return
        self._other_cfg = None
        self.words.setText(f"Loading {spec.checkpoint} to set it beside…")

        def job(ctx):
            other = open_model(spec, ctx.should_stop)
            return other, compare(ctx.model, other.model, (mine, other.label.split(" · ")[0][:40]))

        self.figures.run(job, "compare blocks", finished=self._loaded)

    def _loaded(self, answer) -> None:
        other, comparison = answer
        self._other = other
        self._draw(other.config, f"{other.label.split(' · ')[0]} · {family_name(other.config)}")
        self.show_comparison(comparison)

    def _draw(self, cfg, title: str) -> None:
        info = self.session.model
        mine = info.label.split(" · ")[0]
        self._other_cfg = cfg
        self.drawing.draw((order_of(info.config), order_of(cfg)),
                          (f"{mine} · {family_name(info.config)}", title))
        self.draw_values()

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
        c, prompt, spec = self.comparison, self.session.prompt, self.other.currentData()
        name = spec.preset if isinstance(spec, ModelSpec) and spec.preset else None
        if name is None and self._other is None:
            self.words.setText("The model beside is still loading (or could not be loaded).")
            return
        if prompt is None or prompt.batch is not None or c is None:
            self.words.setText("Run a prompt first (Ctrl+Enter; one prompt, not a batch): "
                               "both models read its tokens.")
            return
        ids = list(prompt.ids)
        nodes = [[r.nodes[i] for r in c.roles if all(r.nodes)] for i in (0, 1)]
        rotary = [i for i, cfg in enumerate((self.session.model.config, self._other_cfg))
                  if role(order_of(cfg), Role.KEYS_ROPE) is not None]
        loaded = self._other

        def job(ctx):
            other = (random_model(name, seed=0, should_stop=ctx.should_stop) if name
                     else loaded).model
            models = (ctx.model, other)
            values = tuple(prompt_values(m, ids, n) for m, n in zip(models, nodes))
            shift = None
            if rotary and len(ids) > 1:  # the shifts that keep the prompt in its context
                rope = models[rotary[0]]
                shifts = tuple(s for s in SHIFTS if s + len(ids) <= rope.cfg.context_length)
                shift = rope_shift(rope, ids, shifts=shifts)
            return values, shift

        self.words.setText("Running the prompt through both models" +
                           (f" ({name} is built first)…" if name else "…"))
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
