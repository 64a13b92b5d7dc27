"""The main window: assembles the views in docks, the menus and shortcuts, the status
bar, and wires the session to the engine's thread. Owns no model and draws nothing
itself."""

from __future__ import annotations

import dataclasses
import gc
import os
import sys

import torch
from PySide6.QtCore import QSettings, Qt, QThread, QTimer, Signal, Slot
from PySide6.QtGui import QAction, QKeySequence
from PySide6.QtWidgets import (QDockWidget, QFileDialog, QLabel, QMainWindow, QMessageBox,
                               QProgressBar, QTabBar, QVBoxLayout, QWidget)

from .. import __version__
from ..core import hub
from ..core.config import PRESETS
from ..core.generation import GenerationSettings
from .attention_view import AttentionView
from .block_graph import BlockGraphView
from .distributions import DistributionsView
from .divergence_view import DivergenceView
from .explanation_view import ExplanationView
from .engine import Engine, ModelInfo, ModelSpec, PassResult
from .first_run import FirstRunBanner
from .gelu_view import GeluView
from .generation_panel import GenerationPanel
from .inspector import InspectorView
from .jobs import JobRunner
from .learn_view import LearnView
from .lens_view import LensView
from .ln_compare import LnCompareView
from .session import Session
from .train_panel import TrainPanel


