"""The Generation settings group: max new tokens, leave room in the context, greedy or
sampling (temperature, top-k, top-p, seed), as a ``GenerationSettings``; remembered in
the window's settings (``values`` / ``restore``)."""

from __future__ import annotations

import math

from PySide6.QtWidgets import (QCheckBox, QDoubleSpinBox, QGridLayout, QGroupBox, QLabel,
                               QSpinBox)

from ...core.run.generation import BOUNDS, RUN_STEPS, GenerationSettings


def flag(value) -> bool:
    return str(value).lower() == "true"


def stored(store, key: str, convert, widget_value):
    """The saved generation setting ``key``, or the widget's own value when the saved
    one is not a number of the widget's range (a hand-edited or corrupted settings file)."""
    try:
        value = convert(store.value(f"generation/{key}", widget_value))
    except (TypeError, ValueError, OverflowError):
        return widget_value
    if isinstance(value, float) and not math.isfinite(value):
        return widget_value
    return value


class GenerationBox(QGroupBox):
    def __init__(self) -> None:
        super().__init__()
        self._applied: dict[str, float | None] = {}  # what apply() gave, before rounding
        self.max_tokens = QSpinBox()
        self.max_tokens.setRange(1, RUN_STEPS)
        self.max_tokens.setValue(20)
        self.leave_room = QCheckBox("Leave room")
        self.leave_room.setChecked(True)
        self.leave_room.setToolTip(
            "Leave room for the new tokens: crop a long prompt so they fit in the context: every step then uses "
            "the KV cache. Off: the whole prompt is kept, and once the context is full each "
            "new token recomputes every position (the book's generate_text_simple; slow)")
        self.recompute = QCheckBox("Recompute all")
        self.recompute.setToolTip(
            "Recompute the whole context, as the book's generate_text_simple: every new token runs the whole context "
            "again, without the KV cache, and each step shows that whole pass — (1, T + k, C) "
            "at step k, attention patterns included. Slower; off: the cache keeps the earlier "
            "positions' keys and values and each step computes one position")
        self.sample = QCheckBox("Sample")
        self.sample.setToolTip("Sample the next token with the temperature, top-k and top-p "
                               "below; off: greedy (the most likely token)")
        self.temperature = QDoubleSpinBox()
        self.temperature.setRange(*BOUNDS["temperature"])
        self.temperature.setSingleStep(0.1)
        self.temperature.setValue(1.0)
        self.top_k = QSpinBox()
        self.top_k.setRange(0, BOUNDS["top_k"][1])  # 0: off
        self.top_k.setSpecialValueText("off")
        self.top_k.setValue(40)
        self.top_p = QDoubleSpinBox()
        self.top_p.setDecimals(6)  # as small as the command line takes
        self.top_p.setRange(*BOUNDS["top_p"])
        self.top_p.setSingleStep(0.05)
        self.top_p.setValue(1.0)
        self.seed = QSpinBox()
        self.seed.setRange(*BOUNDS["seed"])
        self.seed.setValue(123)
        self.seed.setMaximumWidth(80)  # its range would make the column wide
        for w in (self.temperature, self.top_k, self.top_p, self.seed):
            w.setEnabled(False)
        self.sample.toggled.connect(lambda on: [w.setEnabled(on) for w in
                                                (self.temperature, self.top_k, self.top_p, self.seed)])
        # two columns, four rows: the prompt panel stays short under the graph
        grid = QGridLayout()
        grid.setContentsMargins(6, 4, 6, 4)
        grid.setVerticalSpacing(3)
        grid.addWidget(QLabel("Tokens"), 0, 0)
        grid.addWidget(self.max_tokens, 0, 1)
        grid.addWidget(self.sample, 0, 2, 1, 2)
        grid.addWidget(self.leave_room, 1, 0, 1, 2)
        grid.addWidget(self.recompute, 1, 2, 1, 2)
        for i, (text, w) in enumerate((("Temp.", self.temperature), ("Top-k", self.top_k),
                                       ("Top-p", self.top_p), ("Seed", self.seed))):
            label = QLabel(text)
            label.setBuddy(w)
            grid.addWidget(label, 2 + i // 2, 2 * (i % 2))
            grid.addWidget(w, 2 + i // 2, 2 * (i % 2) + 1)
        self.max_tokens.setToolTip("How many new tokens to generate")
        self.temperature.setToolTip("Temperature: below 1 sharper, above 1 flatter")
        self.setLayout(grid)

    def set_vocabulary(self, size: int) -> None:
        """Top-k reaches every id of the loaded model's vocabulary, and no further."""
        self.top_k.setMaximum(min(size, BOUNDS["top_k"][1]))

    def settings(self) -> GenerationSettings:
        sample = self.sample.isChecked()
        return GenerationSettings(
            max_new_tokens=self.max_tokens.value(), greedy=not sample,
            temperature=self._exact(self.temperature, "temperature"),
            top_k=(self.top_k.value() or None) if sample else None,
            top_p=self._exact(self.top_p, "top_p") if sample and self.top_p.value() < 1.0 else None,
            seed=self.seed.value(), leave_room=self.leave_room.isChecked(),
            recompute=self.recompute.isChecked())

    def apply(self, s: GenerationSettings) -> None:
        """Take the sampling settings of ``s`` (the number of tokens and the rest stay)."""
        self.sample.setChecked(not s.greedy)
        self._applied = {"temperature": s.temperature, "top_p": s.top_p}
        self.temperature.setValue(s.temperature)
        self.top_k.setValue(s.top_k or 0)
        self.top_p.setValue(s.top_p if s.top_p is not None else 1.0)

    def _exact(self, box, key: str) -> float:
        """The value ``apply`` gave ``box`` while the box shows it rounded to its decimals
        (a saved run's temperature 0.015 shown as 0.02 replays at 0.015); the box's own
        once it is changed."""
        given = self._applied.get(key)
        if given is not None and round(given, box.decimals()) == box.value():
            return given
        return box.value()

    def values(self) -> dict:
        return {"max_new_tokens": self.max_tokens.value(), "sample": self.sample.isChecked(),
                "temperature": self.temperature.value(), "top_k": self.top_k.value(),
                "top_p": self.top_p.value(), "seed": self.seed.value(),
                "leave_room": self.leave_room.isChecked(), "recompute": self.recompute.isChecked()}

    def restore(self, read) -> None:
        """``read(key, convert, default)`` gives a remembered value or the default."""
        for widget, key, convert in ((self.max_tokens, "max_new_tokens", int),
                                     (self.temperature, "temperature", float),
                                     (self.top_k, "top_k", int), (self.top_p, "top_p", float),
                                     (self.seed, "seed", int)):
            value = read(key, convert, widget.value())
            widget.setValue(min(max(value, widget.minimum()), widget.maximum()))
        self.sample.setChecked(read("sample", flag, "false"))
        self.leave_room.setChecked(read("leave_room", flag, "true"))
        self.recompute.setChecked(read("recompute", flag, "false"))
