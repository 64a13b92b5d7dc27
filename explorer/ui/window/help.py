"""Help: the keyboard shortcuts, read from the window's own menus (so the list is never
out of date), and a short tour that outlines the graph, the inspector, the prompt and
the tabs in turn."""

from __future__ import annotations

from PySide6.QtCore import QRect, Qt
from PySide6.QtGui import QKeySequence
from PySide6.QtWidgets import (QDialog, QDialogButtonBox, QHBoxLayout, QLabel, QMenuBar,
                               QPushButton, QRubberBand, QTableWidget, QTableWidgetItem,
                               QVBoxLayout, QWidget)

EXTRA_KEYS = (("Up / Down (in the block graph)", "the previous or the next block"),
              ("Click a node", "inspect it in every view"))


def shortcuts(menu_bar: QMenuBar) -> list[tuple[str, str, str]]:
    """(menu, action, keys) for every menu action that has a shortcut."""
    rows = []

    def walk(menu, path):
        for action in menu.actions():
            if action.menu() is not None:
                walk(action.menu(), path + [action.text().replace("&", "")])
            elif action.shortcuts():
                keys = ", ".join(k.toString(QKeySequence.NativeText) for k in action.shortcuts())
                rows.append((" ▸ ".join(path), action.text().replace("&", ""), keys))

    for action in menu_bar.actions():
        if action.menu() is not None:
            walk(action.menu(), [action.text().replace("&", "")])
    return rows


class ShortcutsDialog(QDialog):
    def __init__(self, parent: QWidget, menu_bar: QMenuBar) -> None:
        super().__init__(parent)
        self.setWindowTitle("Keyboard shortcuts")
        rows = shortcuts(menu_bar)
        self.table = QTableWidget(len(rows) + len(EXTRA_KEYS), 2)
        self.table.setHorizontalHeaderLabels(["keys", "does"])
        self.table.verticalHeader().hide()
        for r, (menu, action, keys) in enumerate(rows):
            self.table.setItem(r, 0, QTableWidgetItem(keys))
            self.table.setItem(r, 1, QTableWidgetItem(f"{action}  ({menu})"))
        for r, (keys, does) in enumerate(EXTRA_KEYS, start=len(rows)):
            self.table.setItem(r, 0, QTableWidgetItem(keys))
            self.table.setItem(r, 1, QTableWidgetItem(does))
        self.table.resizeColumnsToContents()
        self.table.horizontalHeader().setStretchLastSection(True)
        buttons = QDialogButtonBox(QDialogButtonBox.Close)
        buttons.rejected.connect(self.reject)
        layout = QVBoxLayout(self)
        layout.addWidget(self.table)
        layout.addWidget(buttons)
        self.resize(560, 520)


class Tour(QDialog):
    """Steps of (widget to outline, what it is); Next and Back, the outline follows."""

    def __init__(self, parent: QWidget, steps: list[tuple[QWidget, str, str]]) -> None:
        super().__init__(parent)
        self.setWindowTitle("Tour")
        self.setWindowFlag(Qt.WindowStaysOnTopHint)
        self.steps, self.index = steps, 0
        self.outline = QRubberBand(QRubberBand.Rectangle, parent)
        self.title = QLabel()
        self.text = QLabel()
        self.text.setWordWrap(True)
        self.back = QPushButton("Back")
        self.next = QPushButton("Next")
        self.next.setDefault(True)
        self.back.clicked.connect(lambda: self.show_step(self.index - 1))
        self.next.clicked.connect(self._next)
        row = QHBoxLayout()
        row.addWidget(self.back)
        row.addStretch(1)
        row.addWidget(self.next)
        layout = QVBoxLayout(self)
        layout.addWidget(self.title)
        layout.addWidget(self.text, 1)
        layout.addLayout(row)
        self.resize(380, 180)
        self.show_step(0)

    def _next(self) -> None:
        if self.index + 1 < len(self.steps):
            self.show_step(self.index + 1)
        else:
            self.close()

    def show_step(self, index: int) -> None:
        self.index = max(0, min(index, len(self.steps) - 1))
        widget, title, text = self.steps[self.index]
        self.title.setText(f"<b>{self.index + 1} of {len(self.steps)} · {title}</b>")
        self.text.setText(text)
        self.back.setEnabled(self.index > 0)
        self.next.setText("Done" if self.index + 1 == len(self.steps) else "Next")
        parent = self.parentWidget()
        top_left = widget.mapTo(parent, widget.rect().topLeft())
        self.outline.setGeometry(QRect(top_left, widget.size()).adjusted(-3, -3, 3, 3))
        self.outline.show()

    def outlined(self) -> QRect:
        return self.outline.geometry()

    def closeEvent(self, event) -> None:  # noqa: N802
        self.outline.hide()
        super().closeEvent(event)


