"""What the graph needs to draw attention opened: the steps inside the shown block's
attention for the shown pass. A pass keeps them only when asked; when they are missing,
the engine runs that block's attention again on the input the pass kept
(``core.run.opened``) and the answer joins the pass's nodes, so every view can show them.

For a generated step the input is the prompt's rows and each later step's own row up to
it: the step's query against every key so far, as generation computed it."""

from __future__ import annotations

from typing import Callable

import numpy as np

from ...core.run.opened import attention_input, inside_names, open_attention
from ..base.session import Session
from ..base.view_jobs import EngineLike, ViewJobs


class AttentionOpener:
    def __init__(self, session: Session, engine: EngineLike, said: Callable[[str], None]) -> None:
        self.session = session
        self.said = said  # one line for the graph's status (a failure, or why not)
        self.jobs = ViewJobs(engine, said, status=session.set_status, title="Attention steps")

    def want(self, layer: int, result=None) -> None:
        """Make sure the shown pass (or ``result``) holds block ``layer``'s attention
        steps."""
        current, info = result or self.session.current, self.session.model
        if current is None or info is None:
            return
        if all(name in current.views for name in inside_names(layer)):
            return
        rows = self._rows(current, layer, info.config.norm_position)
        if rows is None:
            return
        x, valid, last_only = rows
        self.jobs.run(lambda ctx: open_attention(ctx.model, x, layer, valid, last_only),
                      "open attention", finished=lambda views: self._opened(current, views))

    def _rows(self, current, layer: int, norm_position: str):
        source = attention_input(layer, norm_position)
        if not current.one_position:
            view = current.views.get(source)
            if view is None or view.array is None:
                self.said(f"{source} was not kept in full in this pass: attention cannot open")
                return None
            return view.array, view.valid, False
        steps, prompt = self.session.steps, self.session.prompt
        index = next((i for i, s in enumerate(steps) if s is current), None)
        kept = prompt is not None and prompt.views.get(source) is not None \
            and prompt.views[source].array is not None
        if index is None or not kept or prompt.batch is not None:
            self.said("Attention opens on the prompt pass and the steps generated from it")
            return None
        # step 0 is chosen at the prompt's last position; step k runs step k-1's token
        rows = [prompt.views[source].array[0]]
        rows += [s.views[source].array.reshape(1, -1) for s in steps[1:index + 1]]
        return np.concatenate(rows)[None], None, True

    def _opened(self, result, views: dict) -> None:
        result.views.update(views)
        if self.session.current is not None:  # every view redraws with the steps in it
            self.session.show_pass(self.session.current)
