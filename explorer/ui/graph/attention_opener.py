"""What the views need of a block's attention that a pass did not keep: the steps inside
it (the graph with attention opened, the Attention tab's scores) or its pattern (a pass
keeps the shown block's only, ``core.run.passes.Keep.attention``); in a mixture of
experts, each expert's steps (the graph's expert boxes), run again with the pass's
weights (``core.run.opened.open_experts``). The engine runs that
block's attention again on the input the pass kept (``core.run.opened``) and the answer
joins the pass's nodes, so every view can show them.

One opener per session (``opener_for``), whoever asks: a request already on its way is
not asked again, and a request for another block or pass replaces it.

For a generated step the input is the prompt's rows and each later step's own row up to
it: the step's query against every key so far, as generation computed it."""

from __future__ import annotations

import weakref

import numpy as np

from ...core.gpt.nodes import order_of, PATTERN, block_hook_name
from ...core.gpt.nodes import expert_nodes
from ...core.run.opened import (attention_input, experts_input, inside_names, open_attention,
                                open_experts)
from ..base.session import Session
from ..base.view_jobs import EngineLike, ViewJobs

_OPENERS: "weakref.WeakKeyDictionary[Session, AttentionOpener]" = weakref.WeakKeyDictionary()


def opener_for(session: Session, engine: EngineLike) -> "AttentionOpener":
    """The session's opener (made on first use)."""
    if session not in _OPENERS:
        _OPENERS[session] = AttentionOpener(session, engine)
    return _OPENERS[session]


class AttentionOpener:
    def __init__(self, session: Session, engine: EngineLike) -> None:
        self.session = session
        self.jobs = ViewJobs(engine, session.set_status, status=session.set_status,
                             title="Attention steps")
        self._asked: tuple[int, int, bool] | None = None  # (pass id, block, steps) on its way

    def want(self, layer: int, result=None, steps: bool = True) -> str | None:
        """Make sure the shown pass (or ``result``) holds block ``layer``'s attention
        steps (``steps``) or its pattern. None when it does or soon will; else why it
        cannot (for the steps, which the user opened, also said on the status line)."""
        current, info = result or self.session.current, self.session.model
        if current is None or info is None:
            return None
        names = inside_names(layer, order_of(info.config)) if steps else [block_hook_name(layer, PATTERN)]
        if all(n in current.views and current.views[n].array is not None for n in names):
            return None
        if not steps and current.one_position:
            return "A generated step holds its pattern once attention is opened (Attention steps)"
        if self.jobs.running and self._asked in ((id(current), layer, steps),
                                                 (id(current), layer, True)):
            return None  # on its way
        why = "A saved run is shown read-only: open it with its model loaded to see " \
              "attention" if self.session.record else None
        rows = None if why else self._rows(current, layer, order_of(info.config))
        if isinstance(rows, str) or why:
            why = why or rows
            if steps:
                self.session.set_status(why)
            return why
        x, valid, last_only = rows
        self._asked = (id(current), layer, steps)
        self.jobs.run(lambda ctx: open_attention(ctx.model, x, layer, valid, last_only, steps),
                      "open attention", finished=lambda views: self._opened(current, views))
        return None

    def want_experts(self, layer: int) -> None:
        """Make sure the shown pass holds block ``layer``'s experts' steps (a mixture's
        graph with its feed-forward opened)."""
        current, info = self.session.current, self.session.model
        if current is None or info is None or not info.config.n_experts or self.session.record:
            return
        source, routing = experts_input(layer, info.config)
        x, w = current.views.get(source), current.views.get(routing)
        if x is None or w is None or x.array is None or w.array is None:
            return
        ran = np.flatnonzero((w.real_rows() != 0).any(axis=0))
        names = [block_hook_name(layer, n.key) for e in ran for n in expert_nodes(info.config, e)]
        asked = (id(current), layer, "experts")
        if all(n in current.views for n in names) or (self.jobs.running and self._asked == asked):
            return
        self._asked = asked
        self.jobs.run(lambda ctx: open_experts(ctx.model, x.array, w.array, layer, x.valid),
                      "open experts", finished=lambda views: self._opened(current, views))

    def _rows(self, current, layer: int, norm_position: str):
        """Attention's input rows for ``current`` (x, valid, last_only), or why not."""
        source = attention_input(layer, norm_position)
        if not current.one_position:
            view = current.views.get(source)
            if view is None or view.array is None:
                return f"{source} was not kept in full in this pass: attention cannot open"
            return view.array, view.valid, False
        steps, prompt = self.session.steps, self.session.prompt
        index = next((i for i, s in enumerate(steps) if s is current), None)
        kept = prompt is not None and prompt.views.get(source) is not None \
            and prompt.views[source].array is not None
        if index is None or not kept or prompt.batch is not None:
            return "Attention opens on the prompt pass and the steps generated from it"
        # step 0 is chosen at the prompt's last position; step k runs step k-1's token
        rows = [prompt.views[source].array[0]]
        rows += [s.views[source].array.reshape(1, -1) for s in steps[1:index + 1]]
        return np.concatenate(rows)[None], None, True

    def _opened(self, result, views: dict) -> None:
        self._asked = None
        result.views.update(views)
        if self.session.current is not None:  # every view redraws with the steps in it
            self.session.show_pass(self.session.current)
