"""The Train tab's *Beside*: another training run kept beside the shown one (runs/train,
runs/train-2, …), chosen to draw its evaluations dashed on the same loss axes."""

from __future__ import annotations

from pathlib import Path

from PySide6.QtCore import Signal
from PySide6.QtWidgets import QComboBox, QHBoxLayout, QLabel, QWidget

from ...core.experiments.snapshots import KeptRun, kept_runs


class RunBeside(QWidget):
    chosen = Signal()  # another run (or none) was chosen

    def __init__(self) -> None:
        super().__init__()
        self.combo = QComboBox()
        self.combo.setToolTip("Another run kept beside this one (runs/train, runs/train-2, "
                              "…), its evaluations dashed on the same axes: mini beside "
                              "llama-mini, say, trained on the same text")
        self.combo.activated.connect(lambda _i: self.chosen.emit())
        row = QHBoxLayout(self)
        row.setContentsMargins(0, 0, 0, 0)
        row.addWidget(QLabel("Beside:"))
        row.addWidget(self.combo, 1)

    def fill(self, here: Path) -> str | None:
        """The runs kept beside the run in ``here``, the one chosen kept chosen; the
        model of the run in ``here`` itself (its preset), if it is one."""
        drawn = self.combo.currentData()
        self.combo.clear()
        self.combo.addItem("no other run", None)
        own = None
        for run in kept_runs(here):
            if run.folder.resolve() != here.resolve():
                self.combo.addItem(run.label, run)
            else:
                own = run.preset
        at = next((i for i in range(self.combo.count()) if self.combo.itemData(i) is not None
                   and drawn is not None and self.combo.itemData(i).folder == drawn.folder), 0)
        self.combo.setCurrentIndex(at)
        return own

    def current(self) -> KeptRun | None:
        return self.combo.currentData()
