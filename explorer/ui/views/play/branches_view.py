"""Two branches side by side, at the step where they part: the token each took there,
what each wrote after, and — at the first step whose context differs — each one's
next-token candidates and every node's std at that step, as the inspector reads it, with
the difference, so the same node reads across both. Choose the branches above; a branch
is made by right-clicking a candidate ▸ Continue with this token."""

from __future__ import annotations

from PySide6.QtWidgets import (QComboBox, QHBoxLayout, QLabel, QTableWidget, QTableWidgetItem,
                               QVBoxLayout, QWidget)

from ....core.gpt.nodes import all_hook_names, short_label
from ...base.session import Session, parting
from ...base.view_jobs import EngineLike
from ...base.view import ViewHooks

EMPTY = ("One run so far: right-click a candidate in the next-token chart ▸ Continue with "
         "this token to make a branch, then compare the two here.")
CANDIDATES = 5


class BranchesView(ViewHooks, QWidget):
    def __init__(self, session: Session, engine: EngineLike) -> None:
        super().__init__()
        self.session = session
        self.left, self.right = QComboBox(), QComboBox()
        for box in (self.left, self.right):
            box.setSizeAdjustPolicy(QComboBox.AdjustToContents)  # a branch's whole name
            box.activated.connect(lambda _i: self.refresh(keep=True))
        self.note = QLabel(EMPTY)
        self.note.setWordWrap(True)
        self.table = QTableWidget(0, 4)
        self.table.setEditTriggers(QTableWidget.NoEditTriggers)
        bar = QHBoxLayout()
        for w in (QLabel("Compare"), self.left, QLabel("with"), self.right):
            bar.addWidget(w)
        bar.addStretch(1)
        layout = QVBoxLayout(self)
        layout.addLayout(bar)
        layout.addWidget(self.note)
        layout.addWidget(self.table, 1)
        session.branchesChanged.connect(self.refresh)
        session.stepsChanged.connect(lambda: self.refresh(keep=True))
        self.refresh()

    def refresh(self, keep: bool = False) -> None:
        branches = self.session.branches
        chosen = (self.left.currentIndex(), self.right.currentIndex()) if keep else (
            0, len(branches) - 1)
        for box, index in ((self.left, chosen[0]), (self.right, chosen[1])):
            box.blockSignals(True)
            box.clear()
            box.addItems([label for label, _steps in branches])
            box.setCurrentIndex(max(0, min(index, len(branches) - 1)))
            box.blockSignals(False)
        self.show_pair(self.left.currentIndex(), self.right.currentIndex())

    def show_pair(self, i: int, j: int) -> None:
        branches, prompt = self.session.branches, self.session.prompt
        if prompt is None or len(branches) < 2 or i == j or min(i, j) < 0:
            self.note.setText(EMPTY if len(branches) < 2 else "Choose two different branches.")
            self.table.setRowCount(0)
            return
        a, b = branches[i][1], branches[j][1]
        k = parting(a, b)
        if k is None:
            self.note.setText("These two have not parted yet.")
            self.table.setRowCount(0)
            return
        words = [f"They part at step {k}: {self.session.tokenizer.token_piece(a[k].token_id)!r} against "
                 f"{self.session.tokenizer.token_piece(b[k].token_id)!r}."]
        for (label, steps) in (branches[i], branches[j]):
            words.append(f"{label}: …{self.session.tokenizer.decode([p.token_id for p in steps[k:]])!r}")
        self.note.setText("\n".join(words))
        self._table(a[k + 1] if k + 1 < len(a) else None, b[k + 1] if k + 1 < len(b) else None)

    def _table(self, x, y) -> None:
        """The first step after the parting, both ways: candidates, then every block."""
        cfg = self.session.model.config if self.session.model else None
        self.table.setHorizontalHeaderLabels(["at the next step", self.left.currentText(),
                                              self.right.currentText(), "difference"])
        rows = [(f"candidate {r + 1}", *(self._candidate(p, r) for p in (x, y)), "")
                for r in range(CANDIDATES)]
        if cfg is not None:  # every node, in forward order, as the inspector reads it
            for name in all_hook_names(cfg, include_pattern=False):
                stds = [self._std(p, name) for p in (x, y)]
                if stds == [None, None]:
                    continue
                diff = f"{stds[1] - stds[0]:+.4f}" if None not in stds else ""
                rows.append((f"{short_label(name)} std",
                             *(f"{v:.4f}" if v is not None else "" for v in stds), diff))
        self.table.setRowCount(len(rows))
        for r, row in enumerate(rows):
            for c, text in enumerate(row):
                self.table.setItem(r, c, QTableWidgetItem(text))
        self.table.resizeColumnsToContents()

    @staticmethod
    def _candidate(p, rank: int) -> str:
        if p is None or rank >= len(p.top_ids):
            return ""
        return f"{p.top_pieces[rank]!r} {p.top_probs[rank]:.3f}"

    @staticmethod
    def _std(p, name: str) -> float | None:
        view = p.views.get(name) if p is not None else None
        return None if view is None else float(view.stats.std)
