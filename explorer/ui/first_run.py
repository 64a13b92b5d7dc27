"""The banner a new user meets when no trained model was found: the views show noise,
and three ways to a trained GPT-2 — download GPT-2 small, open a GPT-2 folder or
checkpoint (the book's gpt2/124M, a Hugging Face folder, a .pth), or train a small model
here. It goes away once a trained model is loaded, and stays away on later launches.
"""

from __future__ import annotations

from PySide6.QtCore import QSettings, Signal
from PySide6.QtWidgets import (QFrame, QGridLayout, QHBoxLayout, QLabel, QMenu, QPushButton,
                               QToolButton, QVBoxLayout)

from ..core import hub

SEEN_KEY = "first_run/trained_model_loaded"


class FirstRunBanner(QFrame):
    downloadRequested = Signal()
    openFolderRequested = Signal()
    openFileRequested = Signal()
    trainRequested = Signal()

    def __init__(self, settings: QSettings) -> None:
        super().__init__()
        self.settings = settings
        self.setObjectName("firstRunBanner")
        self.setStyleSheet("#firstRunBanner { background: #fff4ce; border: 1px solid #e0c060; "
                           "border-radius: 4px; } QLabel { color: #3b3000; }")
        small = hub.GPT2_MODELS[0]
        self.text = QLabel("<b>No trained model found</b> — these are random weights, so every "
                           "view shows noise. Get a trained GPT-2:")
        self.text.setWordWrap(True)
        self.download = QPushButton(f"Download GPT-2 small (~{small.download_bytes / 1e6:,.0f} MB)")
        self.download.clicked.connect(self.downloadRequested.emit)
        self.open = QPushButton("Open a GPT-2 folder or checkpoint…")
        menu = QMenu(self.open)
        menu.addAction("Folder (the book's gpt2/124M, a Hugging Face folder)…",
                       self.openFolderRequested.emit)
        menu.addAction("File (.pth, .safetensors, .bin, model.ckpt.index)…",
                       self.openFileRequested.emit)
        self.open.setMenu(menu)
        self.train = QPushButton("Train a small model here (~5 min)")
        self.train.clicked.connect(self.trainRequested.emit)
        later = QToolButton()
        later.setText("✕")
        later.setToolTip("Hide until the next launch")
        later.setAutoRaise(True)
        later.clicked.connect(self.hide)
        top = QHBoxLayout()
        top.addWidget(self.text, 1)
        top.addWidget(later)
        actions = QGridLayout()  # two columns: fits the narrow centre of a laptop screen
        for i, b in enumerate((self.download, self.open, self.train)):
            actions.addWidget(b, i // 2, i % 2)
        actions.setColumnStretch(2, 1)
        column = QVBoxLayout(self)  # text above the buttons: fits a 1366-px laptop screen
        column.setContentsMargins(10, 4, 4, 8)
        column.setSpacing(4)
        column.addLayout(top)
        column.addLayout(actions)
        self.hide()

    def model_loaded(self, trained: bool) -> None:
        """Show for an untrained model until a trained one has been loaded once."""
        if trained:
            self.settings.setValue(SEEN_KEY, True)
            self.hide()
        elif str(self.settings.value(SEEN_KEY, "false")).lower() != "true":
            self.show()
