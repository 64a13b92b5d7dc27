"""Training a small GPT on a text, offline: a train/validation split, AdamW, linear
warm-up then cosine decay, gradient clipping, periodic evaluation with a sample
generation, and resumable checkpoints in the project's format.

``Trainer.run()`` is a generator of events (a step, an evaluation, a checkpoint), so the
CLI prints them and the app's engine forwards them; either stops it between steps.
Batches are drawn from a generator seeded by (seed, step), so a resumed run continues
exactly as an uninterrupted one would. Owns no UI.
"""

from __future__ import annotations

import contextlib
import math
import time
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Iterator

import torch

from ..base.devices import native_bfloat16, resolve_device
from ..base.state import remember_trained
from ..base.validate import FileKind, file_kind, read_json, real, whole
from ..gpt.config import NORM_POSITIONS, GPTConfig, preset
from ..gpt.build import build_model
from ..gpt.block_model import BlockModel
from ..gpt.moe import AUX_LOSS_COEF, balance_loss
from ..gpt.tokenizer import decode, encode
from ..run.generation import GenerationSettings, generate
from ..weights.checkpoints import load_checkpoint
from . import head_loss as head_losses
from .head_loss import loss_of
from .train_checkpoint import check_one_step, model_step, recover, write_checkpoint
from .train_memory import check_training_memory
from .train_files import (MODEL_FILE, OPTIMIZER_FILE, STATE_FILE, RunLock, check_out_dir,
                          check_preset, read_optimizer, resume_state)
from .train_text import default_text, read_text, tokens_of
from .snapshots import (DEFAULT_SNAPSHOTS, MAX_SNAPSHOTS, SnapshotSchedule, clear_snapshots,
                        write_snapshot)


PRECISIONS = ("auto", "float32", "bfloat16")


@dataclass
class TrainSettings:
    """Defaults are sized for a 2-core CPU and a few minutes."""

    preset: str = "mini"
    max_steps: int = 200
    max_minutes: float | None = None  # stop earlier when this much time has passed
    batch_size: int = 8
    lr: float = 1e-3
    min_lr: float = 1e-4
    warmup_steps: int = 20
    weight_decay: float = 0.1
    grad_clip: float = 1.0
    eval_every: int = 25
    eval_batches: int = 4  # the losses are estimates over this many batches of each split
    val_fraction: float = 0.1
    seed: int = 123
    sample_prompt: str = "Every effort moves you"
    sample_tokens: int = 20
    drop_rate: float = 0.1
    # "auto": bfloat16 autocast where the CPU computes bfloat16 natively (measured 1.4x
    # faster a step on AVX512-BF16, docs/PERFORMANCE.md), float32 elsewhere
    precision: str = "auto"
    # copies of the weights kept in the run folder at planned steps (snapshots.py)
    snapshots: int = DEFAULT_SNAPSHOTS
    device: str = "cpu"  # where the model trains: cpu, cuda, cuda:1, mps or auto
    norm_position: str | None = None  # where the preset's norms sit; None: the preset's own

    def validate(self) -> None:
        """Every setting of the right type and in range; the message names the setting,
        the value and the range."""
        checks = [
            lambda: whole(self.max_steps, "steps", 1, 10**9),
            lambda: whole(self.batch_size, "batch size", 1, 4096),
            lambda: whole(self.eval_every, "eval every", 1, 10**9),
            lambda: whole(self.eval_batches, "eval batches", 1, 100),
            lambda: whole(self.sample_tokens, "sample tokens", 1, 1000),
            lambda: whole(self.warmup_steps, "warmup steps", 0, 10**9),
            lambda: whole(self.seed, "seed", 0, 2**63 - 1),
            lambda: whole(self.snapshots, "snapshots", 0, MAX_SNAPSHOTS),
            lambda: real(self.lr, "the learning rate (--lr)", 0.0, 10.0, lo_open=True),
            lambda: real(self.min_lr, "the final learning rate", 0.0, 10.0, lo_open=True),
            lambda: real(self.weight_decay, "weight decay", 0.0, 10.0),
            lambda: real(self.grad_clip, "gradient clipping", 0.0, 1e6, lo_open=True),
            lambda: real(self.val_fraction, "the validation share", 0.0, 0.5, lo_open=True),
            lambda: real(self.drop_rate, "drop rate", 0.0, 0.999),
        ]
        if self.max_minutes is not None:
            checks.append(lambda: real(self.max_minutes, "minutes (--minutes)", 0.0, 10**7,
                                       lo_open=True))
        problems = []
        for check_one in checks:
            try:
                check_one()
            except ValueError as exc:
                problems.append(str(exc))
        if not problems and self.min_lr > self.lr:  # the schedule decays to min(lr, 1e-4)
            problems.append(f"the learning rate {self.lr:g} is below the schedule's final rate "
                            f"{self.min_lr:g}")
        if self.precision not in PRECISIONS:
            problems.append(f"precision {self.precision!r} is not one of {', '.join(PRECISIONS)}")
        if not isinstance(self.sample_prompt, str) or not isinstance(self.preset, str):
            problems.append("preset and sample prompt must be text")
        if self.norm_position is not None and self.norm_position not in NORM_POSITIONS:  # (a str subclass is one of the words)
            problems.append(f"norm position {self.norm_position!r:.40} is not one of "
                            f"{', '.join(NORM_POSITIONS)}")
        if not isinstance(self.device, str) or not 0 < len(self.device) <= 20:
            problems.append(f"device must be a device's name (cpu, cuda, mps, auto), not "
                            f"{self.device!r:.40}")
        if problems:
            raise ValueError("invalid training settings: " + "; ".join(problems))


