"""The run and its branches, to choose which one every view shows (a branch is made by
right-clicking a candidate of the next-token chart ▸ Continue with this token)."""

from __future__ import annotations

from PySide6.QtWidgets import QComboBox

from ..base.session import Session


class BranchBox(QComboBox):
    def __init__(self, session: Session) -> None:
        super().__init__()
        self.session = session
        self.setToolTip("The run and its branches (right-click a candidate in the next-token "
                        "chart ▸ Continue with this token): every view shows the chosen one")
        self.activated.connect(session.select_branch)
        session.branchesChanged.connect(self.refresh)
        self.refresh()

    def refresh(self) -> None:
        self.blockSignals(True)
        self.clear()
        self.addItems([label for label, _steps in self.session.branches])
        self.setCurrentIndex(self.session.branch)
        self.blockSignals(False)
        self.setVisible(len(self.session.branches) > 1)  # nothing to choose from until then
