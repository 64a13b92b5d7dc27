"""The shared state of one window: the loaded model, the prompt pass, the generated
steps, what is selected (layer, node, step) and marked, and what the window is doing
(busy, a status line, errors to show). Views read it, listen to its signals and change
it through its methods; none of them knows another. Holds no tensors: every capture here
is numpy (core.passes.Pass)."""

from __future__ import annotations

from functools import partial
from typing import Callable

from PySide6.QtCore import QObject, QTimer, Signal

from ...core.run.capture import NodeView
from ...core.gpt.nodes import (FIRST_BLOCK_NODE, block_hook_name, layer_of,
                               same_node_in_layer)
from ...core.lessons.facts import NO_FACTS, Facts
from ...core.run.passes import Pass
from ...core.gpt.tokenizer import gpt2_tokenizer
from ...core.sources import ModelInfo
from .turns import Turns, alive

CATCH_UP_PROBE_MS = 40  # how often to look whether every view has drawn a new pass


def parting(a: list, b: list) -> int | None:
    """The first step where two branches' passes differ (None if one is the other's start)."""
    return next((i for i, (x, y) in enumerate(zip(a, b)) if x is not y), None)


class Session(QObject):
    """Views register with ``on_pass`` rather than connecting ``passChanged``: after a
    new pass each view then redraws in a turn of the event loop of its own, so clicks,
    keys and paints get in between (queued slots would all run in one batch, ~40 ms
    after a 1024-token pass)."""

    modelChanged = Signal()
    passChanged = Signal()  # the shown pass (prompt or a step) changed
    stepsChanged = Signal()  # a step was added or the steps were cleared
    layerChanged = Signal(int)
    nodeChanged = Signal(str)  # hook name
    coverChanged = Signal(object)  # the Facts an open question or round would be answered by
    markChanged = Signal(str)  # a node to outline (the divergence finder's), "" for none
    busyChanged = Signal(bool)  # a run (prompt, generation, batch, training) is going on
    statusChanged = Signal(str)  # one line about what the window is doing
    errorRaised = Signal(str, str)  # title, message: the window shows it
    caughtUp = Signal()  # every view has redrawn the latest pass
    completed = Signal()  # the shown pass's later statistics are all computed
    interventionsChanged = Signal()  # the list, or the switch that applies them
    whyChanged = Signal()  # the latest answer to "why this token?" (or None)
    branchesChanged = Signal()  # a branch was made or another one selected
    trainingChanged = Signal(str)  # training's step and time left ("" when none runs)

    def __init__(self, retire: Callable[..., None] | None = None) -> None:
        super().__init__()
        self.model: ModelInfo | None = None  # what the views show (a saved run's, read-only)
        self.loaded: ModelInfo | None = None  # the engine's model, which runs compute with
        self.prompt: Pass | None = None
        self.steps: list[Pass] = []
        self.current: Pass | None = None  # what the views show
        self.layer = 0
        self.node = block_hook_name(0, FIRST_BLOCK_NODE)
        self.covered: Facts = NO_FACTS  # what no widget may show yet (core.lessons.facts)
        self.interventions: list = []  # core.interventions.Intervention, in order
        self.interventions_on = True  # the one switch
        self.dropped: list[str] = []  # the interventions the last model change dropped
        self.mark = ""
        self.attention_opened = False  # the graph shows attention's steps (runs keep them)
        self.why = None  # core.attribution.why.Why: of the model and prompt shown
        # the run and its branches: (label, steps); ``steps`` is the selected one's list
        self.branches: list[tuple[str, list[Pass]]] = [("the run", self.steps)]
        self.branch = 0
        self.busy = False
        self.status = ""
        self._retire = retire or (lambda *passes: None)  # who frees replaced passes
        self._pass_listeners: list = []
        self._drawing: list = []  # views' "still drawing in turns of their own?" checks
        self._turns = Turns(self)  # the listeners still to call for the latest pass
        self._probe = QTimer(self, singleShot=True, interval=CATCH_UP_PROBE_MS)
        self._probe.timeout.connect(self._look_caught_up)
        self.passChanged.connect(self._schedule)

    def on_pass(self, callback) -> None:
        """Call ``callback()`` after every change of the shown pass, in its own turn of
        the event loop, in the order registered."""
        self._pass_listeners.append(callback)

    def still_drawing(self, check) -> None:
        """A view that draws a pass over several loop turns of its own says so with
        ``check()``: the session is caught up (and the engine goes on) only after them."""
        self._drawing.append(check)

    def _schedule(self) -> None:
        # a newer pass replaces what was pending
        self._turns.run([partial(self._call, cb) for cb in self._pass_listeners])
        self._probe.start()

    def _look_caught_up(self) -> None:
        self._drawing = [c for c in self._drawing if alive(c)]  # views of closed windows
        if self._turns.pending() or any(check() for check in self._drawing):
            self._probe.start()  # views still to redraw: look again shortly
        else:
            self.caughtUp.emit()

    def _call(self, callback) -> None:
        if not alive(callback):
            self._pass_listeners.remove(callback)  # its view is gone (window closed)
        else:
            callback()

    def pending(self) -> int:
        """Views not yet redrawn for the latest pass."""
        return self._turns.pending()

    @property
    def tokenizer(self):
        """The shown model's tokenizer (GPT-2's before a model is loaded)."""
        return self.model.tokenizer if self.model is not None else gpt2_tokenizer()

    @property
    def input_tokenizer(self):
        """The tokenizer of the model a typed prompt runs on: the loaded one's, also while
        a saved run of another model is shown read-only."""
        return self.loaded.tokenizer if self.loaded is not None else self.tokenizer

    def caught_up(self) -> bool:
        """Every view has redrawn the latest pass and the engine has been told so."""
        return self._turns.pending() == 0 and not self._probe.isActive()

    # -------------------------------------------------------------------- changes
    def set_model(self, info: ModelInfo) -> None:
        """Show ``info``'s model: the one loaded, or a saved run's (``info.record``), whose
        passes come next, read-only; the loaded model and its interventions stay."""
        self._retire(self.prompt, *self._every_step())
        self.model = info
        if not info.record:
            self.loaded = info
            self._fit_interventions(info.config)
        self.prompt, self.steps, self.current = None, [], None
        self.branches, self.branch = [("the run", self.steps)], 0
        self.set_mark("")  # marks belong to the model they were found in
        self.set_why(None)  # so do answers
        self.layer = min(self.layer, info.config.n_layers - 1)
        self.node = same_node_in_layer(self.node, self.layer)
        self.modelChanged.emit()
        self.stepsChanged.emit()
        self.passChanged.emit()

    @property
    def record(self) -> bool:
        """A saved run of a model that is not loaded is shown: nothing can be computed."""
        return self.model is not None and self.model.record

    def leave_record(self) -> None:
        """Back to the loaded model (before a run), when a saved run is shown read-only."""
        if self.record and self.loaded is not None:
            self.set_model(self.loaded)

    def set_prompt(self, result: Pass) -> None:
        self._retire(self.prompt, *self._every_step())
        self.prompt, self.steps = result, []
        self.current = result
        self.branches, self.branch = [("the run", self.steps)], 0
        self.set_why(None)  # an answer about the prompt before
        self.branchesChanged.emit()
        self.stepsChanged.emit()
        self.passChanged.emit()

    def pass_completed(self, result: Pass) -> None:
        """The engine computed what ``result`` left for later (core.passes.Keep.later):
        views that show such details redraw."""
        if result is self.current:
            self.completed.emit()

    def show_record(self, passes: list[Pass]) -> None:
        """A saved run's passes at once: its prompt's, then every step (one signal each)."""
        self.set_prompt(passes[0])
        self.steps.extend(passes[1:])  # the run's own list: its branch entry sees them
        self.stepsChanged.emit()

    def add_step(self, result: Pass) -> None:
        self.steps.append(result)
        self.stepsChanged.emit()

    def show_pass(self, result: Pass | None) -> None:
        self.current = result
        self.passChanged.emit()

    def show_step(self, index: int | None) -> None:
        """None shows the prompt pass; an index shows that generated step."""
        self.show_pass(self.prompt if index is None else self.steps[index])

    def set_layer(self, layer: int) -> None:
        if self.model is None:
            return
        layer = max(0, min(layer, self.model.config.n_layers - 1))
        if layer != self.layer:
            self.layer = layer
            self.layerChanged.emit(layer)
            self.set_node(same_node_in_layer(self.node, layer))

    def set_node(self, name: str) -> None:
        layer = layer_of(name)
        if layer is not None and layer != self.layer:
            self.layer = layer
            self.layerChanged.emit(self.layer)
        if name != self.node:
            self.node = name
            self.nodeChanged.emit(name)

    def set_why(self, why) -> None:
        if why is not self.why:
            self.why = why
            self.whyChanged.emit()

    def start_branch(self, label: str, steps: list[Pass]) -> None:
        """A new branch (its steps so far: the parent's up to where it parts, then the
        chosen token), selected; its generated steps then arrive through add_step."""
        self.branches.append((label, steps))
        self.select_branch(len(self.branches) - 1)

    def restore_branches(self, lines: list[tuple[str, list[Pass]]], shown: int) -> None:
        """A reopened run's lines, in their saved order; ``lines[shown]``'s steps are the
        ones shown now (the run replayed, or as saved)."""
        if not 0 <= shown < len(lines) or lines[shown][1] is not self.steps:
            raise ValueError("the shown line must be the steps shown")
        self.branches, self.branch = lines, shown
        self.branchesChanged.emit()

    def select_branch(self, index: int) -> None:
        """Show a branch: its steps become the session's, at the step where it parts
        from the run (the run itself: its last step)."""
        label, steps = self.branches[index]
        self.branch, self.steps = index, steps
        at = parting(steps, self.branches[0][1])
        self.branchesChanged.emit()
        self.stepsChanged.emit()
        self.show_pass(steps[at if at is not None else -1] if steps else self.prompt)

    def _every_step(self) -> list[Pass]:
        """The steps of the run and of every branch, each once (shared ones too)."""
        seen = {id(p): p for _label, steps in self.branches for p in steps}
        return list(seen.values())

    def set_mark(self, name: str) -> None:
        if name != self.mark:
            self.mark = name
            self.markChanged.emit(name)

    def set_busy(self, busy: bool) -> None:
        if busy != self.busy:
            self.busy = busy
            self.busyChanged.emit(busy)

    def set_status(self, text: str) -> None:
        self.status = text
        self.statusChanged.emit(text)

    def set_training(self, where: str) -> None:
        """Training here: 'mini at step 150 of 200: about 1 min left' ("" once it ended)."""
        self.trainingChanged.emit(where)

    def report_error(self, title: str, message: str) -> None:
        """Show an error (the window opens the dialog, on the GUI thread)."""
        self.errorRaised.emit(title, message)

    def error_reporter(self, title: str):
        """``report_error`` with its title filled in, for a callback."""
        return lambda message: self.report_error(title, message)

    learning = False  # Learn mode is on (set_learning)

    def set_covered(self, facts: Facts = NO_FACTS) -> None:
        """While a Learn question or a game round is open, what would answer it (its
        ``Facts``) is hidden everywhere (ui.base.covers); no facts uncover."""
        if facts != self.covered:
            self.covered = facts
            self.coverChanged.emit(facts)

    def covers(self, kind: str) -> bool:
        return kind in self.covered.kinds

    def set_learning(self, on: bool) -> None:
        """Learn mode on: the graph keeps its edge shapes hidden between questions too
        (a shape seen once answers the next shape question)."""
        if on != self.learning:
            self.learning = on
            self.coverChanged.emit(self.covered)

    # -------------------------------------------------------------- what if
    def set_interventions(self, interventions: list, on: bool | None = None) -> None:
        self.interventions = list(interventions)
        if on is not None:
            self.interventions_on = on
        self.interventionsChanged.emit()

    def _fit_interventions(self, config) -> None:
        """Keep the interventions that fit a new model; say which were dropped."""
        kept, self.dropped = [], []
        for one in self.interventions:
            try:
                one.check(config)
                kept.append(one)
            except ValueError:
                self.dropped.append(one.describe())
        if self.dropped:
            self.set_interventions(kept)

    def add_intervention(self, intervention) -> None:
        self.set_interventions(self.interventions + [intervention], on=True)

    def active_interventions(self) -> list:
        """What a run applies: the list while the switch is on."""
        return list(self.interventions) if self.interventions_on else []

    # -------------------------------------------------------------------- reads
    def view(self, name: str | None = None) -> NodeView | None:
        if self.current is None:
            return None
        return self.current.views.get(name or self.node)
