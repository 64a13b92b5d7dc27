"""Train: settings for a small GPT trained on a text file (by default "The Verdict"), a
live loss curve (per step, and the periodic train/validation evaluations), the sample
generations as they improve, Stop, and "Load into explorer" for the latest checkpoint.

Training runs in a process of its own (core.experiments.train_process), watched from a
thread of its own, not the engine's: the explorer stays usable meanwhile and shares no
GIL with the trainer. The snapshots it keeps fill a timeline; the explorer
shows the newest (Follow training) or the one picked, loaded like any checkpoint with the
prompt run again — the model that trains is never the one the views read. At the end the
trained model is loaded; the model before stays one click away."""

from __future__ import annotations

from pathlib import Path

import pyqtgraph as pg
from PySide6.QtCore import QTimer
from PySide6.QtWidgets import (QCheckBox, QComboBox, QDoubleSpinBox, QFileDialog, QGridLayout,
                               QHBoxLayout, QLabel, QLineEdit, QPlainTextEdit, QProgressBar,
                               QPushButton, QSpinBox, QTabWidget, QVBoxLayout, QWidget)

from ....core.sources import ModelSpec
from ....core.base.state import data_dir
from ....core.experiments.train_estimate import MEASURING, Estimate, result_words
from ....core.experiments.snapshots import (Snapshot, SnapshotEvent, list_snapshots, run_folder_of,
                                           run_history)
from ....core.experiments.train_files import free_run_dir, latest_run_dir
from ....core.experiments.train_process import train_in_process
from ....core.experiments.training import CheckpointEvent, EvalEvent, StepEvent, TrainSettings
from ...base.jobs import JobRunner
from ...widgets.run_beside import RunBeside
from ...widgets.snapshot_compare import SnapshotCompare
from ...widgets.snapshot_timeline import SnapshotTimeline
from ...plots.figures import LossCurves
from ...base.session import Session
from ...base.view_jobs import EngineLike, ViewJobs
from ...base.view import ViewHooks


def shown_sample(text: str) -> str:
    """A generated sample on one wrapped line under its step, its line breaks marked ⏎
    in place: one that starts with blank lines does not look empty, and a run of line
    breaks is not a column of bare marks that scrolls its step out of view."""
    return text.replace("\r\n", "\n").replace("\n", "⏎ ").rstrip()


