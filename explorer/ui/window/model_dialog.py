"""The model chooser: GPT-2 models found in the local Hugging Face cache, a checkpoint
file or folder, or a seeded random initialisation of a preset (its norms where the user
places them); the device (only those available here) and the dtype. Returns a
ModelSpec; loads nothing."""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtWidgets import (QButtonGroup, QComboBox, QDialog, QDialogButtonBox,
                               QFileDialog, QFormLayout, QHBoxLayout, QLineEdit, QPushButton,
                               QRadioButton, QSpinBox, QVBoxLayout, QWidget)

from ...core.weights import hub
from ...core.gpt.config import PRESETS
from ...core.base.devices import available_devices
from ...core.sources import ModelSpec, trained_here
from ...core.gpt.config import NormPosition


class ModelDialog(QDialog):
    def __init__(self, parent: QWidget | None = None, current: ModelSpec | None = None) -> None:
        super().__init__(parent)
        self.setWindowTitle("Choose a model")
        current = current or ModelSpec()
        self.cached = hub.find_cached()

        self.use_cache = QRadioButton("GPT-2 from the Hugging Face cache")
        self.cache_box = QComboBox()
        for m in self.cached:
            self.cache_box.addItem(f"{m.name}  ({m.folder})", f"hf:{m.name}")
        if not self.cached:
            self.cache_box.addItem(f"none found in {hub.cache_dir()} (File ▸ Get GPT-2…)")
            self.use_cache.setEnabled(False)
        self._trained_runs()
        self.use_file = QRadioButton("Checkpoint file or folder")
        self.path = QLineEdit(current.checkpoint if current.checkpoint and not
                              current.checkpoint.startswith("hf:") else "")
        browse = QPushButton("Browse…")
        browse.clicked.connect(self._browse)
        self.use_preset = QRadioButton("Random initialisation (untrained)")
        self.preset_box = QComboBox()
        self.preset_box.addItems(list(PRESETS))
        self.norm_box = QComboBox()  # where the preset's norms sit, each said in one line
        self._norms_of_preset()
        self.preset_box.currentTextChanged.connect(self._norms_of_preset)
        self.seed = QSpinBox()
        self.seed.setRange(0, 2**31 - 1)
        self.device_box = QComboBox()
        self.device_box.addItems(available_devices())
        self.dtype_box = QComboBox()
        self.dtype_box.addItems(["float32", "bfloat16", "float16"])

        self._choose(current)

        file_row = QHBoxLayout()
        file_row.addWidget(self.path, 1)
        file_row.addWidget(browse)
        form = QFormLayout()
        form.addRow(self.use_cache)
        form.addRow("   model", self.cache_box)
        form.addRow(self.use_trained)
        form.addRow("   run", self.trained_box)
        form.addRow(self.use_file)
        form.addRow("   path", file_row)
        form.addRow(self.use_preset)
        form.addRow("   preset", self.preset_box)
        form.addRow("   norm position", self.norm_box)
        form.addRow("   seed", self.seed)
        form.addRow("Device", self.device_box)
        form.addRow("Weights dtype", self.dtype_box)
        buttons = QDialogButtonBox(QDialogButtonBox.Ok | QDialogButtonBox.Cancel)
        buttons.accepted.connect(self.accept)
        buttons.rejected.connect(self.reject)
        layout = QVBoxLayout(self)
        layout.addLayout(form)
        layout.addWidget(buttons)

    def _norms_of_preset(self) -> None:
        """The placements the chosen preset's family has (OLMo's block only its own),
        the preset's own first chosen."""
        cfg = PRESETS[self.preset_box.currentText()]
        self.norm_box.clear()
        for i, position in enumerate(p for p in NormPosition if p in cfg.family.orders):
            self.norm_box.addItem(f"{position.title}: {position.formula}", str(position))
            self.norm_box.setItemData(i, position.explained, Qt.ToolTipRole)
        self.norm_box.setCurrentIndex(self.norm_box.findData(str(cfg.norm_position)))

    def _trained_runs(self) -> None:
        """The runs finished here, the latest first: date, validation loss and path."""
        runs = trained_here([])  # an entry skipped is said in the log; these can be opened
        self.trained = [run for run, _label in runs]
        self.use_trained = QRadioButton("A model trained here")
        self.trained_box = QComboBox()
        for run, label in runs:  # the run's own trainer.json's words, and when
            self.trained_box.addItem(f"{label} · {run.date[:16].replace('T', ' ')}", run.path)
        if not self.trained:
            self.trained_box.addItem("none yet (the Train tab, or gpt-explorer train)")
            self.use_trained.setEnabled(False)

    def _choose(self, current: ModelSpec) -> None:
        """Start from the model loaded now: its source, preset, order, seed, device, dtype."""
        group = QButtonGroup(self)
        for b in (self.use_cache, self.use_trained, self.use_file, self.use_preset):
            group.addButton(b)
        if current.preset:
            self.use_preset.setChecked(True)
            self.preset_box.setCurrentText(current.preset)
            if current.norm_position is not None:
                self.norm_box.setCurrentIndex(max(0, self.norm_box.findData(str(current.norm_position))))
            self.seed.setValue(current.seed)
        elif current.checkpoint in [run.path for run in self.trained]:
            self.use_trained.setChecked(True)
            self.trained_box.setCurrentIndex(self.trained_box.findData(current.checkpoint))
        elif current.checkpoint and not current.checkpoint.startswith("hf:"):
            self.use_file.setChecked(True)
        elif self.cached:
            self.use_cache.setChecked(True)
        elif self.trained:  # the default, when no GPT-2 is in the cache
            self.use_trained.setChecked(True)
        else:
            self.use_preset.setChecked(True)
        if current.device in available_devices():
            self.device_box.setCurrentText(current.device)
        self.dtype_box.setCurrentText(current.dtype)

    def _browse(self) -> None:
        path, _ = QFileDialog.getOpenFileName(self, "Checkpoint", self.path.text(),
                                              "Checkpoints (*.safetensors *.bin *.pth *.pt *.ckpt);;All files (*)")
        if path:
            self.path.setText(path)
            self.use_file.setChecked(True)

    def spec(self) -> ModelSpec:
        device, dtype = self.device_box.currentText(), self.dtype_box.currentText()
        if self.use_cache.isChecked() and self.cached:
            return ModelSpec(checkpoint=self.cache_box.currentData(), device=device, dtype=dtype)
        if self.use_trained.isChecked() and self.trained:
            return ModelSpec(checkpoint=self.trained_box.currentData(), device=device, dtype=dtype)
        if self.use_file.isChecked():
            return ModelSpec(checkpoint=self.path.text().strip(), device=device, dtype=dtype)
        return ModelSpec(preset=self.preset_box.currentText(), seed=self.seed.value(),
                         norm_position=self.norm_box.currentData(), device=device, dtype=dtype)
