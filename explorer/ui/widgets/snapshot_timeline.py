"""The snapshots a training run has kept, on a slider: step 0 (the random start) … now.
Moving it picks a snapshot (``picked``, after the slider rests); each tick is one
snapshot, labelled with its step and, where an evaluation fell on it, its validation
loss."""

from __future__ import annotations

from PySide6.QtCore import Qt, QTimer, Signal
from PySide6.QtWidgets import QHBoxLayout, QLabel, QSlider, QWidget

from ...core.experiments.snapshots import Snapshot

REST_MS = 250  # the slider rests this long before its snapshot is loaded


class SnapshotTimeline(QWidget):
    picked = Signal(object)  # the Snapshot chosen on the slider

    def __init__(self) -> None:
        super().__init__()
        self.snapshots: list[Snapshot] = []
        self.losses: dict[int, float] = {}  # step -> validation loss, where known
        self.slider = QSlider(Qt.Horizontal)
        self.slider.setTickPosition(QSlider.TicksBelow)
        self.slider.setTickInterval(1)
        self.slider.setPageStep(1)
        self.slider.setToolTip("The weights as they were at each snapshot: the explorer shows "
                               "the one picked (arrow keys step through them)")
        self.label = QLabel("No snapshots yet")
        self._rest = QTimer(self, singleShot=True, interval=REST_MS)
        self._rest.timeout.connect(lambda: self.current() and self.picked.emit(self.current()))
        self.slider.valueChanged.connect(lambda _v: (self._say(), self._rest.start()))
        row = QHBoxLayout(self)
        row.setContentsMargins(0, 0, 0, 0)
        row.addWidget(QLabel("Snapshots:"))
        row.addWidget(self.slider, 1)
        row.addWidget(self.label)
        self.set_snapshots([])

    def set_snapshots(self, snapshots: list[Snapshot]) -> None:
        self.snapshots = list(snapshots)
        self.slider.blockSignals(True)
        self.slider.setRange(0, max(0, len(self.snapshots) - 1))
        self.slider.setValue(self.slider.maximum())
        self.slider.blockSignals(False)
        self.slider.setEnabled(len(self.snapshots) > 1)
        self._say()

    def add(self, snapshot: Snapshot, show: bool) -> None:
        """A new snapshot at the end; ``show``: the slider moves to it (without waiting)."""
        at = self.slider.value()
        self.set_snapshots([s for s in self.snapshots if s.step != snapshot.step] + [snapshot])
        if not show:
            self.slider.blockSignals(True)
            self.slider.setValue(min(at, self.slider.maximum()))
            self.slider.blockSignals(False)
            self._say()

    def set_loss(self, step: int, loss: float) -> None:
        self.losses[step] = loss
        self._say()

    def current(self) -> Snapshot | None:
        return self.snapshots[self.slider.value()] if self.snapshots else None

    def _say(self) -> None:
        snap = self.current()
        if snap is None:
            self.label.setText("No snapshots yet")
            return
        loss = self.losses.get(snap.step)
        self.label.setText(f"step {snap.step:,} ({self.slider.value() + 1} of "
                           f"{len(self.snapshots)} kept)"
                           + (f" · validation loss {loss:.2f}" if loss is not None else ""))
