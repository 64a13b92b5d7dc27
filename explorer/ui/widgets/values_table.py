"""The raw values of a node as a lazy table: cells are formatted only when shown, so a
(1, 1024, 3072) tensor opens at once; a batch's padding rows are grey."""

from __future__ import annotations

import numpy as np
from PySide6.QtCore import QAbstractTableModel, QModelIndex, Qt
from PySide6.QtGui import QBrush, QColor

from ...core.run.capture import NodeView


def as_matrix(view: NodeView) -> np.ndarray | None:
    """The view's values as (rows, features): positions x dims; the attention pattern
    as (heads x query positions) x key positions."""
    if view.array is None:
        return None
    a = view.array
    return a.reshape(-1, a.shape[-1])


class ValuesModel(QAbstractTableModel):
    """Serves cells on demand, so a (1024, 3072) tensor shows without freezing."""

    PAD_BRUSH = QBrush(QColor("#d8d8d8"))

    def __init__(self) -> None:
        super().__init__()
        self.matrix = np.zeros((0, 0), dtype=np.float32)
        self.row_labels: list[str] = []
        self.real: np.ndarray | None = None  # per row: False for a batch's padding

    def set_matrix(self, matrix: np.ndarray | None, row_labels: list[str],
                   real: np.ndarray | None = None) -> None:
        self.beginResetModel()
        self.matrix = matrix if matrix is not None else np.zeros((0, 0), dtype=np.float32)
        self.row_labels = row_labels
        self.real = real
        self.endResetModel()

    def rowCount(self, parent=QModelIndex()) -> int:  # noqa: N802
        return self.matrix.shape[0]

    def columnCount(self, parent=QModelIndex()) -> int:  # noqa: N802
        return self.matrix.shape[1] if self.matrix.ndim == 2 else 0

    def data(self, index, role=Qt.DisplayRole):
        if role == Qt.DisplayRole and index.isValid():
            return f"{self.matrix[index.row(), index.column()]:.4g}"
        if role == Qt.BackgroundRole and self.real is not None and not self.real[index.row()]:
            return self.PAD_BRUSH  # padding: computed by the model, left out of statistics
        return None

    def headerData(self, section, orientation, role=Qt.DisplayRole):  # noqa: N802
        if role != Qt.DisplayRole:
            return None
        if orientation == Qt.Vertical and section < len(self.row_labels):
            return self.row_labels[section]
        return str(section)