def tour_steps(window) -> list[tuple[QWidget, str, str]]:
    """The tour: the graph, then every view of the window's list, each with what it is
    for (its dock, its title, one sentence)."""
    from ..views.registry import VIEWS
    words = {
        "inspector": "The selected node's real values: statistics, histogram, heatmap, token "
                     "norms and the raw numbers.",
        "explain": "What the node does, what it did here, its formula worked with this token's "
                   "numbers, and the common mistake.",
        "learn": "Predict before you see: a question about the node, then the real tensor.",
        "gelu": "GELU's curve with the real distribution of its inputs in this block.",
        "distributions": "Every node's values side by side, and a statistic per node and block.",
        "attention": "Every head's attention pattern, or one head large.",
        "lens": "The next tokens read off the residual stream after each add.",
        "ln_compare": "The model and its twin with the norms moved, and the gradient experiment.",
        "divergence": "A model B changed in one place: where the two first part.",
        "train": "Train a small GPT on a text here, with the loss curve and samples.",
        "generation": "Type a prompt and press Ctrl+Enter: every node is captured, then tokens "
                      "arrive one by one. Click one to go back.",
        "code": "The code that produced the node, and a step-by-step trace of the pass.",
        "gradients": "The gradient at every node, with and without the shortcuts.",
        "whatif": "Interventions: zero, scale, steer, patch a node — and the clean and "
                  "changed continuations side by side.",
        "patching": "Activation patching: how much of a logit difference each node brings back.",
        "model": "Where the parameter count comes from, and what the feed-forward's width costs.",
        "heads": "Each head scored as previous-token, first-token, current-token, local and "
                 "induction, with its pattern.",
        "why": "Why this token: each block's, head's and neuron's part of its logit, as a "
               "waterfall.",
        "sampling": "The next-token distribution reshaped live by temperature, top-k and "
                    "top-p, with 200 seeded draws beside it.",
        "branches": "Two branches of a run side by side at the step where they part.",
        "game": "Guess the next token before the model shows it, or the block where the lens "
                "first finds it.",
        "contributions": "Each token's stream after every block, with an edge from every "
                         "head and feed-forward block that brought a large share of it.",
        "layers": "One row per block: the stream's size, each branch against its shortcut, "
                  "the lens's token and the block's part of the logit.",
    }
    steps = [(window.graph, "The block graph", "One whole transformer block in forward order, "
              "with its shortcuts and every tensor's shape. Click a node to inspect it; Up and "
              "Down change the block; the caps unfold the embeddings and the head.")]
    for spec in VIEWS:
        if spec.key in window.docks:
            shortcut = f" ({spec.shortcut})" if spec.shortcut else ""
            steps.append((window.docks[spec.key], spec.title + shortcut, words.get(spec.key, "")))
    return steps


def about(parent) -> None:
    """Help ▸ About: the version and the libraries it runs on."""
    import PySide6
    import pyqtgraph
    import tiktoken
    import torch
    from PySide6.QtWidgets import QMessageBox

    from ... import __version__
    QMessageBox.about(parent, "About GPT Block Explorer",
                      f"<b>GPT Block Explorer {__version__}</b><br>See inside a GPT-2 model."
                      f"<br><br>PyTorch {torch.__version__}<br>PySide6 {PySide6.__version__}"
                      f"<br>pyqtgraph {pyqtgraph.__version__}<br>tiktoken {tiktoken.__version__}")
