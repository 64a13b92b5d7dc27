"""Which model the window shows, and the ways to another: loading one (on failure or Stop
the previous one stays; a remembered one that is gone falls back to the default), File ▸
Choose model…, Open checkpoint…, Open folder…, Get GPT-2… and Train a small model here.
It writes the window's title and model line, masked while a question is open (their
numbers and Pre-LN / Post-LN could answer it). The window assembles; this controls."""

from __future__ import annotations

import json

from PySide6.QtCore import QObject, Slot
from PySide6.QtWidgets import QFileDialog

from ...core.base.validate import parse_json
from ...core.sources import ModelInfo, ModelSpec
from ...core.weights import hub

CHECKPOINT_FILTER = "Checkpoints (*.safetensors *.bin *.pth *.pt *.ckpt *.index);;All files (*)"
TITLE = "GPT Block Explorer"


class Models(QObject):
    def __init__(self, window) -> None:
        super().__init__(window)
        self.window = window
        self.session, self.engine = window.session, window.engine
        self.loading = False
        self.closing = False  # the window is closing: a load it stopped says nothing
        self.job = None
        self.spec: ModelSpec | None = None  # what is being loaded
        self.remembered = False  # the first load is the last launch's model, which may be gone
        self.title_text, self.model_text = TITLE, "no model"
        self._get_gpt2 = None
        self.session.coverChanged.connect(lambda _facts: self.show_texts())
        window.banner.downloadRequested.connect(lambda: self.get_gpt2(start="gpt2"))
        window.banner.openFolderRequested.connect(self.open_folder)
        window.banner.openFileRequested.connect(self.open_checkpoint)
        window.banner.trainRequested.connect(self.train_here)
        self.session.modelChanged.connect(self._shown)
        self.training = ""  # 'mini at step 150 of 200: …' while a model trains here
        self.session.trainingChanged.connect(self._training)

    # ------------------------------------------------------------------ loading
    def start(self, spec: ModelSpec | None, last: ModelSpec) -> None:
        """The first load: ``spec``, or the model of the last launch."""
        self.remembered = spec is None
        self.load(spec or last)

    def _not_as_remembered(self, info: ModelInfo) -> str | None:
        """The last launch's model reopened from its path: what the file held then, when
        it now holds another model (a folder replaced under the same name), else None."""
        settings = self.window.settings
        was, label = settings.value("model/config"), settings.value("model/label")
        if not self.remembered or not isinstance(was, str) or not isinstance(label, str):
            return None
        try:
            same = parse_json(was, "the window's settings") == parse_json(
                json.dumps(info.config.to_dict()), "the model's config")
        except ValueError:  # hand-edited settings: nothing to compare with
            return None
        return None if same else (f"{info.spec.describe()} now holds another model than the "
                                  f"one remembered ({label[:80]})")

    def load(self, spec: ModelSpec, then=None) -> None:
        """Load in the engine; on failure or Stop the previous model stays. ``then(info)``
        once it is loaded and shown (not when it fails or is stopped)."""
        self.loading = True
        self.spec = spec
        self.window.busy.show()
        self.window.model_label.setText(f"Loading {spec.describe()}…")
        loaded = self.loaded if then is None else lambda info: (self.loaded(info), then(info))
        self.job = self.engine.load(
            spec, finished=loaded, failed=self.failed,
            cancelled=lambda: self.failed(
                f"Loading {spec.describe()} was stopped; the previous model stays."))

    @Slot(object)
    def loaded(self, info: ModelInfo) -> None:
        self.loading = False
        w = self.window
        w.busy.setVisible(self.session.busy)
        self.session.set_model(info)
        changed = self._not_as_remembered(info)
        self.remembered = False
        self.session.set_status("; ".join(["Model loaded", *filter(None, [changed]), *info.notices]))
        w.banner.model_loaded(info.trained)
        w.settings.setValue("model/spec", info.spec.to_dict())
        w.settings.setValue("model/config", json.dumps(info.config.to_dict()))
        w.settings.setValue("model/label", info.label)

    @Slot(str)
    def failed(self, message: str) -> None:
        self.loading = False
        if self.closing:  # stopped by the close itself: no dialog, no other model
            return
        w = self.window
        w.busy.setVisible(self.session.busy)
        if self.session.model is None and self.remembered and self.spec != ModelSpec():
            # the first load failed (a remembered model that is gone or damaged): the
            # window starts on the default model instead of on nothing
            w.warn(w, "Could not load the model", f"{message}\n\nLoading the default "
                   "model instead.")
            self.remembered = False
            self.load(ModelSpec())
            return
        keep = self.session.loaded.label if self.session.loaded else "no model"
        self.model_text = f"{keep} (kept)"
        self.show_texts()
        w.warn(w, "Could not load the model", message)

    def _shown(self) -> None:
        """The title and model line name the model shown (a saved run's, read-only, too)."""
        info = self.session.model
        self.model_text = (f"{'' if info.trained else '⚠ '}{info.label} · {info.size} · "
                           f"{info.device} · {info.dtype}")
        self.title_text = f"{TITLE} — {info.label} · {info.size}"
        self.show_texts()

    def _training(self, where: str) -> None:
        self.training = where
        self.show_texts()

    def show_texts(self) -> None:
        """The title and the model line, with what an open question hides masked; the
        title says a model trains here, and where it is."""
        facts = self.session.covered
        if not self.loading:
            self.window.model_label.setText(facts.mask(self.model_text))
        training = f" · training {self.training.split(':')[0]}" if self.training else ""
        self.window.setWindowTitle(facts.mask(self.title_text + training))

    # ------------------------------------------------------------------ the ways to a model
    def choose_model(self) -> None:
        from .model_dialog import ModelDialog
        loaded = self.session.loaded
        dialog = ModelDialog(self.window, loaded.spec if loaded else None)
        if dialog.exec():
            self.load(dialog.spec())

    def open_checkpoint(self) -> None:
        path, _ = QFileDialog.getOpenFileName(self.window, "Open checkpoint", "", CHECKPOINT_FILTER)
        if path:
            self.load(ModelSpec(checkpoint=path))

    def open_folder(self) -> None:
        path = QFileDialog.getExistingDirectory(
            self.window, "Open a model folder (the book's gpt2/124M, or a Hugging Face folder)")
        if path:
            self.load(ModelSpec(checkpoint=path))

    def get_gpt2(self, start: str | None = None):
        """File ▸ Get GPT-2…; ``start`` names a size to download right away."""
        from .get_gpt2 import GetGpt2Dialog
        if self._get_gpt2 is None:
            self._get_gpt2 = GetGpt2Dialog(self.window.jobs, self.window)
            self._get_gpt2.modelReady.connect(self._downloaded)
            self._get_gpt2.openFolderRequested.connect(self.open_folder)
            self._get_gpt2.trainRequested.connect(self.train_here)
        dialog = self._get_gpt2
        dialog.refresh()
        dialog.show()
        dialog.raise_()
        if start and dialog.job is None:
            dialog.table.selectRow([m.name for m in hub.GPT2_MODELS].index(start))
            dialog.start()
        return dialog

    @Slot(str)
    def _downloaded(self, repo_id: str) -> None:
        self.load(ModelSpec(checkpoint=f"hf:{repo_id}"))
        if self._get_gpt2 is not None:
            self._get_gpt2.close()

    def train_here(self) -> None:
        """The offline way: the default small model, trained now (Experiment ▸ Train)."""
        self.window.show_view("train")
        self.window.view("train").start()  # a run going on goes on
