"""The shared state of one window: the loaded model, the prompt pass, the generated
steps, and what is selected (layer, node, step). Views read it and listen to its
signals; only the main window and the views' own clicks change it. Holds no tensors:
every capture here is numpy (see engine.PassResult)."""

from __future__ import annotations

from functools import partial

import shiboken6
from PySide6.QtCore import QObject, Signal

from ..core.capture import NodeView
from ..core.nodes import (FIRST_BLOCK_NODE, block_hook_name, block_nodes, layer_of,
                          same_node_in_layer)
from .engine import ModelInfo, PassResult
from .turns import Turns


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
    hiddenChanged = Signal(bool)  # learn mode covers the inspector until an answer

    def __init__(self) -> None:
        super().__init__()
        self.model: ModelInfo | None = None
        self.prompt: PassResult | None = None
        self.steps: list[PassResult] = []
        self.current: PassResult | None = None  # what the views show
        self.layer = 0
        self.node = block_hook_name(0, FIRST_BLOCK_NODE)
        self.hidden = False
        self._pass_listeners: list = []
        self._turns = Turns(self)  # the listeners still to call for the latest pass
        self.passChanged.connect(self._schedule)

    def on_pass(self, callback) -> None:
        """Call ``callback()`` after every change of the shown pass, in its own turn of
        the event loop, in the order registered."""
        self._pass_listeners.append(callback)

    def _schedule(self) -> None:
        # a newer pass replaces what was pending
        self._turns.run([partial(self._call, cb) for cb in self._pass_listeners])

    def _call(self, callback) -> None:
        owner = getattr(callback, "__self__", None)
        if isinstance(owner, QObject) and not shiboken6.isValid(owner):
            self._pass_listeners.remove(callback)  # its view is gone (window closed)
        else:
            callback()

    def pending(self) -> int:
        """Views not yet redrawn for the latest pass."""
        return self._turns.pending()

    # -------------------------------------------------------------------- changes
    def set_model(self, info: ModelInfo) -> None:
        self.model = info
        self.prompt, self.steps, self.current = None, [], None
        self.layer = min(self.layer, info.config.n_layers - 1)
        self.node = same_node_in_layer(self.node, self.layer)
        self.modelChanged.emit()
        self.stepsChanged.emit()
        self.passChanged.emit()

    def set_prompt(self, result: PassResult) -> None:
        self.prompt, self.steps = result, []
        self.current = result
        self.stepsChanged.emit()
        self.passChanged.emit()

    def add_step(self, result: PassResult) -> None:
        self.steps.append(result)
        self.stepsChanged.emit()

    def show_pass(self, result: PassResult | None) -> None:
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

    def set_hidden(self, hidden: bool) -> None:
        if hidden != self.hidden:
            self.hidden = hidden
            self.hiddenChanged.emit(hidden)

    # -------------------------------------------------------------------- reads
    def view(self, name: str | None = None) -> NodeView | None:
        if self.current is None:
            return None
        return self.current.views.get(name or self.node)

    def block_names(self) -> list[str]:
        position = self.model.config.norm_position if self.model else "pre"
        return [block_hook_name(self.layer, n.key) for n in block_nodes(position)]
