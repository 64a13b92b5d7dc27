"""Head roles: a layers x heads grid of one role's scores — previous-token, first-token
(attention sink), current-token, local, induction — with what the score measures, and
the copying score of the induction battery (core.attribution.head_roles). The pattern
roles come from the shown prompt; induction from a seeded battery of repeated random
tokens, run as a job with progress and Stop. Click a cell: that head's pattern on the
prompt and on the battery, and its attention node selected."""

from __future__ import annotations

from enum import StrEnum

import numpy as np
import pyqtgraph as pg
from PySide6.QtGui import QFontMetrics
from PySide6.QtWidgets import QComboBox, QHBoxLayout, QLabel, QVBoxLayout, QWidget

from ....core.attribution.head_roles import (COPYING, KEEP, ROLE_EVIDENCE, ROLES, HeadRoles,
                                            head_roles)
from ....core.gpt.nodes import ATTENTION, block_hook_name, head_label
from ...base.later import BuiltLater
from ...base.lazy import LazyRefresh
from ...base.session import Session
from ...base.view_jobs import EngineLike, ViewJobs
from ...plots.plot_axes import add_plot, colour_bar, count_axis
from ...plots.plot_text import set_empty, set_ticks, set_title
from ...plots.why_plots import DIVERGING, SCORES, cell_at, draw_grid
from ...widgets.job_controls import JobControls

EMPTY = "Run a prompt (Ctrl+Enter) to score every head's attention."


class Tokens(StrEnum):
    """The tokens a head's pattern is drawn on."""
    PROMPT = "prompt"
    BATTERY = "battery"


