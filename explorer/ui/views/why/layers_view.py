"""The layer table: one row per block for the position the Why view explains — the
residual stream's norm after each half, each branch's norm and its ratio to the
shortcut, the attention's mean entropy, the logit lens's top token, and the block's
part of the explained logit (core.attribution.layer_table). Sort by any column; click a
row for its block; export as CSV."""

from __future__ import annotations

from dataclasses import astuple

from PySide6.QtCore import Qt
from PySide6.QtWidgets import (QHBoxLayout, QLabel, QPushButton, QTableWidget,
                               QTableWidgetItem, QVBoxLayout, QWidget)

from ....core.attribution.layer_table import COLUMNS, write_csv
from ...base.session import Session
from ...base.view_jobs import EngineLike
from ...base.view import ViewHooks
from ...widgets.save_file import save_as

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
        self.table = QTableWidget(0, len(COLUMNS) - 1)  # the lens's id goes in a tooltip
        self.table.setHorizontalHeaderLabels([c for c in COLUMNS if c != "lens top id"])
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
            values = astuple(row)
            for c, value in enumerate(values[:9] + values[10:]):
                item = QTableWidgetItem()
                if isinstance(value, str):
                    item.setText(repr(value))
                    item.setToolTip(f"token id {row.lens_top_id}")
                else:
                    item.setData(Qt.DisplayRole, value if isinstance(value, int)
                                 else round(value, 4))  # numbers sort as numbers
                self.table.setItem(r, c, item)
        self.table.setSortingEnabled(True)
        self.table.resizeColumnsToContents()
        self.note.setText(EMPTY if why is None else
                          f"Why {why.question}: one row per block at this position.")

    def _clicked(self, row: int, _column: int) -> None:
        item = self.table.item(row, 0)
        if item is not None:
            self.session.set_layer(int(item.data(Qt.DisplayRole)) - 1)

    def export_csv(self) -> None:
        if self.rows:
            save_as(self, "Export the layer table", "layers.csv", "CSV (*.csv)",
                    lambda path: write_csv(self.rows, path),
                    lambda m: self.session.report_error("Layer table", m))