class MainWindow(QMainWindow):
    requestLoad = Signal(object)
    requestAnalyse = Signal(str)
    requestBatch = Signal(object)
    requestDrop = Signal()
    requestGenerate = Signal(str, object)
    requestTrain = Signal(object, object, str)
    requestGradients = Signal(object, str, int)

    def __init__(self, spec: ModelSpec | None = None, settings: QSettings | None = None) -> None:
        super().__init__()
        self.setWindowTitle("GPT Block Explorer")
        self.settings = settings or QSettings("GPT Block Explorer", "gpt-block-explorer")
        self.session = Session()
        self.running = False
        self.loading = False
        self._step_times: list[float] = []
        self.warn = QMessageBox.warning  # replaced where no one can click a dialog away

        # views
        self.graph = BlockGraphView(self.session)
        self.inspector = InspectorView(self.session)
        self.generation = GenerationPanel(self.session)
        self.banner = FirstRunBanner(self.settings)
        central = QWidget()
        column = QVBoxLayout(central)
        column.setContentsMargins(0, 0, 0, 0)
        column.setSpacing(0)
        column.addWidget(self.banner)
        column.addWidget(self.graph, 1)
        self.setCentralWidget(central)
        self.jobs = JobRunner("downloads", self)  # work that needs no model: downloads
        self._get_gpt2 = None
        self.gelu = GeluView(self.session)
        self.distributions = DistributionsView(self.session)
        self.attention = AttentionView(self.session)
        self.lens = LensView(self.session)
        self.explanation = ExplanationView(self.session)
        self.divergence = DivergenceView(self.session)
        self.learn = LearnView(self.session)
        self.ln_compare = LnCompareView(self.session)
        self.train_panel = TrainPanel()
        self.inspector_dock = self._dock("Tensor inspector", "inspector", self.inspector,
                                         Qt.RightDockWidgetArea)
        self.plot_docks = [self._dock(title, name, widget, Qt.RightDockWidgetArea) for title, name, widget in (
            ("Explain", "explain", self.explanation), ("Learn", "learn", self.learn),
            ("GELU", "gelu", self.gelu), ("Distributions", "distributions", self.distributions),
            ("Attention", "attention", self.attention), ("Logit lens", "lens", self.lens),
            ("Pre-LN vs Post-LN", "ln_compare", self.ln_compare),
            ("Divergence", "divergence", self.divergence))]
        for dock in self.plot_docks:
            self.tabifyDockWidget(self.inspector_dock, dock)
            if hasattr(dock.widget(), "visibility_changed"):  # lazy views redraw when shown
                dock.visibilityChanged.connect(dock.widget().visibility_changed)
        self.inspector_dock.raise_()
        self.generation_dock = self._dock("Prompt and generation", "generation",
                                          self.generation, Qt.BottomDockWidgetArea)
        self.train_dock = self._dock("Train", "train", self.train_panel, Qt.RightDockWidgetArea)
        self.tabifyDockWidget(self.plot_docks[-1], self.train_dock)
        self.inspector_dock.raise_()
        self._full_tab_titles()

        self._default_state = self.saveState()

        # status bar
        self.model_label = QLabel("no model")
        self.busy = QProgressBar()
        self.busy.setRange(0, 0)
        self.busy.setMaximumWidth(120)
        self.busy.hide()
        self.status_text = QLabel()
        self.statusBar().addWidget(self.model_label, 1)
        self.statusBar().addPermanentWidget(self.status_text)
        self.statusBar().addPermanentWidget(self.busy)

        # the engine's thread; leave the GUI a core
        torch.set_num_threads(max(1, (os.cpu_count() or 2) - 1))
        # The engine's Python code holds the GIL between torch calls; hand it over to the
        # GUI thread after 1 ms instead of 5 ms, so slots stay short while it works.
        sys.setswitchinterval(0.001)
        self.thread = QThread(self)
        self.thread.setObjectName("engine")
        self.engine = Engine()
        self.engine.moveToThread(self.thread)
        self._idle_probe = QTimer(self, singleShot=True, interval=40)
        self._idle_probe.timeout.connect(self._gui_caught_up)
        self.requestLoad.connect(self.engine.load)
        self.requestAnalyse.connect(self.engine.analyse)
        self.requestBatch.connect(self.engine.analyse_batch)
        self.requestDrop.connect(self.engine.drop_retired)
        self.requestGenerate.connect(self.engine.generate)
        self.requestTrain.connect(self.engine.train)
        self.engine.modelLoaded.connect(self.on_model_loaded)
        self.engine.loadFailed.connect(self.on_load_failed)
        self.engine.progress.connect(self.on_progress)
        self.engine.promptDone.connect(self.on_prompt_done)
        self.engine.stepDone.connect(self.on_step_done)
        self.engine.generationDone.connect(self.on_generation_done)
        self.engine.failed.connect(self.on_failed)
        self.lens.lensRequested.connect(self.engine.lens)
        self.engine.lensDone.connect(self.lens.show_rows)
        self.ln_compare.compareRequested.connect(self.engine.compare)
        self.ln_compare.gradientsRequested.connect(self.start_gradients)
        self.requestGradients.connect(self.engine.gradients)
        self.ln_compare.stopRequested.connect(self.engine.stop_event.set)
        self.engine.compareDone.connect(self.ln_compare.show_runs)
        self.engine.compareDone.connect(self.on_compare_done)
        self.engine.gradientProgress.connect(self.ln_compare.show_progress)
        self.engine.gradientsDone.connect(self.ln_compare.show_gradients)
        self.train_panel.trainRequested.connect(self.start_training)
        self.train_panel.stopRequested.connect(self.engine.stop_event.set)
        self.train_panel.loadRequested.connect(lambda path: self.load_model(ModelSpec(checkpoint=path)))
        self.engine.trainEvent.connect(self.train_panel.on_event)
        self.engine.trainDone.connect(self.on_training_done)
        self.divergence.diffRequested.connect(self.engine.diff)
        self.engine.diffDone.connect(self.divergence.show_result)
        self.divergence.firstFound.connect(self.graph.mark_divergence)
        self.thread.start()

        self.banner.downloadRequested.connect(lambda: self.get_gpt2(start="gpt2"))
        self.banner.openFolderRequested.connect(self.open_folder)
        self.banner.openFileRequested.connect(self.open_checkpoint)
        self.banner.trainRequested.connect(self.show_training)
        self.generation.runRequested.connect(self.run)
        self.generation.batchRequested.connect(self.run_batch)
        self.generation.stopRequested.connect(self.stop)
        self._menus()
        self._restore()
        gc.freeze()  # the widgets live as long as the window: keep them out of GC passes
        self.load_model(spec or self._last_spec())

    def _dock(self, title: str, name: str, widget, area) -> QDockWidget:
        dock = QDockWidget(title, self)
        dock.setObjectName(name)
        dock.setWidget(widget)
        self.addDockWidget(area, dock)
        dock.dockLocationChanged.connect(lambda _area: self._full_tab_titles())
        return dock

    def _full_tab_titles(self) -> None:
        """Tabbed docks show whole titles and scroll buttons: with ten tabs in one dock
        area, eliding cut the titles to 'GE…' and 'Le…'."""
        for bar in self.findChildren(QTabBar):
            if bar.parent() is self:  # the main window's dock tab bars, not a view's tabs
                bar.setElideMode(Qt.ElideNone)
                bar.setUsesScrollButtons(True)

    # ------------------------------------------------------------------ menus
    def _action(self, menu, text: str, slot, shortcut=None, tip: str = "") -> QAction:
        action = QAction(text, self)
        if shortcut is not None:
            action.setShortcuts(shortcut if isinstance(shortcut, list) else [shortcut])
        action.setStatusTip(tip)
        action.triggered.connect(slot)
        menu.addAction(action)
        return action

    def _menus(self) -> None:
        file_menu = self.menuBar().addMenu("&File")
        self.get_gpt2_action = self._action(
            file_menu, "&Get GPT-2…", self.get_gpt2, QKeySequence("Ctrl+Shift+G"),
            "Download GPT-2 (124M to 1.5B) from the Hugging Face Hub, with progress and resume")
        self._action(file_menu, "&Choose model…", self.choose_model, QKeySequence("Ctrl+M"),
                     "GPT-2 from the Hugging Face cache, a checkpoint, or a random preset")
        self._action(file_menu, "&Open checkpoint…", self.open_checkpoint, QKeySequence.Open,
                     "Load a checkpoint file (.pth, .safetensors, .bin, model.ckpt.index)")
        self._action(file_menu, "Open &folder…", self.open_folder, QKeySequence("Ctrl+Shift+O"),
                     "Load a model folder: the book's gpt2/124M or a Hugging Face folder")
        presets = file_menu.addMenu("Random &preset (untrained)")
        for name in PRESETS:
            self._action(presets, name, lambda _=False, n=name: self.load_model(ModelSpec(preset=n)))
        self._action(file_menu, "&Default model", lambda: self.load_model(ModelSpec()))
        file_menu.addSeparator()
        self._action(file_menu, "&Quit", self.close, QKeySequence.Quit)
        run_menu = self.menuBar().addMenu("&Run")
        self.generate_action = self._action(
            run_menu, "&Generate", self.generation.request_run,
            [QKeySequence("Ctrl+Return"), QKeySequence("Ctrl+Enter")],
            "Run the prompt through the model and generate")
        self.generate_action.setShortcutContext(Qt.ApplicationShortcut)
        self.stop_action = self._action(run_menu, "&Stop", self.stop, QKeySequence("Esc"),
                                        "Stop before the next token")
        self.stop_action.setShortcutContext(Qt.ApplicationShortcut)
        view_menu = self.menuBar().addMenu("&View")
        view_menu.addAction(self.inspector_dock.toggleViewAction())
        for dock in self.plot_docks:
            view_menu.addAction(dock.toggleViewAction())
        view_menu.addAction(self.generation_dock.toggleViewAction())
        view_menu.addAction(self.train_dock.toggleViewAction())
        self._action(view_menu, "&Reset layout", self.reset_layout)
        help_menu = self.menuBar().addMenu("&Help")
        self._action(help_menu, "&About", self.about)

    # ------------------------------------------------------------------ actions
    def load_model(self, spec: ModelSpec) -> None:
        self.loading = True
        self.engine.stop_event.clear()  # here, not in the engine: an early Esc must count
        self.busy.show()
        self.model_label.setText(f"Loading {spec.describe()}…")
        self.requestLoad.emit(spec)

    def choose_model(self) -> None:
        from .model_dialog import ModelDialog
        dialog = ModelDialog(self, self.session.model.spec if self.session.model else None)
        if dialog.exec():
            self.load_model(dialog.spec())

    def open_checkpoint(self) -> None:
        path, _ = QFileDialog.getOpenFileName(
            self, "Open checkpoint", "",
            "Checkpoints (*.safetensors *.bin *.pth *.pt *.ckpt *.index);;All files (*)")
        if path:
            self.load_model(ModelSpec(checkpoint=path))

    def open_folder(self) -> None:
        path = QFileDialog.getExistingDirectory(
            self, "Open a model folder (the book's gpt2/124M, or a Hugging Face folder)")
        if path:
            self.load_model(ModelSpec(checkpoint=path))

    def get_gpt2(self, start: str | None = None):
        """File ▸ Get GPT-2…; ``start`` names a size to download right away."""
        from .get_gpt2 import GetGpt2Dialog
        if self._get_gpt2 is None:
            self._get_gpt2 = GetGpt2Dialog(self.jobs, self)
            self._get_gpt2.modelReady.connect(self._downloaded)
        dialog = self._get_gpt2
        dialog.refresh()
        dialog.show()
        dialog.raise_()
        if start and dialog.job is None:
            names = [m.name for m in hub.GPT2_MODELS]
            dialog.table.selectRow(names.index(start))
            dialog.start()
        return dialog

    @Slot(str)
    def _downloaded(self, repo_id: str) -> None:
        self.load_model(ModelSpec(checkpoint=f"hf:{repo_id}"))
        if self._get_gpt2 is not None:
            self._get_gpt2.close()

    def show_training(self) -> None:
        self.train_dock.show()
        self.train_dock.raise_()
        self.train_panel.start_button.setFocus()

    @Slot(str, object)
    def run(self, text: str, settings: GenerationSettings) -> None:
        if self.running or self.session.model is None:
            return
        self.running = True
        self._step_times = []
        self.engine.stop_event.clear()  # a Stop from an earlier action must not end this one
        self.generation.set_running(True)
        self.busy.show()
        self.requestAnalyse.emit(text)
        self.requestGenerate.emit(text, settings)
        self._save_generation(settings)

    @Slot(object)
    def run_batch(self, prompts: list[str]) -> None:
        """Several prompts in one forward pass (no generation)."""
        if self.running or self.session.model is None:
            return
        self.running = True
        self.engine.stop_event.clear()
        self.generation.set_running(True)
        self.busy.show()
        self.requestBatch.emit(prompts)
        self._save_generation(self.generation.settings())

    @Slot(object, object, str)
    def start_training(self, text_path, settings, out_dir: str) -> None:
        if self.running:
            self.train_panel.set_running(False)
            self.warn(self, "GPT Block Explorer", "Stop the generation first.")
            return
        self.running = True  # the engine thread is busy: no generation meanwhile
        self.engine.stop_event.clear()
        self.generation.set_running(True)
        self.generation.stop_button.setEnabled(False)
        self.busy.show()
        self.requestTrain.emit(text_path, settings, out_dir)

    @Slot(object, str, int)
    def start_gradients(self, depths, scheme: str, seed: int) -> None:
        self.engine.stop_event.clear()
        self.requestGradients.emit(depths, scheme, seed)

    @Slot(str)
    def on_training_done(self, path: str) -> None:
        self.running = False
        self.busy.hide()
        self.generation.set_running(False)
        self.train_panel.on_done(path)

    @Slot()
    def stop(self) -> None:
        if self.running or self.loading:
            self.engine.stop_event.set()  # thread-safe; checked between tokens, blocks, phases
            self.status_text.setText("Stopping…")

    def reset_layout(self) -> None:
        self.restoreState(self._default_state)
        for dock in [self.inspector_dock, self.generation_dock, self.train_dock, *self.plot_docks]:
            dock.show()
        self.inspector_dock.raise_()
        self._full_tab_titles()
        self.generation_dock.raise_()
        self._default_dock_sizes()

    def about(self) -> None:
        import PySide6
        import pyqtgraph
        import tiktoken
        QMessageBox.about(self, "About GPT Block Explorer",
                          f"<b>GPT Block Explorer {__version__}</b><br>See inside a GPT-2 model."
                          f"<br><br>PyTorch {torch.__version__}<br>PySide6 {PySide6.__version__}"
                          f"<br>pyqtgraph {pyqtgraph.__version__}<br>tiktoken {tiktoken.__version__}")

    # ------------------------------------------------------------------ engine results
    @Slot(object)
    def on_model_loaded(self, info: ModelInfo) -> None:
        self.engine.retire(self.session.prompt, *self.session.steps)  # freed by the engine
        self._idle_probe.start()
        self.loading = False
        self.busy.hide()
        self.session.set_model(info)
        self.model_label.setText(f"{'' if info.trained else '⚠ '}{info.label} · {info.size} · "
                                 f"{info.device} · {info.dtype}")
        self.setWindowTitle(f"GPT Block Explorer — {info.label} · {info.size}")
        self.banner.model_loaded(info.trained)
        self.status_text.setText("; ".join(info.notices))
        self.settings.setValue("model/spec", dataclasses.asdict(info.spec))

    @Slot(str)
    def on_load_failed(self, message: str) -> None:
        self.loading = False
        self.busy.hide()
        keep = self.session.model.label if self.session.model else "no model"
        self.model_label.setText(f"{keep} (kept)")
        self.warn(self, "Could not load the model", message)

    @Slot(str)
    def on_progress(self, text: str) -> None:
        self.status_text.setText(text)

    def _gui_caught_up(self) -> None:
        """Once every view has redrawn the new pass (one per loop turn) and painted, let
        the engine go on and free the pass that was replaced."""
        if self.session.pending():
            self._idle_probe.start()  # views still to redraw: look again shortly
            return
        self.engine.gui_idle.set()
        self.requestDrop.emit()  # queued: runs when the engine is free

    @Slot(object)
    def on_prompt_done(self, result: PassResult) -> None:
        # The engine (which cleared gui_idle before sending this) waits until every view
        # has redrawn the pass and painted (_gui_caught_up), or half a second; the pass
        # this one replaces is freed by the engine, not here.
        self.engine.retire(self.session.prompt, *self.session.steps)
        self._idle_probe.start()
        self.session.set_prompt(result)
        note = "; ".join(result.notices)
        what = (f"Batch pass: {result.batch.describe()}," if result.batch is not None
                else f"Prompt pass: {len(result.ids)} tokens")
        self.status_text.setText(f"{what} in {result.seconds:.2f} s" + (f" — {note}" if note else ""))

    @Slot(object)
    def on_step_done(self, result: PassResult) -> None:
        self.session.add_step(result)
        self._step_times.append(result.seconds)
        if len(self._step_times) > 1:
            span = self._step_times[-1] - self._step_times[0]
            rate = (len(self._step_times) - 1) / span if span > 0 else float("nan")
            self.status_text.setText(f"Generating: {len(self._step_times)} tokens, {rate:.1f} tok/s")

    @Slot(str)
    def on_generation_done(self, reason: str) -> None:
        self.running = False
        self.busy.hide()
        self.generation.set_running(False)
        words = {"stopped": "stopped by you", "eot": "reached <|endoftext|>",
                 "max_new_tokens": "reached the token limit", "error": "failed",
                 "batch": "done"}
        self.status_text.setText(f"{self.status_text.text()} — {words.get(reason, reason)}")

    @Slot(object)
    def on_compare_done(self, runs) -> None:
        self.status_text.setText("Pre-LN and Post-LN compared on the prompt")

    @Slot(str)
    def on_failed(self, message: str) -> None:
        self.warn(self, "GPT Block Explorer", message)

    # ------------------------------------------------------------------ settings
    def _last_spec(self) -> ModelSpec:
        saved = self.settings.value("model/spec")
        if isinstance(saved, dict):
            try:
                return ModelSpec(**saved)
            except TypeError:
                pass
        return ModelSpec()

    def _save_generation(self, s: GenerationSettings) -> None:
        p = self.generation
        self.settings.setValue("generation/max_new_tokens", p.max_tokens.value())
        self.settings.setValue("generation/sample", p.sample.isChecked())
        self.settings.setValue("generation/temperature", p.temperature.value())
        self.settings.setValue("generation/top_k", p.top_k.value())
        self.settings.setValue("generation/top_p", p.top_p.value())
        self.settings.setValue("generation/seed", p.seed.value())
        self.settings.setValue("generation/prompt", p.prompt.toPlainText())
        self.settings.setValue("generation/batch", p.batch.isChecked())

    def _restore(self) -> None:
        s, p = self.settings, self.generation
        if s.value("window/geometry") is not None:
            self.restoreGeometry(s.value("window/geometry"))
            self.restoreState(s.value("window/state"))
            self._full_tab_titles()
        else:
            self.resize(1500, 950)
            QTimer.singleShot(0, self._default_dock_sizes)
        p.max_tokens.setValue(int(s.value("generation/max_new_tokens", p.max_tokens.value())))
        p.sample.setChecked(str(s.value("generation/sample", "false")).lower() == "true")
        p.temperature.setValue(float(s.value("generation/temperature", p.temperature.value())))
        p.top_k.setValue(int(s.value("generation/top_k", p.top_k.value())))
        p.top_p.setValue(float(s.value("generation/top_p", p.top_p.value())))
        p.seed.setValue(int(s.value("generation/seed", p.seed.value())))
        p.prompt.setPlainText(str(s.value("generation/prompt", p.prompt.toPlainText())))
        p.batch.setChecked(str(s.value("generation/batch", "false")).lower() == "true")

    def _default_dock_sizes(self) -> None:
        """The graph keeps the room: a short bottom dock, an inspector of moderate width."""
        self.resizeDocks([self.generation_dock], [290], Qt.Vertical)
        self.resizeDocks([self.inspector_dock], [620], Qt.Horizontal)

    def closeEvent(self, event) -> None:  # noqa: N802
        self.settings.setValue("window/geometry", self.saveGeometry())
        self.settings.setValue("window/state", self.saveState())
        self.engine.stop_event.set()
        self.jobs.shutdown()
        self.thread.quit()
        self.thread.wait()
        super().closeEvent(event)
