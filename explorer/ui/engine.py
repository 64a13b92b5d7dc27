"""The engine: one QObject, living in its own QThread, that owns the model and does all
torch work (loading, the prompt pass with full capture, generation). The GUI talks to
it only through queued signals and receives numpy-only results; it never touches a
tensor. Stopping sets a threading.Event that generation checks between tokens.
"""

from __future__ import annotations

import dataclasses
import gc
import threading
import time
import traceback
from dataclasses import dataclass, field

import torch
from PySide6.QtCore import QObject, Signal, Slot

from ..core.analysis import gelu_input_shares, logit_lens
from ..core.batch import Batch, make_batch
from ..core.capture import Cancelled, Capture, NodeView, StopCheck
from ..core.compare import EXPERIMENT_CONFIG, compare_prompt, gradient_experiment
from ..core.resources import resource_path
from ..core.checkpoints import LoadedModel, load_checkpoint
from ..core.sources import open_model
from ..core.config import GPTConfig
from ..core.generation import GenerationSettings, generate_stream, prepare_prompt
from ..core.tokenizer import encode, token_piece


GUI_CATCH_UP_S = 0.5  # the longest the engine waits for the GUI to draw a pass


@dataclass(frozen=True)
class ModelSpec:
    """Which model to load: a checkpoint path (or hf:NAME), a preset, or the default."""

    checkpoint: str | None = None
    preset: str | None = None
    device: str = "cpu"
    dtype: str = "float32"
    seed: int = 0
    norm_position: str = "pre"  # for a preset

    def describe(self) -> str:
        return self.checkpoint or (f"{self.preset} (random init)" if self.preset else "default model")


@dataclass(frozen=True)
class ModelInfo:
    label: str
    size: str  # its shape from the config: '12 layers · 768 wide · 12 heads · 124.4M parameters'
    config: GPTConfig
    trained: bool
    device: str
    dtype: str
    notices: tuple[str, ...]
    spec: ModelSpec


@dataclass
class PassResult:
    """A forward pass as the views see it: the tokens and every node's NodeView."""

    ids: list[int]
    pieces: list[str]
    views: dict[str, NodeView]
    step: int | None = None  # None for the prompt pass, else the generation step index
    token_id: int | None = None  # the token this pass chose (a step) or predicts next
    prob: float | None = None
    top_ids: tuple[int, ...] = ()
    top_probs: tuple[float, ...] = ()
    top_pieces: tuple[str, ...] = ()
    notices: list[str] = field(default_factory=list)
    seconds: float = 0.0
    batch: Batch | None = None  # several prompts at once (ids/pieces: the first one's)
    gelu_shares: dict = field(default_factory=dict)  # GELU input name -> GeluInputShares

    def row_labels(self) -> list[str]:
        """For a prompt or batch pass: a label per vector of a (B, T, C) node, in
        ``reshape(-1, C)`` order."""
        if self.batch is not None:
            return self.batch.row_labels()
        return [f"{i}: {p!r}" for i, p in enumerate(self.pieces)]

    def sample_pieces(self, b: int = 0) -> list[str]:
        """Sample b's pieces per position (a batch's padding labelled ``[pad]``)."""
        return self.batch.pieces(b) if self.batch is not None else list(self.pieces)


def _top(logits_row: torch.Tensor, k: int = 10) -> tuple[tuple[int, ...], tuple[float, ...]]:
    probs = torch.softmax(logits_row.float(), dim=-1)
    top = torch.topk(probs, k)
    return tuple(top.indices.tolist()), tuple(top.values.tolist())


