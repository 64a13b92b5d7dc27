"""The banner a new user meets when no trained model was found: the views show noise,
and three ways to a trained model — download GPT-2 small, open a model folder or
checkpoint (the book's gpt2/124M, a Hugging Face folder, a .pth), or train a small model
here. It goes away once a trained model is loaded, and stays away on later launches.
"""

from __future__ import annotations

from PySide6.QtCore import QSettings, Signal
from PySide6.QtWidgets import (QFrame, QHBoxLayout, QLabel, QMenu, QPushButton, QSizePolicy,
                               QToolBar, QToolButton)

from ...core.weights import hub

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
        self.text = QLabel("<b>No trained model</b> — random weights: every view shows noise.")
        self.text.setMinimumWidth(40)  # cut, not widening the window, in a narrow one
        self.text.setSizePolicy(QSizePolicy.Ignored, QSizePolicy.Preferred)
        self.text.setToolTip("These are random weights, so every view shows noise. Get a "
                             "trained GPT-2 with one of the buttons.")
        self.download = QPushButton(f"Download GPT-2 small (~{small.download_bytes / 1e6:,.0f} MB)")
        self.download.clicked.connect(self.downloadRequested.emit)
        self.open = QPushButton("Open a model folder or file…")
        menu = QMenu(self.open)
        menu.addAction("Folder (the book's gpt2/124M, a Hugging Face folder)…",
                       self.openFolderRequested.emit)
        menu.addAction("File (.pth, .safetensors, .bin, model.ckpt.index)…",
                       self.openFileRequested.emit)
        self.open.setMenu(menu)
        self.train = QPushButton("Train a small model here")
        self.train.clicked.connect(self.trainRequested.emit)
        later = QToolButton()
        later.setText("✕")
        later.setToolTip("Hide until the next launch")
        later.setAutoRaise(True)
        later.clicked.connect(self.hide)
        # one row across the whole window (a bar above the graph and the docks): the
        # graph keeps the height of a laptop screen
        row = QHBoxLayout(self)
        row.setContentsMargins(8, 2, 2, 2)
        row.setSpacing(6)
        row.addWidget(self.text, 1)
        for w in (self.download, self.open, self.train, later):
            row.addWidget(w)
        self.setSizePolicy(QSizePolicy.Expanding, QSizePolicy.Fixed)
        self.hide()

    def bar(self) -> QToolBar:
        """The banner in a bar of its own, across the whole window's width (the window
        adds it above the graph and the docks); hidden with the banner."""
        bar = QToolBar("First run")
        bar.setObjectName("firstRunBar")
        bar.setMovable(False)
        bar.setFloatable(False)
        bar.toggleViewAction().setVisible(False)
        bar.addWidget(self)
        self.setVisible(False)  # until a model without training has loaded
        return bar

    def setVisible(self, visible: bool) -> None:  # noqa: N802 (Qt name)
        """Shown and hidden with the bar that holds it."""
        holder = self.parentWidget()
        if isinstance(holder, QToolBar):
            holder.setVisible(visible)
            for action in holder.actions():  # a toolbar shows its widgets by their actions
                action.setVisible(visible)
        super().setVisible(visible)

    def training(self, where: str) -> None:
        """While training runs here, the button says where it is and how long it has left
        (measured): 'Training mini at step 150 of 200: about 1 min left'."""
        self.train.setText(f"Training {where}" if where else "Train a small model here")
        self.train.setEnabled(not where)

    def model_loaded(self, trained: bool) -> None:
        """Show for an untrained model until a trained one has been loaded once."""
        if trained:
            self.settings.setValue(SEEN_KEY, True)
            self.hide()
        elif str(self.settings.value(SEEN_KEY, "false")).lower() != "true":
            self.show()
