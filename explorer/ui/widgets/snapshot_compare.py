"""Two snapshots of a training run side by side on the prompt: every node's std at each,
the change as a ratio, and each one's next-token candidates (the Train tab's Compare
page; core.experiments.snapshot_compare does the work, as an engine job)."""

from __future__ import annotations

from PySide6.QtWidgets import (QComboBox, QHBoxLayout, QLabel, QPushButton, QTableWidget,
                               QTableWidgetItem, QVBoxLayout, QWidget)

from ...core.experiments.snapshot_compare import SnapshotComparison, compare_snapshots
from ...core.experiments.snapshots import Snapshot
from ...core.gpt.nodes import short_label
from ..base.view_jobs import EngineLike, ViewJobs

EMPTY = "Pick two snapshots and compare them on the prompt."


class SnapshotCompare(QWidget):
    def __init__(self, engine: EngineLike, prompt_ids, status=None) -> None:
        """``prompt_ids()`` gives the prompt to run (the one last run), or None."""
        super().__init__()
        self.prompt_ids = prompt_ids
        self.snapshots: list[Snapshot] = []
        self.result: SnapshotComparison | None = None
        self.jobs = ViewJobs(engine, self._failed, status=status, title="Compare snapshots")
        self.first, self.second = QComboBox(), QComboBox()
        self.button = QPushButton("Compare on the prompt")
        self.button.clicked.connect(self.compare)
        self.note = QLabel(EMPTY)
        self.note.setWordWrap(True)
        self.table = QTableWidget(0, 4)
        self.table.setEditTriggers(QTableWidget.NoEditTriggers)
        self.table.verticalHeader().setVisible(False)
        self.table.setHorizontalHeaderLabels(["node", "first", "second", "ratio"])
        row = QHBoxLayout()
        for w in (QLabel("Step"), self.first, QLabel("against"), self.second, self.button):
            row.addWidget(w)
        row.addStretch(1)
        layout = QVBoxLayout(self)
        layout.addLayout(row)
        layout.addWidget(self.note)
        layout.addWidget(self.table, 1)

    def set_snapshots(self, snapshots: list[Snapshot]) -> None:
        """The run's snapshots; by default its first against its newest."""
        self.snapshots = list(snapshots)
        for box, pick in ((self.first, 0), (self.second, len(snapshots) - 1)):
            box.blockSignals(True)
            box.clear()
            box.addItems([f"{s.step:,}" for s in snapshots])
            box.setCurrentIndex(max(0, pick))
            box.blockSignals(False)
        self.button.setEnabled(len(snapshots) > 1)

    def compare(self) -> None:
        if len(self.snapshots) < 2:
            return
        ids = self.prompt_ids()
        if not ids:
            self.note.setText("Run a prompt first (Ctrl+Enter): the snapshots are compared on it.")
            return
        a, b = (self.snapshots[box.currentIndex()] for box in (self.first, self.second))
        self.note.setText(f"Running the prompt on step {a.step:,} and step {b.step:,}…")
        self.jobs.run(lambda ctx: compare_snapshots(a, b, ids, ctx.should_stop),
                      "compare snapshots", finished=self.show_result)

    def _failed(self, message: str) -> None:
        self.note.setText(f"Could not compare: {message}")

    def show_result(self, result: SnapshotComparison) -> None:
        self.result = result
        a, b = result.steps
        name, ratio = result.largest_change()
        self.note.setText(f"Every node's std at step {a:,} and at step {b:,}, and the ratio; the "
                          f"largest change: {short_label(name)}, ×{ratio:.3g}.")
        self.table.setHorizontalHeaderLabels(["node", f"step {a:,}", f"step {b:,}", "ratio"])
        rows = [(f"candidate {r + 1}", *(f"{c[r][0]!r} {c[r][1]:.3g}" if r < len(c) else ""
                                        for c in result.candidates), "")
                for r in range(max(len(c) for c in result.candidates))]
        rows += [(f"{short_label(n)} std", f"{x:.4f}", f"{y:.4f}",
                  f"×{y / x:.3g}" if x else "") for n, x, y in result.rows]
        self.table.setRowCount(len(rows))
        for r, cells in enumerate(rows):
            for c, text in enumerate(cells):
                self.table.setItem(r, c, QTableWidgetItem(text))
        self.table.resizeColumnsToContents()
