"""Run, Stop and a progress bar for a view's own engine job: Run starts it (disabled
while it runs), Stop cancels it at its next safe point, the bar follows its
``(done, total)`` reports and hides when it ends."""

from __future__ import annotations

import shiboken6
from PySide6.QtWidgets import QProgressBar, QPushButton

from ..base.jobs import Job


class JobControls:
    def __init__(self, run_text: str, run, tip: str = "") -> None:
        self.run_button = QPushButton(run_text)
        self.run_button.setToolTip(tip)
        self.run_button.clicked.connect(run)
        self.stop_button = QPushButton("Stop")
        self.stop_button.setEnabled(False)
        self.stop_button.clicked.connect(self.stop)
        self.progress = QProgressBar()
        self.progress.setMaximumWidth(130)
        self.progress.hide()
        self.job: Job | None = None

    def widgets(self) -> tuple:
        return self.run_button, self.stop_button, self.progress

    def started(self, job: Job) -> None:
        self.job = job
        self._show(True)

    def report(self, done: int, total: int) -> None:
        self.progress.setMaximum(total)
        self.progress.setValue(done)

    def stop(self) -> None:
        if self.job is not None:
            self.job.cancel()

    def ended(self) -> None:
        self.job = None
        self._show(False)

    def alive(self) -> bool:
        """False once the widgets are deleted (their view's window closed)."""
        return all(shiboken6.isValid(w) for w in self.widgets())

    def _show(self, running: bool) -> None:
        self.run_button.setEnabled(not running)
        self.stop_button.setEnabled(running)
        self.progress.setVisible(running)
        self.progress.setValue(0)