class HeadsView(BuiltLater, LazyRefresh, QWidget):
    LATER = ("prompt_plot", "battery_plot")  # the clicked head's patterns: a turn later

    def __init__(self, session: Session, engine: EngineLike) -> None:
        super().__init__()
        self.session = session
        self.roles: HeadRoles | None = None
        self.cell: tuple[int, int] | None = None
        self.role_box = QComboBox()
        self.role_box.addItems([*ROLES, COPYING])
        self.role_box.currentTextChanged.connect(lambda _t: self.draw())
        self.controls = JobControls("Induction battery", self.run_battery, "Score induction "
                                    "and copying on seeded repeated random tokens")
        self.jobs = ViewJobs(engine, self._failed, controls=self.controls,
                             status=session.set_status, title="Head roles")
        bar = QHBoxLayout()
        for w in (QLabel("Role:"), self.role_box, *self.controls.widgets()):
            bar.addWidget(w)
        bar.addStretch(1)
        self.note = QLabel(EMPTY)
        self.note.setWordWrap(True)
        self.canvas = pg.GraphicsLayoutWidget()
        self.canvas.setBackground("w")
        # the blocks × heads grid with its colour bar above, the clicked head's patterns
        # (on the prompt, on the battery) side by side below
        self.grid = add_plot(self.canvas, row=0, col=0, colspan=2)
        self.grid_bar = colour_bar(colorMap=SCORES, interactive=False, width=14)
        self.grid_bar.setImageItem(pg.ImageItem(), insert_in=self.grid)
        self.canvas.setMinimumHeight(2 * 240)
        self.canvas.scene().sigMouseClicked.connect(self._clicked)
        layout = QVBoxLayout(self)
        layout.addLayout(bar)
        layout.addWidget(self.note)
        layout.addWidget(self.canvas, 1)
        session.on_pass(self.request_refresh)
        session.modelChanged.connect(self._forget)
        self.draw()
        self.later_soon()

    def build_later(self) -> None:
        """The clicked head's two pattern plots, under the grid; drawn when made."""
        plots = [add_plot(self.canvas, row=1, col=col) for col in (0, 1)]
        for plot in plots:
            count_axis(plot, "bottom", centred=True)
            count_axis(plot, "left", centred=True)
            plot.setLabel("bottom", "key position")
        self.prompt_plot, self.battery_plot = plots
        self._draw_patterns()

    # ------------------------------------------------------------------ jobs
    def _ids(self) -> list[int] | None:
        current = self.session.current
        if current is None or self.session.model is None or current.batch is not None:
            return None
        return list(current.ids)

    def redraw(self) -> None:
        """A new pass: score its heads (one forward with the patterns)."""
        self._run(False)

    def run_battery(self) -> None:
        self._run(True)

    def _run(self, induction: bool) -> None:
        ids = self._ids()
        if ids is None:
            self._forget()
            return
        self.note.setText("Running the battery…" if induction else "Scoring the heads…")

        def job(ctx):
            return head_roles(ctx.model, ids, induction, should_stop=ctx.should_stop,
                              progress=lambda i, n: ctx.report((i, n)))

        self.jobs.run(job, "head roles", finished=self._done,
                      cancelled=lambda: self.note.setText("Stopped: the heads were not scored."))

    def _done(self, roles: HeadRoles) -> None:
        self.roles = roles
        self.draw()

    def _failed(self, message: str) -> None:
        self.note.setText(f"Could not score the heads: {message}")

    def _forget(self) -> None:
        self.jobs.forget()
        self.roles, self.cell = None, None
        self.draw()

    # ------------------------------------------------------------------ drawing
    def values(self) -> np.ndarray | None:
        if self.roles is None:
            return None
        return self.roles.values(self.role_box.currentText())

    def draw(self) -> None:
        role = self.role_box.currentText()
        values = self.values()
        waiting = ("Press Induction battery to score it." if self.roles is not None
                   else EMPTY)
        image = draw_grid(self.grid, values, role == COPYING, waiting)  # the note names the role
        self.grid_bar.setVisible(image is not None)
        if image is not None:  # one colour bar, the grid's own scale
            self.grid_bar.setColorMap(DIVERGING if role == COPYING else SCORES)
            self.grid_bar.setLevels(image.getLevels())
            self.grid_bar.setImageItem(image)
        if self.roles is None:
            self.note.setText(EMPTY)
        elif values is not None:
            layer, head, score = self.roles.best(role)
            self.note.setText(f"{role}: {ROLE_EVIDENCE[role]}. Strongest: block {layer} head "
                              f"{head} ({score:.2f}).")
        else:
            self.note.setText(waiting)
        if self.built():  # else drawn when made
            self._draw_patterns()

    def _draw_patterns(self) -> None:
        for plot, what in ((self.prompt_plot, Tokens.PROMPT), (self.battery_plot, Tokens.BATTERY)):
            patterns = self._patterns(what is Tokens.BATTERY)
            plot.clear()
            if patterns is None or self.cell is None:
                set_empty(plot, "Click a head" if self.roles is None or patterns is not None
                          else f"Kept up to {KEEP} tokens" if what is Tokens.PROMPT
                          else "Press Induction battery")
                continue
            set_empty(plot, None)
            pattern = patterns[self.cell].astype(np.float32)
            image = pg.ImageItem(pattern, axisOrder="row-major", levels=(0.0, 1.0))
            image.setColorMap(SCORES)
            plot.addItem(image)
            plot.invertY(True)
            plot.setRange(xRange=(0, pattern.shape[1]), yRange=(0, pattern.shape[0]), padding=0)
            plot.setMouseEnabled(x=False, y=False)
            self._token_ticks(plot, what, pattern.shape[0])
            layer, head = self.cell
            set_title(plot, f"{head_label(layer, head)} on the {what}")

    def _token_ticks(self, plot, what: Tokens, count: int) -> None:
        """The prompt's pattern names its tokens (as many as have room); the battery's
        random tokens are numbered."""
        current = self.session.current
        if what is not Tokens.PROMPT or current is None or len(current.pieces) < count:
            for side in ("bottom", "left"):
                set_ticks(plot.getAxis(side), None)
            return
        pieces = [repr(p) for p in current.pieces[-count:]]
        line = QFontMetrics(plot.getAxis("left").font()).height()
        step = max(1, int(np.ceil(count * line / max(plot.vb.height(), 1.0))))
        ticks = [[(i + 0.5, pieces[i]) for i in range(0, count, step)]]
        set_ticks(plot.getAxis("left"), ticks)
        set_ticks(plot.getAxis("bottom"), [[(i + 0.5, str(i)) for i in range(0, count, step)]])

    def _patterns(self, battery: bool) -> np.ndarray | None:
        if self.roles is None:
            return None
        return self.roles.battery_patterns if battery else self.roles.patterns

    def _clicked(self, event) -> None:
        values = self.values() if self.roles is not None else None
        if values is None or not self.grid.sceneBoundingRect().contains(event.scenePos()):
            return
        point = self.grid.vb.mapSceneToView(event.scenePos())
        cell = cell_at(values, point.x(), point.y())
        if cell is not None:
            self.cell = cell
            self._draw_patterns()
            self.session.set_node(block_hook_name(cell[0], ATTENTION))
