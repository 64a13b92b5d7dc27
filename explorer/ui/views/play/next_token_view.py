"""Next token: the shown step's most likely next tokens as bars, each labelled with its
piece and probability; right-click a bar to ask why the model ranks it there or to
continue the run with it as a branch (widgets.candidate_menu)."""

from __future__ import annotations

import pyqtgraph as pg
from PySide6.QtCore import Qt
from PySide6.QtGui import QFontMetrics
from PySide6.QtWidgets import QLabel, QVBoxLayout, QWidget

from ....core.gpt.tokenizer import visible
from ...base.lazy import LazyRefresh
from ...base.session import Session
from ...base.view_jobs import EngineLike
from ...plots.plot_axes import nice_below, plot_widget
from ...plots.plot_text import set_empty, set_ticks
from ...widgets.candidate_menu import attach_candidate_menu

WIDEST = "·restraints 0.00013"  # the room a label gets on the axis


def _short(text: str, limit: int = 12) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


class NextTokenView(LazyRefresh, QWidget):
    def __init__(self, session: Session, engine: EngineLike) -> None:
        super().__init__()
        self.session = session
        # its title in a label that wraps: a plot title wider than the plot widens the
        # plot beyond its widget, which then cuts off its right-hand side
        self.what = QLabel("Next token")
        self.what.setWordWrap(True)
        self.what.setAlignment(Qt.AlignHCenter)
        self.plot = plot_widget()
        self.plot.setLabel("bottom", "probability")
        self.plot.getAxis("bottom").enableAutoSIPrefix(False)  # 0.0002, not "(x1e-6)"
        self.plot.invertY(True)
        self.bars = pg.BarGraphItem(x0=[0], y=[0], width=[0], height=0.8, brush="#3c78c8")
        self.plot.addItem(self.bars)
        self.plot.setMouseEnabled(x=False, y=False)
        attach_candidate_menu(self.plot, lambda: self._shown("top_ids"),
                              lambda: self._shown("top_pieces"), lambda: self.services)
        left = self.plot.getAxis("left")
        self._metrics = QFontMetrics(left.font())
        self.axis_width = self._metrics.horizontalAdvance(WIDEST) + 16
        left.setWidth(self.axis_width)
        self.plot.setMinimumWidth(self.axis_width + 70)  # the labels, bars and title
        note = QLabel("Right-click a bar: why this token, or continue with it as a branch.")
        note.setWordWrap(True)
        layout = QVBoxLayout(self)
        layout.addWidget(self.what)
        layout.addWidget(self.plot, 1)
        layout.addWidget(note)
        session.on_pass(self.request_refresh)

    def redraw(self) -> None:
        current = self.session.current
        plot = self.plot.getPlotItem()
        if current is None or not current.top_ids:
            self.bars.setOpts(x0=[0], y=[0], width=[0], height=0.8)
            set_ticks(self.plot.getAxis("left"), [[]])  # no labels of an old pass
            self.what.setText("Next token")
            set_empty(plot, "Run a prompt to see them")  # fits a narrow chart
            return
        set_empty(plot, None)
        probs = list(current.top_probs)
        self.bars.setOpts(x0=[0] * len(probs), y=list(range(len(probs))), width=probs, height=0.8)
        ticks = [(i, self.label(p, v)) for i, (p, v) in enumerate(zip(current.top_pieces, probs))]
        set_ticks(self.plot.getAxis("left"), [ticks])
        what = "after the prompt" if current.step is None else f"at step {current.step}"
        if current.batch is not None:
            what = "after prompt s0"
        self.what.setText(f"Next token {what}")
        top = max(probs) or 1.0
        self.plot.setXRange(0, top * 1.05)
        # two labels: automatic ones ran together ("5e-050.0001") on a narrow plot; the
        # second a round number well inside the axis (one at its end is not drawn)
        mark = nice_below(0.7 * top)
        set_ticks(self.plot.getAxis("bottom"), [[(0.0, "0"), (mark, f"{mark:g}")]])
        self.plot.setYRange(-0.6, len(probs) - 0.4)

    def _shown(self, what: str) -> tuple:
        current = self.session.current
        return getattr(current, what) if current is not None and current.batch is None else ()

    def label(self, piece: str, prob: float) -> str:
        """'·matter 0.00021', the piece cut to what the axis holds (a label wider than
        the axis is not drawn at all)."""
        room = self.axis_width - 12
        number = f" {prob:.2g}"
        shown = self._metrics.elidedText(_short(visible(piece)), Qt.ElideRight,
                                         room - self._metrics.horizontalAdvance(number))
        return shown + number