class Engine(QObject):
    modelLoaded = Signal(object)  # ModelInfo
    loadFailed = Signal(str)
    progress = Signal(str)  # what the engine is doing now
    promptDone = Signal(object)  # PassResult of the prompt pass
    stepDone = Signal(object)  # PassResult of one generated token
    generationDone = Signal(str)  # why it stopped: max_new_tokens, eot, stopped, error
    failed = Signal(str)  # an error during a run, in words
    lensDone = Signal(object)  # list[LensRow]
    compareDone = Signal(object)  # (RunSummary pre, RunSummary post)
    gradientProgress = Signal(int, int)
    gradientsDone = Signal(object)  # GradientResult, or None when stopped
    trainEvent = Signal(object)  # StepEvent | EvalEvent | CheckpointEvent
    trainDone = Signal(str)  # the last checkpoint's path ("" if none)
    diffDone = Signal(object)  # Divergence

    def __init__(self, memory_budget: int = 1 << 30) -> None:
        super().__init__()
        self.loaded: LoadedModel | None = None
        self.stop_event = threading.Event()
        # Cleared by the GUI while it draws a new pass; the engine waits (briefly) for it
        # before its next long stretch of Python work, which would otherwise compete with
        # the drawing for the GIL and make the window late.
        self.gui_idle = threading.Event()
        self.gui_idle.set()
        self._retired: list = []  # passes the GUI no longer shows, to be freed here
        self.memory_budget = memory_budget
        self._cancelled = False  # the last prompt pass was stopped

    # ---------------------------------------------------------------------- memory
    def retire(self, *passes) -> None:
        """Called from the GUI thread with passes it replaced: they are freed here later
        (drop_retired), never on the GUI thread, where freeing a 1024-token pass's
        gigabyte of tensors at once takes ~60 ms."""
        self._retired.extend(p for p in passes if p is not None)

    @Slot()
    def drop_retired(self) -> None:
        """Free retired passes one tensor at a time; between two, the GIL can go to the
        GUI thread, so it never waits long. Call once the GUI has drawn the new pass
        (its views hold the old tensors until then)."""
        while self._retired:
            views = self._retired.pop().views
            while views:
                views.popitem()

    # ---------------------------------------------------------------------- models
    @Slot(object)
    def load(self, spec: ModelSpec) -> None:
        """Load a model; on failure the previous model stays loaded."""
        self.progress.emit(f"Loading {spec.describe()}…")  # the caller clears stop_event
        try:
            loaded = open_model(spec.checkpoint, spec.preset, device=spec.device,
                                dtype=spec.dtype, seed=spec.seed, norm_position=spec.norm_position,
                                should_stop=self.stop_event.is_set)
        except Cancelled:
            self.loadFailed.emit(f"Loading {spec.describe()} was stopped; the previous model stays.")
            return
        except (ValueError, MemoryError, OSError, RuntimeError) as exc:
            self.loadFailed.emit(str(exc))
            return
        self.loaded = loaded
        # The model's thousands of long-lived objects would make every full garbage
        # collection (which holds the GIL, so the GUI thread too) take ~100 ms: exempt them.
        gc.freeze()
        self.modelLoaded.emit(ModelInfo(
            label=loaded.label, size=loaded.size, config=loaded.config, trained=loaded.trained,
            device=str(loaded.device), dtype=str(loaded.dtype).replace("torch.", ""),
            notices=tuple(loaded.notices), spec=spec))

    # ---------------------------------------------------------------------- runs
    def _prompt_ids(self, text: str) -> tuple[list[int], list[str]]:
        cfg = self.loaded.config
        return prepare_prompt(encode(text), cfg.context_length)

    @Slot(str)
    def analyse(self, text: str) -> None:
        """One forward pass over the prompt with every node captured in full."""
        if self.loaded is None:
            self.failed.emit("no model is loaded yet")
            return
        try:
            ids, notices = self._prompt_ids(text)
        except ValueError as exc:
            self.failed.emit(str(exc))
            return
        self._run_pass(Batch(ids=(tuple(ids),), lengths=(len(ids),), notices=tuple(notices)),
                       single=True)

    @Slot(object)
    def analyse_batch(self, prompts: list[str]) -> None:
        """Several prompts at once, padded on the right; padding stays out of statistics.
        Ends with generationDone: "batch", "stopped" or "error" (nothing is generated)."""
        if self.loaded is None:
            self.failed.emit("no model is loaded yet")
            self.generationDone.emit("error")
            return
        try:
            batch = make_batch(list(prompts), self.loaded.config.context_length)
        except ValueError as exc:
            self.failed.emit(str(exc))
            self.generationDone.emit("error")
            return
        done = self._run_pass(batch, single=False)
        if self._cancelled:  # nothing is queued behind a batch
            self._cancelled = False
            self.stop_event.clear()
            self.generationDone.emit("stopped")
        else:
            self.generationDone.emit("batch" if done else "error")

    def _run_pass(self, batch: Batch, single: bool) -> bool:
        """The forward pass with full capture; emits promptDone and says whether it did."""
        try:
            what = (f"the prompt ({batch.width} tokens)" if single else batch.describe())
            self.progress.emit(f"Running {what}…")
            model = self.loaded.model
            notices = list(batch.notices)
            start = time.perf_counter()
            self._cancelled = False
            try:
                with torch.inference_mode(), StopCheck(model, self.stop_event.is_set), \
                        Capture(model, tensors=True, attention=True, mask=batch.mask,
                                budget_bytes=self.memory_budget) as cap:
                    model(torch.tensor(batch.ids, device=self.loaded.device))
            except Cancelled:
                self._cancelled = True  # the generation queued behind it is skipped too
                self.progress.emit("Stopped during the prompt pass")
                return False
            if cap.dropped:
                notices.append(f"{len(cap.dropped)} tensors were over the memory budget: "
                               "only their statistics are shown")
            logits = cap["out_head"].tensor
            last = batch.lengths[0] - 1  # the first prompt's last real token
            top_ids, top_probs = _top(logits[0, last]) if logits is not None else ((), ())
            ids = batch.sample(0)
            views = cap.views()
            # the GELU tab's shares, counted here: 3 million inputs a layer at T=1024
            shares = {n: gelu_input_shares(v.real_rows()) for n, v in views.items()
                      if n.endswith(".ff.layers.0") and v.array is not None}
            self.gui_idle.clear()  # set again by the window once it has drawn this pass
            self.promptDone.emit(PassResult(
                ids=ids, pieces=[token_piece(i) for i in ids], views=views, gelu_shares=shares,
                token_id=top_ids[0] if top_ids else None,
                prob=top_probs[0] if top_probs else None, top_ids=top_ids,
                top_probs=top_probs, top_pieces=tuple(token_piece(i) for i in top_ids),
                notices=notices, seconds=time.perf_counter() - start,
                batch=None if single else batch))
            return True
        except (ValueError, RuntimeError, MemoryError) as exc:
            self.failed.emit(str(exc))
            return False

    @Slot(str, object)
    def generate(self, text: str, settings: GenerationSettings) -> None:
        """Generate token by token; each step arrives with every node's vector."""
        if self.loaded is None:
            self.failed.emit("no model is loaded yet")
            self.generationDone.emit("error")
            return
        if self._cancelled:
            self._cancelled = False
            self.stop_event.clear()
            self.generationDone.emit("stopped")
            return
        self.gui_idle.wait(GUI_CATCH_UP_S)  # the prompt pass's views are being drawn
        self.drop_retired()  # the passes they showed before
        try:  # stop_event was cleared by whoever asked for the run
            ids, notices = self._prompt_ids(text)
            settings = dataclasses.replace(settings, capture_steps=True,
                                           show_top_k=max(settings.show_top_k, 10))
            stream = generate_stream(self.loaded.model, ids, settings)
            seen = list(stream.prompt_ids)
            for step in stream:
                seen.append(step.token_id)
                self.stepDone.emit(PassResult(
                    ids=list(seen), pieces=[], views=step.capture.views(), step=step.index,
                    token_id=step.token_id, prob=step.prob, top_ids=step.top_ids,
                    top_probs=step.top_probs, top_pieces=tuple(token_piece(i) for i in step.top_ids),
                    notices=notices if step.index == 0 else [], seconds=step.elapsed))
                if self.stop_event.is_set():  # checked between tokens
                    stream.close()
                    self.generationDone.emit("stopped")
                    return
            self.generationDone.emit(stream.stopped_by or "max_new_tokens")
        except (ValueError, RuntimeError, MemoryError) as exc:
            self.failed.emit(str(exc))
            self.generationDone.emit("error")
        except Exception:  # never let a worker exception pass silently
            self.failed.emit(traceback.format_exc(limit=3))
            self.generationDone.emit("error")

    @Slot(object, int)
    def lens(self, views: dict, position: int) -> None:
        """The logit lens at one position, from the residual streams in ``views``."""
        if self.loaded is None:
            return
        try:
            residuals = {n: torch.from_numpy(v.array) for n, v in views.items() if v.array is not None}
            self.lensDone.emit(logit_lens(self.loaded.model, residuals, position))
        except (ValueError, RuntimeError, IndexError) as exc:
            self.failed.emit(f"logit lens: {exc}")

    @Slot(str)
    def compare(self, text: str) -> None:
        """The prompt through the loaded model and its twin with the other norm order."""
        if self.loaded is None:
            return
        try:
            ids, _ = self._prompt_ids(text)
            self.progress.emit("Comparing Pre-LN and Post-LN…")
            self.compareDone.emit(compare_prompt(self.loaded.model, ids))
        except (ValueError, RuntimeError, MemoryError) as exc:
            self.failed.emit(f"Pre-LN/Post-LN comparison: {exc}")

    @Slot(object, str, int)
    def gradients(self, depths: list[int], scheme: str, seed: int) -> None:
        """Xiong et al.'s experiment at initialisation; Stop cancels between runs (the
        caller clears stop_event)."""
        text = resource_path("the-verdict.txt").read_text(encoding="utf-8")[:4000]

        def progress(done: int, total: int) -> bool:
            self.gradientProgress.emit(done, total)
            return not self.stop_event.is_set()

        try:
            self.gradientsDone.emit(gradient_experiment(EXPERIMENT_CONFIG, encode(text), depths,
                                                        scheme, seed, progress))
        except (ValueError, RuntimeError, MemoryError) as exc:
            self.failed.emit(f"gradient experiment: {exc}")
            self.gradientsDone.emit(None)

    @Slot(object, object, str)
    def train(self, text_path: str | None, settings, out_dir: str) -> None:
        """Train a small GPT; Stop saves a checkpoint before the next step."""
        from pathlib import Path

        from ..core.training import CheckpointEvent, Trainer, default_text

        last = ""  # the caller cleared stop_event
        try:
            text = Path(text_path).read_text(encoding="utf-8") if text_path else default_text()
            trainer = Trainer(text, settings, out_dir)
            self.progress.emit(f"Training {settings.preset}…")
            for event in trainer.run():
                if isinstance(event, CheckpointEvent):
                    last = event.path
                self.trainEvent.emit(event)
                if self.stop_event.is_set():
                    last = str(trainer.save())
                    break
        except (OSError, UnicodeDecodeError, ValueError, RuntimeError, MemoryError) as exc:
            self.failed.emit(f"training: {exc}")
        self.trainDone.emit(last)

    @Slot(str, str, int, float)
    def diff(self, text: str, spec: str, layer: int, tolerance: float) -> None:
        """The divergence finder: the loaded model against a change of it or a checkpoint."""
        from ..core.divergence import find_divergence, mutate

        if self.loaded is None:
            return
        try:
            ids, _ = self._prompt_ids(text)
            if spec.startswith("file:"):
                other = load_checkpoint(spec[len("file:"):], device=str(self.loaded.device)).model
            else:
                other = mutate(self.loaded.model, spec, layer=layer)
            self.diffDone.emit(find_divergence(self.loaded.model, other, ids, tolerance))
        except (ValueError, RuntimeError, MemoryError, OSError) as exc:
            self.failed.emit(f"divergence finder: {exc}")