class TrainPanel(ViewHooks, QWidget):
    def __init__(self, session: Session, engine: EngineLike, default_out: str | None = None) -> None:
        super().__init__()
        self.session = session
        self.runner: JobRunner | None = None  # training's own thread, while it trains
        self._own: str | None = None  # the shown run's model (kept_runs' preset)
        self.job = None  # the running training job (asked on its end whether it was stopped)
        self.checkpoint = ""
        self.before: ModelSpec | None = None  # the model loaded when training started
        self.plot = pg.GraphicsLayoutWidget()
        self.curves = LossCurves(self.plot)
        self.samples = QPlainTextEdit()
        self.samples.setReadOnly(True)
        self.samples.setPlaceholderText("Sample generations appear here at each evaluation.")
        self.results = QTabWidget()  # the curve and the samples, each the column's room
        self.results.addTab(self._loss_page(), "Loss curve")
        self.results.addTab(self.samples, "Samples")
        # two snapshots side by side on the prompt, an engine job (the views' thread)
        self.compare = SnapshotCompare(engine, self._prompt_ids, status=session.set_status)
        self.results.addTab(self.compare, "Compare snapshots")
        layout = QVBoxLayout(self)
        layout.addLayout(self._form(default_out))
        layout.addLayout(self._buttons())
        layout.addLayout(self._timeline())
        layout.addWidget(self.progress)
        layout.addWidget(self.status)
        layout.addWidget(self.results, 1)
        self._reset()
        self._timeline_from_disk()
        session.modelChanged.connect(self._follow_model)
        self._follow_model()

    def _loss_page(self) -> QWidget:
        """The loss curve, and another run kept beside this one to draw with it."""
        self.beside = RunBeside()
        self.beside.chosen.connect(self._draw_beside)
        page = QWidget()
        column = QVBoxLayout(page)
        column.setContentsMargins(0, 4, 0, 0)
        column.addWidget(self.beside)
        column.addWidget(self.plot, 1)
        return page

    def _fill_beside(self) -> None:
        """The other runs kept beside the checkpoint folder, the one drawn kept."""
        self._own = self.beside.fill(Path(self.out_dir.text().strip() or "."))
        self._draw_beside()

    def _draw_beside(self) -> None:
        run = self.beside.current()
        own = self.preset.currentText() if self.job is not None else self._own
        self.curves.name_own(own if run is not None else None)
        if run is None:
            self.curves.set_beside(None)
            return
        h = run.history
        self.curves.set_beside(run.preset, [e["step"] for e in h], [e["train_loss"] for e in h],
                               [e["val_loss"] for e in h])

    def _form(self, default_out: str | None) -> QGridLayout:
        """The text, the model, steps, time limit, learning rate, batch, where to save:
        two settings a row."""
        defaults = TrainSettings()
        self.text_path = QLineEdit()
        self.text_path.setPlaceholderText("The Verdict (built in)")
        browse = QPushButton("Text file…")
        browse.clicked.connect(self._browse)
        self.preset = QComboBox()
        self.preset.addItems(["mini", "llama-mini", "tiny"])
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
        self.snapshots = QSpinBox()
        self.snapshots.setRange(0, 100)
        self.snapshots.setValue(defaults.snapshots)
        self.snapshots.setToolTip("Copies of the weights kept while training, most of them "
                                  "early, for the timeline below (0: none)")
        # the platform's data folder, whatever folder the app was started from
        self.out_dir = QLineEdit(default_out or str(latest_run_dir(data_dir() / "runs" / "train")))
        self.out_dir.setToolTip("Checkpoints go here (the full path); a run kept here "
                                "brings its snapshots back to the timeline, and a new run "
                                "goes beside it (…-2, …-3), never over it")
        self.out_dir.editingFinished.connect(lambda: self.job is None and self._timeline_from_disk())
        self.minutes.setSuffix(" min")
        form = QGridLayout()
        form.addWidget(QLabel("Text"), 0, 0)
        form.addWidget(self.text_path, 0, 1, 1, 2)
        form.addWidget(browse, 0, 3)
        for row, pairs in enumerate(((("Model", self.preset), ("Steps", self.steps)),
                                     (("Time limit", self.minutes), ("Peak lr", self.lr)),
                                     (("Batch size", self.batch),
                                      ("Snapshots", self.snapshots))), start=1):
            for col, pair in enumerate(pairs):
                if pair is not None:
                    form.addWidget(QLabel(pair[0]), row, 2 * col)
                    form.addWidget(pair[1], row, 2 * col + 1)
        self.lr.setToolTip("The peak learning rate (after the warm-up)")
        form.addWidget(QLabel("Checkpoints in"), 4, 0)
        form.addWidget(self.out_dir, 4, 1, 1, 3)
        form.setColumnStretch(1, 1)
        form.setColumnStretch(3, 1)
        return form

    def _buttons(self) -> QHBoxLayout:
        """Start, Stop (which saves), Load into explorer; the progress and status below."""
        self.start_button = QPushButton("Start training")
        self.start_button.clicked.connect(self.start)
        self.stop_button = QPushButton("Stop (saves)")
        self.stop_button.setEnabled(False)
        self.stop_button.clicked.connect(self.stop)
        self.load_button = QPushButton("Load into explorer")
        self.load_button.setEnabled(False)
        self.load_button.clicked.connect(
            lambda: self.services.load_model(ModelSpec(checkpoint=self.checkpoint)))
        self.progress = QProgressBar()
        self.status = QLabel("Trains on this machine's CPU; the time left is measured on the "
                             "first steps.")
        self.status.setWordWrap(True)
        buttons = QHBoxLayout()
        for b in (self.start_button, self.stop_button, self.load_button):
            buttons.addWidget(b)
        return buttons

    def _timeline(self) -> QVBoxLayout:
        """The snapshots on a slider; Follow training; back to the model before."""
        self.timeline = SnapshotTimeline()
        self.timeline.picked.connect(self.show_snapshot)
        self.timeline.slider.actionTriggered.connect(self._picked_by_hand)
        self.follow = QCheckBox("Follow training")
        self.follow.setChecked(True)
        self.follow.setToolTip("Show each new snapshot in the explorer as it is taken (the "
                               "prompt runs again on it)")
        self.back_button = QPushButton("Back to the model before")
        self.back_button.setEnabled(False)
        self.back_button.clicked.connect(self.back)
        row = QHBoxLayout()
        row.addWidget(self.follow)
        row.addStretch(1)
        row.addWidget(self.back_button)
        column = QVBoxLayout()
        column.addWidget(self.timeline)
        column.addLayout(row)
        return column

    def _picked_by_hand(self, _action) -> None:
        """A snapshot picked on the slider stays shown: Follow training, which would
        replace it with the next one taken, is unticked, and the window says so."""
        if self.follow.isChecked():
            self.follow.setChecked(False)
            self.session.set_status("Follow training unticked: the snapshot you picked stays "
                                    "shown; tick it again to see each new one as it is taken")

    def _prompt_ids(self) -> list[int] | None:
        """The prompt last run (a batch's first), which snapshots are compared on."""
        p = self.session.prompt
        return None if p is None else list(p.batch.sample(0) if p.batch is not None else p.ids)

    def _follow_model(self) -> None:
        """A training run's model opened (from anywhere: its folder, its file, a
        snapshot): its folder, curve, snapshots and Beside list come to the tab."""
        info = self.session.model
        folder = run_folder_of(info.spec.checkpoint) if info is not None else None
        here = Path(self.out_dir.text().strip() or ".")
        if folder is None or self.job is not None or (here.is_dir() and folder.samefile(here)):
            return
        self.out_dir.setText(str(folder))
        self._timeline_from_disk()

    def _timeline_from_disk(self) -> None:
        """A run kept in the checkpoint folder: its snapshots come back on the slider,
        its evaluations on the loss curve."""
        folder = self.out_dir.text().strip() or "."
        self.timeline.set_snapshots(list_snapshots(folder))
        self.compare.set_snapshots(self.timeline.snapshots)
        history = run_history(folder)
        for h in history:
            self.timeline.set_loss(h["step"], h["val_loss"])
        self.curves.set_evals([h["step"] for h in history], [h["train_loss"] for h in history],
                              [h["val_loss"] for h in history])
        self._fill_beside()

    def show_snapshot(self, snap: Snapshot) -> None:
        """Load the snapshot into the explorer; the prompt runs on it once it is loaded."""
        path = str(snap.path)
        if self.session.model is not None and self.session.model.spec.checkpoint == path:
            return
        self._load(path)

    def _load(self, path: str) -> None:
        if self.before is None and self.session.loaded is not None:
            self.before = self.session.loaded.spec
        self.back_button.setEnabled(self.before is not None)
        # once loaded, the prompt as typed runs on the snapshot's weights
        self.services.load_model(ModelSpec(checkpoint=path),
                                 then=lambda _info: self.services.run_prompt(""))

    def back(self) -> None:
        if self.before is not None:
            self.services.load_model(self.before)
            self.before = None
            self.back_button.setEnabled(False)

    def _end_runner(self, runner: JobRunner) -> None:
        runner.shutdown(5.0)
        if self.runner is runner:
            self.runner = None

    def shutdown(self, wait_s: float) -> bool:
        if self.job is not None:
            self.job.cancel()  # it saves before its next step
        runner, self.runner = self.runner, None
        return runner is None or runner.shutdown(wait_s)

    def _browse(self) -> None:
        path, _ = QFileDialog.getOpenFileName(self, "Text to train on", "", "Text (*.txt);;All files (*)")
        if path:
            self.text_path.setText(path)

    def _reset(self) -> None:
        self.steps_seen: list[tuple[int, float]] = []
        self.evals: list[EvalEvent] = []
        self.curves.set_steps([])
        self.curves.set_evals([], [], [])

    def settings(self) -> TrainSettings:
        return TrainSettings(preset=self.preset.currentText(), max_steps=self.steps.value(),
                             lr=self.lr.value(), min_lr=min(self.lr.value(), TrainSettings().min_lr),
                             batch_size=self.batch.value(),
                             max_minutes=self.minutes.value() or None,
                             warmup_steps=min(TrainSettings().warmup_steps, self.steps.value() // 5),
                             snapshots=self.snapshots.value())

    def start(self) -> None:
        if self.job is not None:
            return
        self._reset()
        self.timeline.set_snapshots([])
        self.compare.set_snapshots([])
        self._before = self.checkpoint
        self.samples.clear()
        self.set_running(True)
        self.progress.setMaximum(self.steps.value())
        self.progress.setValue(0)
        path = self.text_path.text().strip() or None
        settings = self.settings()
        asked = self.out_dir.text().strip() or str(data_dir() / "runs" / "train")
        out = str(free_run_dir(asked))  # a run already there is kept: this one goes beside it
        self.out_dir.setText(out)
        self._fill_beside()  # the run kept there is one to draw beside this one
        kept = f" ({asked} holds an earlier run, kept; this one goes to {out})" if out != asked else ""
        self.session.set_status(f"Training {settings.preset}…{kept}")
        self.estimate = Estimate(None if settings.max_minutes else settings.max_steps,
                                 settings.eval_every, settings.snapshots)
        self.status.setText(f"Training {settings.preset}: {MEASURING}")
        self.session.set_training(f"{settings.preset}: {MEASURING}")
        # a thread of its own, not the engine's: the engine stays free for the views
        self.runner = JobRunner("training", self)
        jobs = ViewJobs(self.runner, self._failed, status=self.session.set_status,
                        title="Training")
        self.job = jobs.run(
            lambda ctx: train_in_process(path, settings, out, ctx.report, ctx.should_stop),
            "training",
            progress=self.on_event, finished=self.on_done, cancelled=lambda: self.on_done(""))

    def stop(self) -> None:
        if self.job is not None:
            self.job.cancel()  # saves a checkpoint before the next step

    def _failed(self, message: str) -> None:
        self.on_done("")
        self.status.setText(f"Training failed: {message}")

    def set_running(self, running: bool) -> None:
        self.start_button.setEnabled(not running)
        self.stop_button.setEnabled(running)

    # ------------------------------------------------------------------ events
    def on_event(self, event) -> None:
        if isinstance(event, StepEvent):
            self.steps_seen.append((event.step, event.loss))
            self.curves.set_steps(self.steps_seen)
            self.progress.setValue(event.step)
            self.estimate.add(event)
            left = self.estimate.text()
            self.status.setText(f"step {event.step}: loss {event.loss:.3f}, lr {event.lr:.2e}, "
                                f"{event.elapsed:,.0f} s; {left}")
            self.session.set_training(f"{self.preset.currentText()} at step {event.step:,} of "
                                      f"{self.progress.maximum():,}: {left}")
        elif isinstance(event, SnapshotEvent):
            self.estimate.add(event)
            follow = self.follow.isChecked()
            snap = Snapshot(event.step, Path(event.path))
            self.timeline.add(snap, show=follow)
            self.compare.set_snapshots(self.timeline.snapshots)
            if follow:
                self.show_snapshot(snap)
        elif isinstance(event, EvalEvent):
            self.estimate.add(event)
            self.timeline.set_loss(event.step, event.val_loss)
            self.evals.append(event)
            self.curves.set_evals([e.step for e in self.evals], [e.train_loss for e in self.evals],
                                  [e.val_loss for e in self.evals])
            self.samples.appendPlainText(f"step {event.step} (validation loss {event.val_loss:.2f}, "
                                         f"estimated on {TrainSettings().eval_batches} batches): "
                                         f"{shown_sample(event.sample)}\n")
        elif isinstance(event, CheckpointEvent):
            self.checkpoint = event.path
            self.load_button.setEnabled(True)
            self.load_button.setToolTip(event.path)

    def on_done(self, path: str) -> None:
        # Stop or Esc asked the job to stop: it saved where it was, it did not finish
        stopped = self.job is not None and self.job.should_stop()
        self.job = None
        self.session.set_training("")
        self.set_running(False)
        runner = self.runner
        if runner is not None:  # its thread ends, once this signal's job has returned
            QTimer.singleShot(0, lambda: self._end_runner(runner))
        new = self.checkpoint and self.checkpoint != self._before  # saved by this run
        last = f"; last checkpoint {Path(self.checkpoint).name}" if new else ""
        self.session.set_status(f"Training {'stopped' if stopped else 'finished'}: saved "
                                f"{Path(path).name}" if path else f"Training stopped{last}")
        self._fill_beside()  # this run is on disk now: its own model names its curves
        if path:
            self.checkpoint = path
            self.load_button.setEnabled(True)
            done = (f"Stopped at step {self.steps_seen[-1][0] if self.steps_seen else 0}."
                    if stopped else result_words(self.evals))
            self.status.setText(f"{done} Saved {Path(path).name}" + (
                "." if stopped else ": loaded into the explorer."))
            if not stopped:  # the trained model is what the explorer shows now (its line
                self._load(path)  # and title name it: 'trained here: …, validation loss …')
