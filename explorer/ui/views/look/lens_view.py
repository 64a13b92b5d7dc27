"""Logit lens: for one position, the top-5 next tokens read off the residual stream
after each add of every layer (final norm + output head applied there), as a
layers x rank table, so the prediction can be watched forming through the depth.
The numbers come from an engine job (core.analysis.logit_lens: it needs the model)."""

from __future__ import annotations

import csv

from PySide6.QtGui import QBrush, QColor
from PySide6.QtWidgets import (QComboBox, QHBoxLayout, QHeaderView, QLabel, QPushButton,
                               QTableWidget, QTableWidgetItem, QVBoxLayout, QWidget)

from ....core.run.analysis import lens_nodes, logit_lens
from ....core.gpt.nodes import order_of, short_label
from ...base.lazy import LazyRefresh
from ...widgets.save_file import save_as
from ...base.session import Session
from ...base.view_jobs import EngineLike, ViewJobs


class LensView(LazyRefresh, QWidget):
    def __init__(self, session: Session, engine: EngineLike) -> None:
        super().__init__()
        self.session = session
        self.rows = []
        self.position_box = QComboBox()
        self.position_box.setSizeAdjustPolicy(QComboBox.AdjustToMinimumContentsLengthWithIcon)
        self.position_box.setMinimumContentsLength(12)  # a long piece does not widen the view
        self.position_box.currentIndexChanged.connect(lambda _: self.request())
        export = QPushButton("CSV…")
        export.clicked.connect(self.export_csv)
        self.note = QLabel()
        self.note.setWordWrap(True)
        bar = QHBoxLayout()
        bar.addWidget(QLabel("Position:"))
        bar.addWidget(self.position_box, 1)
        bar.addWidget(export)
        self.table = QTableWidget(0, 5)
        self.table.setHorizontalHeaderLabels([f"#{i + 1}" for i in range(5)])
        # five equal columns across the view, each token over its probability: a long
        # piece is cut short ("…"), whole in its tooltip, and nothing scrolls sideways
        self.table.horizontalHeader().setSectionResizeMode(QHeaderView.Stretch)
        self.table.horizontalHeader().setMinimumSectionSize(20)
        self.table.setWordWrap(False)
        layout = QVBoxLayout(self)
        layout.addLayout(bar)
        layout.addWidget(self.note)
        layout.addWidget(self.table, 1)
        self.jobs = ViewJobs(engine, lambda m: self.note.setText(f"The logit lens failed: {m}"),
                             status=session.set_status, title="Logit lens")
        session.on_pass(self.request_refresh)

    def redraw(self) -> None:
        current = self.session.current
        self.position_box.blockSignals(True)
        self.position_box.clear()
        if current is not None:
            if not current.one_position:
                prefix = "s0 " if current.batch is not None else ""  # a batch: its first prompt
                self.position_box.addItems([f"{prefix}{i}: {p!r}" for i, p in enumerate(current.pieces)])
                self.position_box.setCurrentIndex(len(current.pieces) - 1)
            else:
                self.position_box.addItem(f"generation step {current.step}")
        self.position_box.blockSignals(False)
        self.request()

    def request(self) -> None:
        current, info = self.session.current, self.session.model
        if current is None or info is None:
            self.jobs.forget()  # an answer still coming belongs to a pass no longer shown
            self.rows = []
            self.table.setRowCount(0)
            self.note.setText("Run a prompt (Ctrl+Enter) to read the prediction off the "
                              "residual stream after every layer.")
            return
        names = lens_nodes(info.config.n_layers, order_of(info.config))
        arrays = {n: current.views[n].array for n in names
                  if n in current.views and current.views[n].array is not None}
        position = 0 if current.one_position else max(0, self.position_box.currentIndex())
        self.note.setText("Computing…")

        def lens(ctx):  # the pass's own arrays: nothing is copied
            return logit_lens(ctx.model, arrays, position)

        self.jobs.run(lens, "logit lens", finished=self.show_rows)

    def show_rows(self, rows) -> None:
        self.rows = rows
        self.table.setRowCount(len(rows))
        self.table.setVerticalHeaderLabels([short_label(r.name) for r in rows])
        final = rows[-1].top_ids[0] if rows else None
        for r, row in enumerate(rows):
            for c, (tid, piece, p) in enumerate(zip(row.top_ids, row.top_pieces, row.top_probs)):
                item = QTableWidgetItem(f"{piece!r}\n{p:.3g}")
                item.setToolTip(f"{piece!r} (token id {tid}): probability {p:.6g}")
                if tid == final:  # the model's final choice, wherever it appears
                    item.setBackground(QBrush(QColor("#ffe6a8")))
                self.table.setItem(r, c, item)
        self.table.resizeRowsToContents()
        self.note.setText("Rows: the residual stream after each add; highlighted: the model's "
                          "final top token.")

    def export_csv(self) -> None:
        if not self.rows:
            return
        save_as(self, "Export logit lens", "logit_lens.csv", "CSV (*.csv)", self._write_csv,
                lambda m: self.session.report_error("Logit lens", m))

    def _write_csv(self, path) -> None:
        with open(path, "w", newline="", encoding="utf-8") as fh:
            writer = csv.writer(fh)
            writer.writerow(["node", "rank", "token_id", "piece", "probability"])
            for row in self.rows:
                for rank, (tid, piece, p) in enumerate(zip(row.top_ids, row.top_pieces, row.top_probs), 1):
                    writer.writerow([row.name, rank, tid, piece, f"{p:.6g}"])
