"""File ▸ Save run… and Open run…: the shown run to one file and back
(core.playground.run_file). Opening with the model that made the run loaded (the same
sha256 of its weights) replays it: its prompt, its settings and its interventions, each
saved token forced in turn (a branch's chosen token too), and checks every step's
probability against the saved one; a replay that departs is said, with its step, and the
saved run is shown as saved. With another model (or none) the saved passes are shown
read-only, drawn with the saved model's own blocks and widths (its config), and the
window says so; nothing computes on them until a run goes back to the loaded model.
Reading, hashing and writing are engine jobs."""

from __future__ import annotations

import dataclasses

from PySide6.QtCore import QTimer
from PySide6.QtWidgets import QFileDialog, QInputDialog

from ...core.base.outputs import OutputError, check_output
from ...core.experiments.interventions import from_dict
from ...core.playground.run_agrees import replay_difference
from ...core.playground.run_branches import lines_of
from ...core.playground.run_file import SavedRun, read_run, save_run, weights_sha256
from ..base.session import parting
from ...core.sources import ModelInfo, ModelSpec

RUN_FILTER = "Explorer runs (*.gbrun);;All files (*)"
TENSOR_MB = 64  # the node tensors a saved run keeps by default, in float16, at most


class RunFiles:
    def __init__(self, window) -> None:
        self.window = window
        self.expected: list[int] | None = None  # tokens a re-run must give
        self.opened: SavedRun | None = None
        window.session.busyChanged.connect(self._run_ended)
        window.session.modelChanged.connect(self._engine_follows)

    def _engine_follows(self) -> None:
        """While a saved run of another model is shown, the engine's jobs refuse in words."""
        shown = self.window.session.model
        self.window.engine.record = f"a saved run of {shown.label}" if shown.record else None

    # ------------------------------------------------------------------ saving
    def save(self, path: str | None = None, tensor_mb: int | None = None) -> None:
        """Save the shown run; without a path the user chooses one and how many MB of the
        node tensors to keep (float16; 0: the statistics only)."""
        w, session = self.window, self.window.session
        if session.record:
            w.warn(w, "Save run", "The run shown is a saved one, read-only: it is already in "
                   "its file.")
            return
        if session.prompt is None or session.model is None or session.prompt.batch is not None:
            w.warn(w, "Save run", "Run a prompt first (Ctrl+Enter; one prompt, not a batch).")
            return
        if path is None:
            path, _ = QFileDialog.getSaveFileName(w, "Save run", "run.gbrun", RUN_FILTER)
            if not path:
                return
            tensor_mb, ok = QInputDialog.getInt(
                w, "Save run", "Keep the node tensors too, in float16, up to this many MB\n"
                "(0: every node's statistics only):", TENSOR_MB, 0, 1_000_000)
            if not ok:
                return
        budget = (TENSOR_MB if tensor_mb is None else tensor_mb) * 2**20
        try:
            check_output(path)
        except OutputError as exc:
            w.warn(w, "Save run", str(exc))
            return
        info, passes = session.model, [session.prompt, *session.steps]
        settings = dataclasses.replace(w.prompt.settings(),
                                       max_new_tokens=max(1, len(session.steps)))
        interventions = [i.to_dict() for i in session.interventions]
        prompt, tokenizer = w.prompt.text(), session.tokenizer
        others = lines_of(session.branches, session.branch, parting)  # every branch kept
        label = session.branches[session.branch][0]

        def job(ctx):
            model = {"label": info.label, "source": info.spec.to_dict(),
                     "sha256": weights_sha256(ctx.model),
                     "config": info.config.to_dict()}
            run = SavedRun(prompt, list(session.prompt.ids), model, settings, passes,
                           interventions, session.interventions_on, tokenizer=tokenizer,
                           branches=others, label=label, shown=session.branch)
            return save_run(path, run, budget)

        w.engine.submit(job, "save run",
                        finished=lambda where: session.set_status(f"Saved the run to {where}"),
                        failed=lambda m: w.warn(w, "Save run", m))

    # ------------------------------------------------------------------ opening
    def open(self, path: str | None = None) -> None:
        w = self.window
        if path is None:
            path, _ = QFileDialog.getOpenFileName(w, "Open run", "", RUN_FILTER)
            if not path:
                return

        def job(ctx):
            saved = read_run(path)
            loaded = ctx.loaded and ctx.loaded_model
            return saved, loaded is not None and weights_sha256(loaded) == saved.model.get("sha256")

        w.engine.submit(job, "open run", finished=lambda answer: self.show(*answer),
                        failed=lambda m: w.warn(w, "Open run", m))

    def show(self, saved: SavedRun, same_model: bool) -> None:
        w, session = self.window, self.window.session
        if same_model and w.prompt.runs.running:  # before anything the user typed changes
            w.warn(w, "Open run", "A run is going on: open the saved run again when it has "
                   "ended (Esc stops it).")
            return
        self.opened = saved
        w.prompt.show_saved(saved.prompt, saved.settings, len(saved.tokens))
        if same_model:  # its model is loaded: the run replayed, checked step by step
            session.set_interventions([from_dict(d) for d in saved.interventions],
                                      saved.interventions_on)
            if w.prompt.replay(saved.tokens):
                self.expected = saved.tokens
            return
        self._read_only(saved, own_model=True)
        label = saved.model.get("label", "another model")
        session.set_status(f"Read-only: a run of {label!s:.60} (not the loaded model), drawn "
                           "with its own blocks; Ctrl+Enter runs the loaded model again" +
                           (f"; {saved.notice}" if saved.notice else ""))

    def _read_only(self, saved: SavedRun, own_model: bool = False) -> None:
        """Show the saved passes; ``own_model``: drawn with the saved model's structure."""
        session = self.window.session
        config = saved.config
        if own_model and config is not None:
            try:
                spec = ModelSpec.from_dict(saved.model.get("source"))
            except ValueError:  # a file from another machine: where it came from is unknown
                spec = ModelSpec()
            label = str(saved.model.get("label") or "a saved model")[:80]
            session.set_model(ModelInfo.of_record(label, config, spec, saved.tokenizer))
        session.show_record(saved.passes)
        self._branches(saved)

    def _branches(self, saved: SavedRun) -> None:
        """The saved run's other lines beside the one shown, each from where it parts, in
        their saved order: Branches compares them, the prompt panel's box picks one."""
        session = self.window.session
        if not saved.branches:
            return
        others = [(b.label, session.steps[:b.at] + b.passes) for b in saved.branches]
        lines = others[:saved.shown] + [(saved.label, session.steps)] + others[saved.shown:]
        streams = self.window.prompt.runs.streams  # the replayed line's cache goes with it
        if 0 in streams and not session.record:
            streams[saved.shown] = streams.pop(0)
        session.restore_branches(lines, saved.shown)

    def _run_ended(self, busy: bool) -> None:
        if busy or self.expected is None:
            return
        self.expected = None
        session = self.window.session
        if session.prompt is None:  # the replay did not run (its error is said): as saved
            self._read_only(self.opened)
            return
        differs = replay_difference(self.opened, [session.prompt, *session.steps])
        if differs is None:  # after the run's own last word on the status bar
            self._branches(self.opened)
            words = (f"Opened the run: its {len(self.opened.tokens)} tokens replayed, each with "
                     "the probability it had" + (f"; {self.opened.notice}" if self.opened.notice
                                                 else ""))
            QTimer.singleShot(0, lambda: session.set_status(words))
        else:
            self._read_only(self.opened)  # the run as it was saved, not the replay
            self.window.warn(self.window, "Open run", f"The replay departs from the saved run "
                             f"at {differs}. The saved run is shown as it was saved.")