@dataclass(frozen=True)
class StepEvent:
    step: int  # steps done so far
    loss: float
    lr: float
    tokens_per_second: float
    elapsed: float
    seconds: float = 0.0  # this step's own


@dataclass(frozen=True)
class EvalEvent:
    step: int
    train_loss: float
    val_loss: float
    sample: str
    seconds: float = 0.0  # the evaluation's and its sample's


@dataclass(frozen=True)
class CheckpointEvent:
    step: int
    path: str


@dataclass
class TrainState:
    step: int = 0
    history: list[dict] = field(default_factory=list)  # evaluations so far


def learning_rate(step: int, s: TrainSettings) -> float:
    """Linear warm-up to ``lr``, then cosine decay to ``min_lr`` at ``max_steps``."""
    if step < s.warmup_steps:
        return s.lr * (step + 1) / s.warmup_steps
    progress = min(1.0, (step - s.warmup_steps) / max(1, s.max_steps - s.warmup_steps))
    return s.min_lr + 0.5 * (s.lr - s.min_lr) * (1 + math.cos(math.pi * progress))


def split_tokens(text: str, val_fraction: float, context: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Token ids of the text, split at a character position (as the book does)."""
    cut = int(len(text) * (1 - val_fraction))
    train, val = tokens_of(text[:cut]), tokens_of(text[cut:])
    if len(train) < context + 1 or len(val) < context + 1:
        raise ValueError(f"the text is too short for a context of {context} tokens: "
                         f"{len(train)} training and {len(val)} validation tokens")
    return train, val


def batch(tokens: torch.Tensor, size: int, context: int, gen: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
    starts = torch.randint(0, len(tokens) - context - 1, (size,), generator=gen)
    x = torch.stack([tokens[s:s + context] for s in starts.tolist()])  # (B, T)
    y = torch.stack([tokens[s + 1:s + 1 + context] for s in starts.tolist()])
    return x, y


def uses_bfloat16(precision: str, device: torch.device = torch.device("cpu")) -> bool:
    return precision == "bfloat16" or (precision == "auto" and native_bfloat16(device))


class Trainer:
    def __init__(self, text: str, settings: TrainSettings = TrainSettings(),
                 out_dir: str | Path | None = None, model: BlockModel | None = None,
                 state: TrainState | None = None, optimizer_state: dict | None = None) -> None:
        settings.validate()
        self.settings = settings
        self.text = text
        self.out_dir = Path(out_dir) if out_dir else None
        self.recovered: str | None = None  # what resume found to repair in the folder
        self.device = resolve_device(settings.device)  # ValueError: what is available
        if model is not None:
            cfg = model.cfg
        else:  # a block without dropout (Llama's) has no rate to set
            base = preset(settings.preset)
            cfg = base.replace(tie_weights=True, norm_position=settings.norm_position
                               or base.norm_position, **(
                {"drop_rate": settings.drop_rate} if base.family.dropout else {}))
        check_training_memory(cfg, settings.batch_size, self.device,
                              settings.preset if model is None else "the model")
        if model is None:  # built only once it is known to fit, drawn on the CPU: one seed
            model = build_model(cfg, seed=settings.seed)  # gives one start on every device
        model = model.to(self.device)  # (a module moved keeps its shared head shared)
        self.model = model
        self.cfg: GPTConfig = model.cfg
        self.train_ids, self.val_ids = split_tokens(text, settings.val_fraction, self.cfg.context_length)
        decay = [p for n, p in model.named_parameters() if p.dim() >= 2]
        no_decay = [p for n, p in model.named_parameters() if p.dim() < 2]
        # fused: one kernel for every parameter's update (3.5 ms a step for mini on a CPU
        # against 30 ms for the per-tensor-list version); same arithmetic
        self.optimizer = torch.optim.AdamW(
            [{"params": decay, "weight_decay": settings.weight_decay},
             {"params": no_decay, "weight_decay": 0.0}], lr=settings.lr, betas=(0.9, 0.95),
            fused=True)
        if optimizer_state is not None:
            self.optimizer.load_state_dict(optimizer_state)
            for group in self.optimizer.param_groups:  # a state saved by another version
                group["fused"], group["foreach"] = True, None
        self.state = state or TrainState()
        self.bfloat16 = uses_bfloat16(settings.precision, self.device)

    # ------------------------------------------------------------------ evaluation
    @torch.no_grad()
    def evaluate(self) -> tuple[float, float]:
        self.model.eval()
        out = []
        for tokens, offset in ((self.train_ids, 0), (self.val_ids, 1)):
            gen = torch.Generator().manual_seed(self.settings.seed + offset)  # the same batches each time
            losses = [loss_of(self.model, *self._batch(tokens, gen), self.bfloat16).item()
                      for _ in range(self.settings.eval_batches)]
            out.append(sum(losses) / len(losses))
        self.model.train()
        return out[0], out[1]

    def _batch(self, tokens: torch.Tensor, gen: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
        """A batch drawn on the CPU (the same on every device), on the model's device."""
        x, y = batch(tokens, self.settings.batch_size, self.cfg.context_length, gen)
        return x.to(self.device), y.to(self.device)

    def sample(self) -> str:
        self.model.eval()
        result = generate(self.model, encode(self.settings.sample_prompt),
                          GenerationSettings(max_new_tokens=self.settings.sample_tokens, stop_at_eot=False))
        self.model.train()
        return self.settings.sample_prompt + decode(result.new_ids)

    # ------------------------------------------------------------------ training
    def run(self) -> Iterator[StepEvent | EvalEvent | CheckpointEvent]:
        """Train until max_steps or max_minutes; yields after every step. The folder is
        held while it trains: a second training into it is refused (``RunLock``)."""
        held = RunLock(self.out_dir) if self.out_dir else contextlib.nullcontext()
        try:
            with held:
                yield from self._run()
        finally:
            head_losses.release()  # the logits' buffer kept between steps

    def _run(self) -> Iterator[StepEvent | EvalEvent | CheckpointEvent]:
        s = self.settings
        start = time.perf_counter()
        saved = None
        self.model.train()
        plan = SnapshotSchedule(s.max_steps, s.snapshots if self.out_dir else 0, s.max_minutes)
        if self.state.step == 0:
            if self.out_dir is not None:  # a new run: an earlier one's snapshots go
                clear_snapshots(self.out_dir)
            yield self._eval_event()
        if plan.due(self.state.step, 0.0):
            yield write_snapshot(self.model, self.out_dir, self.state.step)
        while self.state.step < s.max_steps:
            if s.max_minutes is not None and time.perf_counter() - start > 60 * s.max_minutes:
                break
            t0 = time.perf_counter()
            lr = learning_rate(self.state.step, s)
            for group in self.optimizer.param_groups:
                group["lr"] = lr
            gen = torch.Generator().manual_seed(s.seed * 1_000_003 + self.state.step)
            x, y = self._batch(self.train_ids, gen)
            torch.manual_seed(s.seed * 1_000_003 + self.state.step)  # dropout masks, per step
            loss = loss_of(self.model, x, y, self.bfloat16)
            aux = balance_loss(self.model)  # a mixture of experts: keep its experts in use
            total = loss if aux is None else loss + AUX_LOSS_COEF * aux
            if not torch.isfinite(total):
                raise ValueError(f"the loss became {loss.item()} at step {self.state.step + 1}: "
                                 f"training diverged (learning rate {lr:.2g} too high?); the "
                                 "last good checkpoint stays as it was")
            self.optimizer.zero_grad(set_to_none=True)
            total.backward()
            torch.nn.utils.clip_grad_norm_(self.model.parameters(), s.grad_clip, foreach=True)
            self.optimizer.step()
            self.state.step += 1
            dt = time.perf_counter() - t0
            yield StepEvent(self.state.step, loss.item(), lr, x.numel() / dt,
                            time.perf_counter() - start, dt)
            if plan.due(self.state.step, time.perf_counter() - start):
                yield write_snapshot(self.model, self.out_dir, self.state.step)
            if self.state.step % s.eval_every == 0 or self.state.step == s.max_steps:
                yield self._eval_event()
                if self.out_dir is not None:
                    saved = self.state.step
                    yield CheckpointEvent(saved, str(self.save()))
        if plan.last(self.state.step):
            yield write_snapshot(self.model, self.out_dir, self.state.step)
        if self.out_dir is not None and saved != self.state.step:
            yield CheckpointEvent(self.state.step, str(self.save()))
        if self.out_dir is not None:  # finished: remembered as a model trained here
            last = self.state.history[-1] if self.state.history else {}
            remember_trained(self.out_dir / MODEL_FILE, self.state.step, last.get("val_loss"),
                             s.preset)

    def _eval_event(self) -> EvalEvent:
        t0 = time.perf_counter()
        train_loss, val_loss = self.evaluate()
        sample = self.sample()
        event = EvalEvent(self.state.step, train_loss, val_loss, sample, time.perf_counter() - t0)
        self.state.history.append(asdict(event))
        return event

    # ------------------------------------------------------------------ checkpoints
    def save(self, out_dir: str | Path | None = None) -> Path:
        """Model (project format), optimizer and trainer state, written whole or not at
        all (train_checkpoint.py); a failed write (a full disk) is one line, and the
        previous checkpoint stays."""
        state = {"step": self.state.step, "history": self.state.history,
                 "settings": asdict(self.settings)}
        return write_checkpoint(Path(out_dir or self.out_dir), self.model,
                                self.optimizer.state_dict(), state)

    @classmethod
    def resume(cls, folder: str | Path, text: str, **changes) -> "Trainer":
        """Continue a run saved in ``folder`` (settings may be changed, e.g. max_steps).
        Every part of the saved run is checked against the others and the limits: the
        step, the history, the settings, the model's size and the optimizer's state."""
        folder = Path(folder)
        state_path = folder / STATE_FILE
        recovered = recover(folder)  # a checkpoint cut short by a kill: finished or dropped
        if file_kind(state_path) == FileKind.MISSING:
            raise ValueError(f"{folder}: no resumable training run here (no {STATE_FILE})")
        state = read_json(state_path, "a training state")
        step, history, saved = resume_state(state_path, state)
        unknown = [repr(k)[:40] for k in sorted(set(saved) - {f.name for f in fields(TrainSettings)})]
        if unknown:  # as repr: a key holding a line break stays on one line
            raise ValueError(f"{state_path}: unknown training settings ({', '.join(unknown[:5])})")
        settings = TrainSettings(**{**saved, **changes})
        settings.validate()
        own_end = TrainSettings(**saved).max_steps
        if step > own_end:
            raise ValueError(f"{state_path}: says step {step:,}, past the run's own end at "
                             f"{own_end:,} steps: the file is damaged")
        loaded = load_checkpoint(folder / MODEL_FILE)
        check_preset(state_path, settings.preset, loaded.config)
        model = loaded.model.train()
        for p in model.parameters():
            p.requires_grad_(True)
        optimizer_state = read_optimizer(folder / OPTIMIZER_FILE, model)
        check_one_step(folder, step, model_step(folder / MODEL_FILE), optimizer_state)
        try:
            trainer = cls(text, settings, folder, model, TrainState(step, history), optimizer_state)
            trainer.recovered = recovered
            return trainer
        except (ValueError, KeyError, TypeError, RuntimeError) as exc:  # the optimizer's state
            if isinstance(exc, ValueError) and "invalid training settings" in str(exc):
                raise
            raise ValueError(f"{folder / OPTIMIZER_FILE}: does not fit this model ({exc})") from None

    @property
    def finished(self) -> bool:
        return self.state.step >= self.settings.max_steps


def train(text_path: str | None, settings: TrainSettings, out_dir: str | Path, report,
          should_stop=None) -> str:
    """Train on a text file (default: "The Verdict"), reporting every event; a stop
    saves a checkpoint at the current step. Returns the last checkpoint's path."""
    text = read_text(text_path) if text_path else default_text()
    check_out_dir(out_dir, fresh=True)  # a run already there is never replaced
    trainer = Trainer(text, settings, out_dir)
    last = ""
    for event in trainer.run():
        if isinstance(event, CheckpointEvent):
            last = event.path
        report(event)
        if should_stop is not None and should_stop():
            return str(trainer.save())
    return last
