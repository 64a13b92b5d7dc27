"""The Model panel: where the loaded model's parameter count comes from — every
component's count, share and size per block, the totals with the output head tied and
untied, their memory in the loaded dtype and in float32, and what the figures in the
literature (124M, 117M, the book's 163,009,536) count (core.sizes)."""

from __future__ import annotations

import html

from PySide6.QtCore import Qt
from PySide6.QtWidgets import (QAbstractItemView, QComboBox, QHBoxLayout, QHeaderView, QLabel,
                               QTableWidget, QTableWidgetItem, QVBoxLayout, QWidget)

from ....core.gpt.sizes import feed_forward_cost, sizes
from ....core.lessons.chapter_plan import chapter_plan
from ...base.session import Session
from ...base.view_jobs import EngineLike
from ...base.view import ViewHooks

BYTES = {"float32": 4, "float16": 2, "bfloat16": 2, "float64": 8}
COLUMNS = ("component", "parameters", "share", "per block")


class ModelView(ViewHooks, QWidget):
    def __init__(self, session: Session, engine: EngineLike) -> None:
        super().__init__()
        self.session = session
        self.title = QLabel("No model loaded yet.")
        self.title.setWordWrap(True)
        self.table = QTableWidget(0, len(COLUMNS))
        self.table.setHorizontalHeaderLabels(COLUMNS)
        self.table.verticalHeader().hide()
        self.table.setEditTriggers(QAbstractItemView.NoEditTriggers)
        header = self.table.horizontalHeader()
        header.setSectionResizeMode(0, QHeaderView.Stretch)
        for i in range(1, len(COLUMNS)):
            header.setSectionResizeMode(i, QHeaderView.ResizeToContents)
        self.notes = QLabel()
        self.notes.setWordWrap(True)
        self.notes.setTextFormat(Qt.RichText)
        self.notes.setTextInteractionFlags(Qt.TextSelectableByMouse)
        # the feed-forward's width as a choice: what 2x, 4x (the book's) or 8x costs
        self.width_box = QComboBox()
        self.width_box.addItems(["2 × emb_dim", "4 × emb_dim (GPT-2, the book)", "8 × emb_dim"])
        self.width_box.setCurrentIndex(1)
        self.width_box.setToolTip("What the feed-forward's hidden width costs: capacity against "
                                  "parameters and compute")
        self.width_cost = QLabel()
        self.width_cost.setWordWrap(True)
        self.width_box.currentIndexChanged.connect(lambda _: self._show_width())
        width_row = QHBoxLayout()
        width_row.addWidget(QLabel("Feed-forward width:"))
        width_row.addWidget(self.width_box)
        width_row.addStretch(1)
        rows = self.table.verticalHeader()
        self.table.setMinimumHeight(self.table.horizontalHeader().sizeHint().height()
                                    + 8 * rows.defaultSectionSize())  # every row, not 1.5
        layout = QVBoxLayout(self)
        layout.addWidget(self.title)
        layout.addWidget(self.table, 1)
        layout.addLayout(width_row)
        layout.addWidget(self.width_cost)  # the cost under the choice, the column's width
        layout.addWidget(self.notes)
        session.modelChanged.connect(self.refresh)
        self.refresh()

    def _show_width(self) -> None:
        info = self.session.model
        if info is None:
            self.width_cost.clear()
            return
        cfg = info.config
        c = feed_forward_cost(cfg, (2, 4, 8)[self.width_box.currentIndex()])
        matrices = cfg.family.counting.ff_matrices
        whose = (f"this model's is {cfg.hidden_dim:,}, {cfg.hidden_dim / cfg.emb_dim:.2f} × "
                 f"emb_dim, with {matrices} matrices" if cfg.hidden_dim != 4 * cfg.emb_dim
                 or matrices != 2 else "the book's 4 * cfg[\"emb_dim\"] at 4×")
        self.width_cost.setText(
            f"hidden {c.hidden:,} (the code's cfg.hidden_dim; {whose}): {c.parameters:,} "
            f"parameters per block, {c.multiply_adds:,} multiply-adds per token and block; "
            f"{c.model_parameters:,} in the whole model.")

    def refresh(self) -> None:
        info = self.session.model
        if info is None:
            self.title.setText("No model loaded yet.")
            self.table.setRowCount(0)
            self.notes.clear()
            return
        s = sizes(info.config)
        n = info.config.n_layers
        rows = [(r.component, r.count, r.per_block) for r in s.rows]
        rows += [("total, head tied (as GPT-2)" if info.config.tie_weights else
                  "total, head tied", s.tied, None),
                 ("total, head untied (its own matrix)", s.untied, None)]
        self.table.setRowCount(len(rows))
        own = s.tied if info.config.tie_weights else s.untied  # the model's own total is 100 %
        for i, (name, count, per_block) in enumerate(rows):
            cells = (name, f"{count:,}", f"{100 * count / own:.1f}%",
                     f"{per_block:,} × {n}" if per_block else "")
            for j, text in enumerate(cells):
                item = QTableWidgetItem(text)
                if j:
                    item.setTextAlignment(Qt.AlignRight | Qt.AlignVCenter)
                if name.startswith("total"):
                    font = item.font()
                    font.setBold(True)
                    item.setFont(font)
                self.table.setItem(i, j, item)
        loaded = s.tied if info.config.tie_weights else s.untied
        size = BYTES.get(info.dtype, 4)
        self.title.setText(
            f"<b>{html.escape(info.label)}</b> — {html.escape(info.size)}. In memory: "
            f"{s.megabytes(loaded, size):,.2f} MB of weights in {info.dtype}"
            + (f" ({s.megabytes(loaded):,.2f} MB in float32)" if size != 4 else "") + ".")
        plan = chapter_plan(info.config)  # chapter 4's pieces, in this model
        self.notes.setText("<br>".join(html.escape(line) for line in s.notes())
                           + "<br><br><b>Chapter 4's plan, in this model</b><br>"
                           + "<br>".join(html.escape(line) for line in plan))
        self._show_width()
