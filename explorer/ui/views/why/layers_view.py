"""The layer table: one row per block for the position the Why view explains — the
residual stream's norm after the block, each branch's ratio to the shortcut, the
attention's mean entropy, the logit lens's top token, and the block's part of the
explained logit (core.attribution.layer_table); the norms behind them in the cells'
tooltips and in the CSV, which has every column. Sort by any column; click a row for its
block."""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtWidgets import (QHBoxLayout, QHeaderView, QLabel, QPushButton, QTableWidget,
                               QTableWidgetItem, QVBoxLayout, QWidget)

from ....core.attribution.layer_table import write_csv
from ...base.session import Session
from ...base.view_jobs import EngineLike
from ...base.view import ViewHooks
from ...widgets.save_file import save_as

# The columns a laptop's column holds without scrolling, each with the whole name as its
# tooltip; a cell's tooltip has the numbers behind it (every one is in the CSV).
SHOWN = (("Block", "the block (trf_blocks.N)", lambda r: r.block, lambda r: ""),
         ("|stream|\nout", "|stream| after the block (after its feed-forward)",
          lambda r: r.residual_after_ff,
          lambda r: f"|stream| after attention {r.residual_after_attention:.6g}, "
                    f"after the feed-forward {r.residual_after_ff:.6g}"),
         ("att. /\nshortcut", "attention / shortcut: |attention branch| over the stream it "
          "is added to", lambda r: r.attention_ratio,
          lambda r: f"|attention| {r.attention_norm:.6g}; ratio {r.attention_ratio:.6g}"),
         ("ff /\nshortcut", "feed-forward / shortcut: |feed-forward branch| over the stream "
          "it is added to", lambda r: r.ff_ratio,
          lambda r: f"|feed-forward| {r.ff_norm:.6g}; ratio {r.ff_ratio:.6g}"),
         ("entropy\n(nats)", "attention entropy (nats), the mean over heads of this "
          "position's", lambda r: r.entropy, lambda r: f"{r.entropy:.6g}"),
         ("lens\ntop", "lens top token: the logit lens's top token after the block",
          lambda r: r.lens_top, lambda r: f"token id {r.lens_top_id}"),
         ("part of\nlogit", "part of the logit: the block's share of the explained logit",
          lambda r: r.contribution, lambda r: f"{r.contribution:.6g}"))

EMPTY = ("Ask why a token was chosen (the Why tab, Ctrl+Shift+W): its position's layer "
         "table shows here.")


class LayersView(ViewHooks, QWidget):
    def __init__(self, session: Session, engine: EngineLike) -> None:
        super().__init__()
        self.session = session
        self.rows = []
        self.note = QLabel(EMPTY)
        self.note.setWordWrap(True)
        self.export = QPushButton("CSV…")
        self.export.setToolTip("Save the table as CSV")
        self.export.clicked.connect(self.export_csv)
        bar = QHBoxLayout()
        bar.addWidget(self.note, 1)
        bar.addWidget(self.export)
        self.table = QTableWidget(0, len(SHOWN))
        self.table.setHorizontalHeaderLabels([header for header, *_ in SHOWN])
        self.table.horizontalHeader().setSectionResizeMode(QHeaderView.Stretch)  # never scrolls
        self.table.horizontalHeader().setMinimumSectionSize(20)
        for c, (_header, name, *_) in enumerate(SHOWN):
            self.table.horizontalHeaderItem(c).setToolTip(name)
        self.table.verticalHeader().hide()
        self.table.setEditTriggers(QTableWidget.NoEditTriggers)
        self.table.setSelectionBehavior(QTableWidget.SelectRows)
        self.table.cellClicked.connect(self._clicked)
        self.table.horizontalHeader().setSortIndicator(0, Qt.AscendingOrder)  # by block first
        layout = QVBoxLayout(self)
        layout.addLayout(bar)
        layout.addWidget(self.table, 1)
        session.whyChanged.connect(self.refresh)
        self.refresh()

    def refresh(self) -> None:
        why = self.session.why
        self.rows = list(why.layers) if why is not None else []
        self.export.setEnabled(bool(self.rows))
        self.table.setSortingEnabled(False)
        self.table.setRowCount(len(self.rows))
        for r, row in enumerate(self.rows):
            for c, (_header, _name, value_of, tip) in enumerate(SHOWN):
                value, item = value_of(row), QTableWidgetItem()
                if isinstance(value, str):
                    item.setText(repr(value))
                else:
                    item.setData(Qt.DisplayRole, value if isinstance(value, int)
                                 else float(f"{value:.3g}"))  # numbers sort as numbers
                item.setToolTip(tip(row))
                self.table.setItem(r, c, item)
        self.table.setSortingEnabled(True)
        self.note.setText(EMPTY if why is None else
                          f"Why {why.question}: one row per block at this position" +
                          (f", in the model with its {why.interventions} What if "
                           f"intervention{'s' if why.interventions > 1 else ''}."
                           if why.interventions else "."))

    def _clicked(self, row: int, _column: int) -> None:
        item = self.table.item(row, 0)
        if item is not None:
            self.session.set_layer(int(item.data(Qt.DisplayRole)))

    def export_csv(self) -> None:
        if self.rows:
            save_as(self, "Export the layer table", "layers.csv", "CSV (*.csv)",
                    lambda path: write_csv(self.rows, path),
                    lambda m: self.session.report_error("Layer table", m))
