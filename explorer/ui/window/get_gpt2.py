"""File ▸ Get GPT-2…: the four sizes with their download size, the memory they need and
whether this machine holds them, and what is already in the Hugging Face cache; a
download with a progress bar (bytes, speed, time left), Cancel and resume. The download
is a job on its own thread (core.download.download), so the loaded model stays usable; when
it is done, ``modelReady`` asks the window to load it. Errors are a line in the dialog.
"""

from __future__ import annotations

import shutil

from PySide6.QtCore import Qt, Signal
from PySide6.QtGui import QKeySequence
from PySide6.QtWidgets import (QAbstractItemView, QDialog, QHBoxLayout, QHeaderView, QLabel,
                               QProgressBar, QPushButton, QTableWidget, QTableWidgetItem,
                               QVBoxLayout, QWidget)

from ...core.weights import download, hub
from ...core.base.devices import free_memory_bytes
from ..base.jobs import JobRunner

GB = 1e9


def _size(n: float) -> str:
    return f"{n / GB:.2f} GB" if n >= GB else f"{n / 1e6:,.0f} MB"


class GetGpt2Dialog(QDialog):
    modelReady = Signal(str)  # the repository id, now complete in the cache
    openFolderRequested = Signal()  # the ways that need no network, offered on a failure
    trainRequested = Signal()

    def __init__(self, runner: JobRunner, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setWindowTitle("Get GPT-2")
        self.runner = runner
        self.job = None
        intro = QLabel(
            "OpenAI's GPT-2, from the Hugging Face Hub into its cache "
            f"(<code>{hub.cache_dir()}</code>), where <i>transformers</i> finds it too. "
            "A download that stops resumes next time; every file is checked against the "
            "Hub's sha256. The model you are exploring stays loaded meanwhile.")
        intro.setWordWrap(True)
        intro.setTextFormat(Qt.RichText)
        self.table = QTableWidget(len(hub.GPT2_MODELS), 4)
        self.table.setHorizontalHeaderLabels(["Model", "Download", "Memory to load", "Here"])
        self.table.setSelectionBehavior(QAbstractItemView.SelectRows)
        self.table.setSelectionMode(QAbstractItemView.SingleSelection)
        self.table.setEditTriggers(QAbstractItemView.NoEditTriggers)
        self.table.verticalHeader().hide()
        header = self.table.horizontalHeader()
        header.setSectionResizeMode(QHeaderView.ResizeToContents)
        header.setStretchLastSection(True)
        self.table.doubleClicked.connect(lambda _index: self.start())
        self.progress = QProgressBar()
        self.progress.setRange(0, 1000)
        self.progress.setTextVisible(False)
        self.progress.hide()
        self.status = QLabel(" ")
        self.status.setWordWrap(True)
        self.status.setTextInteractionFlags(Qt.TextSelectableByMouse)
        self.download_button = QPushButton("Download")
        self.download_button.setDefault(True)
        self.download_button.clicked.connect(self.start)
        self.cancel_button = QPushButton("Cancel download")
        self.cancel_button.setShortcut(QKeySequence("Esc"))
        self.cancel_button.setEnabled(False)
        self.cancel_button.clicked.connect(self.cancel)
        close = QPushButton("Close")
        close.clicked.connect(self.close)
        buttons = QHBoxLayout()
        buttons.addStretch(1)
        for b in (self.download_button, self.cancel_button, close):
            buttons.addWidget(b)
        layout = QVBoxLayout(self)
        layout.addWidget(intro)
        layout.addWidget(self.table, 1)
        layout.addWidget(self.progress)
        layout.addWidget(self.status)
        layout.addWidget(self._offline_row())
        layout.addLayout(buttons)
        self.refresh()
        self.table.selectRow(0)
        self.table.itemSelectionChanged.connect(self._selection_changed)
        self._selection_changed()
        self.resize(760, 360)

    # ------------------------------------------------------------------ the table
    def refresh(self) -> None:
        """What this machine can hold and what the cache has: read now, no network."""
        memory = free_memory_bytes(_cpu())
        try:
            disk = shutil.disk_usage(_existing(hub.cache_dir())).free
        except OSError:
            disk = None
        cached = {c.model.name for c in hub.find_cached() if c.model}
        for row, model in enumerate(hub.GPT2_MODELS):
            partial = download.partial_bytes(model.name)
            if model.name in cached:
                here = "in the cache ✓"
            else:
                problems = []
                if memory is not None and model.memory_bytes > memory:
                    problems.append(f"needs more memory ({_size(memory)} free)")
                if disk is not None and model.download_bytes - partial > disk:
                    problems.append(f"not enough disk ({_size(disk)} free)")
                here = "; ".join(problems) or "fits"
                if partial:
                    here += f"; {_size(partial)} downloaded, resumes"
            cells = [model.title, _size(model.download_bytes), f"about {_size(model.memory_bytes)}", here]
            for col, text in enumerate(cells):
                item = QTableWidgetItem(text)
                if col == 3 and not here.startswith(("fits", "in the cache")):
                    item.setForeground(Qt.darkRed)
                self.table.setItem(row, col, item)

    def _offline_row(self) -> QWidget:
        """Shown when a download fails: the two ways to a trained model without the Hub."""
        self.offline = QWidget()
        row = QHBoxLayout(self.offline)
        row.setContentsMargins(0, 0, 0, 0)
        row.addWidget(QLabel("Without the Hub:"))
        self.open_folder_button = QPushButton("Open a GPT-2 folder you have…")
        self.open_folder_button.setToolTip("The book's gpt2/124M, a Hugging Face folder, a .pth")
        self.open_folder_button.clicked.connect(lambda: self._offline(self.openFolderRequested))
        self.train_button = QPushButton("Train a small model here")
        self.train_button.setToolTip("A few minutes on this machine, no network needed")
        self.train_button.clicked.connect(lambda: self._offline(self.trainRequested))
        row.addWidget(self.open_folder_button)
        row.addWidget(self.train_button)
        row.addStretch(1)
        self.offline.hide()
        return self.offline

    def _offline(self, signal) -> None:
        self.close()
        signal.emit()

    def selected(self) -> hub.HubModel:
        rows = self.table.selectionModel().selectedRows()
        return hub.GPT2_MODELS[rows[0].row() if rows else 0]

    def _selection_changed(self) -> None:
        if self.job is None:
            cached = self.table.item(self.table.currentRow(), 3)
            here = cached is not None and cached.text().startswith("in the cache")
            self.download_button.setText("Load" if here else "Download")

    # ------------------------------------------------------------------ the download
    def start(self) -> None:
        if self.job is not None:
            return
        self.offline.hide()
        model = self.selected()
        self.status.setStyleSheet("")
        self.status.setText(f"Connecting to {hub.endpoint()} for {model.repo_id}…")
        self.progress.setValue(0)
        self.progress.show()
        self.download_button.setEnabled(False)
        self.cancel_button.setEnabled(True)
        self.table.setEnabled(False)
        name = model.name
        self.job = self.runner.submit(
            lambda ctx: download.download(name, progress=ctx.report, should_stop=ctx.should_stop),
            f"download {name}", progress=self._progress, finished=self._finished,
            failed=self._failed, cancelled=self._cancelled)

    def cancel(self) -> None:
        if self.job is not None:
            self.job.cancel()
            self.status.setText("Stopping after the current chunk…")

    def _progress(self, p: download.DownloadProgress) -> None:
        if p.total_bytes:
            self.progress.setValue(int(1000 * p.done_bytes / p.total_bytes))
        self.status.setText(p.line())

    def _end(self) -> None:
        self.job = None
        self.download_button.setEnabled(True)
        self.cancel_button.setEnabled(False)
        self.table.setEnabled(True)
        self.refresh()
        self._selection_changed()

    def _finished(self, result: download.DownloadResult) -> None:
        self._end()
        self.progress.setValue(1000)
        what = ("already complete in the cache" if result.already_complete
                else f"downloaded {_size(result.fetched_bytes)}, sha256 checked")
        self.status.setText(f"{result.repo_id}: {what}. Loading it…")
        self.modelReady.emit(result.repo_id)

    def _failed(self, message: str) -> None:
        self._end()
        self.progress.hide()
        self.status.setStyleSheet("color: #b00020;")
        self.status.setText(message)
        self.offline.show()

    def _cancelled(self) -> None:
        model = self.selected()
        self._end()
        kept = download.partial_bytes(model.name)
        self.status.setText(f"Stopped. {_size(kept)} kept in the cache: Download continues "
                            "from there." if kept else "Stopped.")

    def closeEvent(self, event) -> None:  # noqa: N802
        if self.job is not None:
            self.job.cancel()  # what arrived stays in the cache and resumes next time
        super().closeEvent(event)


def _cpu():
    import torch
    return torch.device("cpu")


def _existing(path):
    """The nearest folder that exists (the cache may not yet)."""
    p = path
    while not p.exists() and p != p.parent:
        p = p.parent
    return p
