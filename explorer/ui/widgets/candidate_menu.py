"""Right-click on a next-token chart's bar: *Why this token?* for that candidate (the
Why view answers) and *Continue with this token* (a branch: the prompt panel's runs make
it), both services of the view (ui/base/services.py). The chart draws candidate i at y = i."""

from __future__ import annotations

from typing import Callable

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QMenu


def candidate_at(y: float, count: int) -> int | None:
    i = int(round(y))
    return i if 0 <= i < count and abs(y - i) <= 0.45 else None


def attach_candidate_menu(plot_widget, candidates: Callable[[], tuple[int, ...]],
                          pieces: Callable[[], tuple[str, ...]], services: Callable) -> None:
    """Replace the chart's own right-click menu with one for the bar under the mouse;
    ``services()`` gives the view's services when the menu opens."""
    plot = plot_widget.getPlotItem()
    plot.setMenuEnabled(False)

    def clicked(event) -> None:
        if event.button() != Qt.RightButton or not candidates():
            return
        y = plot.vb.mapSceneToView(event.scenePos()).y()
        index = candidate_at(y, len(candidates()))
        if index is None:
            return
        menu = candidate_menu(plot_widget, candidates()[index], pieces()[index], services())
        menu.popup(event.screenPos().toPoint())
        event.accept()

    plot.scene().sigMouseClicked.connect(clicked)


def candidate_menu(parent, token_id: int, piece: str, services) -> QMenu:
    menu = QMenu(parent)
    action = menu.addAction(f"Why this token? ({piece!r})")
    action.triggered.connect(lambda: services.explain_token(token_id))
    branch = menu.addAction(f"Continue with this token ({piece!r})")
    branch.setToolTip("A branch: generation goes on from here with this token instead")
    branch.triggered.connect(lambda: services.branch(token_id))
    return menu
