"""Train: settings for a small GPT trained on a text file (by default "The Verdict"), a
live loss curve (per step, and the periodic train/validation evaluations), the sample
generations as they improve, Stop, and "Load into explorer" for the latest checkpoint.
Training runs in the engine thread; the window stays responsive."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import Signal
from PySide6.QtWidgets import (QComboBox, QDoubleSpinBox, QFileDialog, QFormLayout, QHBoxLayout,
                               QLabel, QLineEdit, QPlainTextEdit, QProgressBar, QPushButton,
                               QSpinBox, QVBoxLayout, QWidget)

from ..core.training import CheckpointEvent, EvalEvent, StepEvent, TrainSettings


class TrainPanel(QWidget):
    trainRequested = Signal(object, object, str)  # text path or None, TrainSettings, out dir
    stopRequested = Signal()
    loadRequested = Signal(str)  # checkpoint path

    def __init__(self, default_out: str = "runs/app-train") -> None:
        super().__init__()
        defaults = TrainSettings()
        self.text_path = QLineEdit()
        self.text_path.setPlaceholderText("The Verdict (built in)")
        browse = QPushButton("Text file…")
        browse.clicked.connect(self._browse)
        self.preset = QComboBox()
        self.preset.addItems(["mini", "tiny"])
        self.steps = QSpinBox()
        self.steps.setRange(1, 100_000)
        self.steps.setValue(defaults.max_steps)
        self.lr = QDoubleSpinBox()
        self.lr.setDecimals(5)
        self.lr.setRange(1e-5, 1e-1)
        self.lr.setSingleStep(1e-4)
        self.lr.setValue(defaults.lr)
        self.minutes = QDoubleSpinBox()
        self.minutes.setRange(0, 24 * 60)
        self.minutes.setSpecialValueText("no limit")
        self.minutes.setToolTip("Stop after this many minutes even if the steps are not done")
        self.batch = QSpinBox()
        self.batch.setRange(1, 256)
        self.batch.setValue(defaults.batch_size)
        self.out_dir = QLineEdit(default_out)
        text_row = QHBoxLayout()
        text_row.addWidget(self.text_path, 1)
        text_row.addWidget(browse)
        form = QFormLayout()
        form.addRow("Text", text_row)
        form.addRow("Model", self.preset)
        form.addRow("Steps", self.steps)
        form.addRow("Time limit (minutes)", self.minutes)
        form.addRow("Peak learning rate", self.lr)
        form.addRow("Batch size", self.batch)
        form.addRow("Checkpoints in", self.out_dir)

        self.start_button = QPushButton("Start training")
        self.start_button.clicked.connect(self.start)
        self.stop_button = QPushButton("Stop (saves)")
        self.stop_button.setEnabled(False)
        self.stop_button.clicked.connect(self.stopRequested.emit)
        self.load_button = QPushButton("Load into explorer")
        self.load_button.setEnabled(False)
        self.load_button.clicked.connect(lambda: self.loadRequested.emit(self.checkpoint))
        self.progress = QProgressBar()
        self.status = QLabel("Trains on this machine's CPU: the default takes a few minutes.")
        self.status.setWordWrap(True)
        buttons = QHBoxLayout()
        for b in (self.start_button, self.stop_button, self.load_button):
            buttons.addWidget(b)

        self.plot = pg.PlotWidget(background="w")
        self.plot.addLegend(offset=(10, 10))
        self.plot.setLabel("bottom", "step")
        self.plot.setLabel("left", "cross-entropy loss")
        self.step_curve = self.plot.plot([], [], pen=pg.mkPen("#9bb8e0", width=1), name="train (each step)")
        self.train_curve = self.plot.plot([], [], pen=pg.mkPen("#1f4e8c", width=2), symbol="o",
                                          symbolSize=6, symbolBrush="#1f4e8c", name="train (evaluation)")
        self.val_curve = self.plot.plot([], [], pen=pg.mkPen("#d2691e", width=2), symbol="s",
                                        symbolSize=6, symbolBrush="#d2691e", name="validation")
        self.samples = QPlainTextEdit()
        self.samples.setReadOnly(True)
        self.samples.setPlaceholderText("Sample generations appear here at each evaluation.")

        left = QVBoxLayout()
        left.addLayout(form)
        left.addLayout(buttons)
        left.addWidget(self.progress)
        left.addWidget(self.status)
        left.addStretch(1)
        right = QVBoxLayout()
        right.addWidget(self.plot, 2)
        right.addWidget(self.samples, 1)
        layout = QHBoxLayout(self)
        layout.addLayout(left, 1)
        layout.addLayout(right, 2)
        self.checkpoint = ""
        self._reset()

    def _browse(self) -> None:
        path, _ = QFileDialog.getOpenFileName(self, "Text to train on", "", "Text (*.txt);;All files (*)")
        if path:
            self.text_path.setText(path)

    def _reset(self) -> None:
        self.steps_seen: list[tuple[int, float]] = []
        self.evals: list[EvalEvent] = []
        self.step_curve.setData([], [])
        self.train_curve.setData([], [])
        self.val_curve.setData([], [])

    def settings(self) -> TrainSettings:
        return TrainSettings(preset=self.preset.currentText(), max_steps=self.steps.value(),
                             lr=self.lr.value(), min_lr=min(self.lr.value(), TrainSettings().min_lr),
                             batch_size=self.batch.value(),
                             max_minutes=self.minutes.value() or None,
                             warmup_steps=min(TrainSettings().warmup_steps, self.steps.value() // 5))

    def start(self) -> None:
        self._reset()
        self.samples.clear()
        self.set_running(True)
        self.progress.setMaximum(self.steps.value())
        self.progress.setValue(0)
        path = self.text_path.text().strip() or None
        self.trainRequested.emit(path, self.settings(), self.out_dir.text().strip() or "runs/app-train")

    def set_running(self, running: bool) -> None:
        self.start_button.setEnabled(not running)
        self.stop_button.setEnabled(running)

    # ------------------------------------------------------------------ events
    def on_event(self, event) -> None:
        if isinstance(event, StepEvent):
            self.steps_seen.append((event.step, event.loss))
            steps = np.array(self.steps_seen)
            self.step_curve.setData(steps[:, 0], steps[:, 1])
            self.progress.setValue(event.step)
            self.status.setText(f"step {event.step}: loss {event.loss:.3f}, lr {event.lr:.2e}, "
                                f"{event.tokens_per_second:,.0f} tokens/s, {event.elapsed:,.0f} s")
        elif isinstance(event, EvalEvent):
            self.evals.append(event)
            x = [e.step for e in self.evals]
            self.train_curve.setData(x, [e.train_loss for e in self.evals])
            self.val_curve.setData(x, [e.val_loss for e in self.evals])
            self.samples.appendPlainText(f"step {event.step} (validation loss {event.val_loss:.2f}): "
                                         f"{event.sample}\n")
        elif isinstance(event, CheckpointEvent):
            self.checkpoint = event.path
            self.load_button.setEnabled(True)
            self.load_button.setToolTip(event.path)

    def on_done(self, path: str) -> None:
        self.set_running(False)
        if path:
            self.checkpoint = path
            self.load_button.setEnabled(True)
            self.status.setText(f"{self.status.text()} — saved {Path(path).name}; "
                                "load it into the explorer to look inside")


def save_loss_figure(path: str, steps: list[tuple[int, float]], evals: list[dict]) -> None:
    """The loss curve as a PNG, rendered offscreen (for ``gpt-explorer train --plot``)."""
    import os
    import sys

    os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
    from PySide6.QtWidgets import QApplication

    app = QApplication.instance() or QApplication(sys.argv[:1])
    plot = pg.PlotWidget(background="w")
    plot.resize(900, 500)
    plot.addLegend(offset=(10, 10))
    plot.setLabel("bottom", "step")
    plot.setLabel("left", "cross-entropy loss")
    plot.showGrid(x=True, y=True, alpha=0.2)
    if steps:
        arr = np.array(steps)
        plot.plot(arr[:, 0], arr[:, 1], pen=pg.mkPen("#9bb8e0", width=1), name="train (each step)")
    if evals:
        x = [e["step"] for e in evals]
        plot.plot(x, [e["train_loss"] for e in evals], pen=pg.mkPen("#1f4e8c", width=2), symbol="o",
                  symbolBrush="#1f4e8c", name="train (evaluation)")
        plot.plot(x, [e["val_loss"] for e in evals], pen=pg.mkPen("#d2691e", width=2), symbol="s",
                  symbolBrush="#d2691e", name="validation")
    plot.show()
    app.processEvents()
    if not plot.grab().save(path):
        raise ValueError(f"could not write {path}")
    plot.close()
