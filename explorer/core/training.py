"""Training a small GPT on a text, offline: a train/validation split, AdamW, linear
warm-up then cosine decay, gradient clipping, periodic evaluation with a sample
generation, and resumable checkpoints in the project's format.

``Trainer.run()`` is a generator of events (a step, an evaluation, a checkpoint), so the
CLI prints them and the app's engine forwards them; either stops it between steps.
Batches are drawn from a generator seeded by (seed, step), so a resumed run continues
exactly as an uninterrupted one would. Owns no UI.
"""

from __future__ import annotations

import json
import math
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Iterator

import torch
import torch.nn.functional as F

from .checkpoints import load_checkpoint, save_checkpoint
from .config import GPTConfig, preset
from .generation import GenerationSettings, generate
from .model import GPTModel, build_model
from .resources import resource_path
from .tokenizer import decode, encode

MODEL_FILE, OPTIMIZER_FILE, STATE_FILE = "model.safetensors", "optimizer.pt", "trainer.json"


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
    eval_batches: int = 4
    val_fraction: float = 0.1
    seed: int = 123
    sample_prompt: str = "Every effort moves you"
    sample_tokens: int = 20
    drop_rate: float = 0.1

    def validate(self) -> None:
        problems = []
        for name in ("max_steps", "batch_size", "eval_every", "eval_batches", "sample_tokens"):
            if getattr(self, name) <= 0:
                problems.append(f"{name} must be positive")
        if self.warmup_steps < 0:
            problems.append("warmup_steps must be 0 or more")
        if not 0 < self.min_lr <= self.lr:
            problems.append("need 0 < min_lr <= lr")
        if not 0 < self.val_fraction < 0.5:
            problems.append("val_fraction must be in (0, 0.5)")
        if self.max_minutes is not None and self.max_minutes <= 0:
            problems.append("max_minutes must be positive")
        if problems:
            raise ValueError("invalid training settings: " + "; ".join(problems))


@dataclass(frozen=True)
class StepEvent:
    step: int  # steps done so far
    loss: float
    lr: float
    tokens_per_second: float
    elapsed: float


@dataclass(frozen=True)
class EvalEvent:
    step: int
    train_loss: float
    val_loss: float
    sample: str


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
    train, val = torch.tensor(encode(text[:cut])), torch.tensor(encode(text[cut:]))
    if len(train) < context + 1 or len(val) < context + 1:
        raise ValueError(f"the text is too short for a context of {context} tokens: "
                         f"{len(train)} training and {len(val)} validation tokens")
    return train, val


def batch(tokens: torch.Tensor, size: int, context: int, gen: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
    starts = torch.randint(0, len(tokens) - context - 1, (size,), generator=gen)
    x = torch.stack([tokens[s:s + context] for s in starts.tolist()])  # (B, T)
    y = torch.stack([tokens[s + 1:s + 1 + context] for s in starts.tolist()])
    return x, y


def loss_of(model: GPTModel, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    logits = model(x)  # (B, T, V)
    return F.cross_entropy(logits.flatten(0, 1), y.flatten())


class Trainer:
    def __init__(self, text: str, settings: TrainSettings = TrainSettings(),
                 out_dir: str | Path | None = None, model: GPTModel | None = None,
                 state: TrainState | None = None, optimizer_state: dict | None = None) -> None:
        settings.validate()
        self.settings = settings
        self.text = text
        self.out_dir = Path(out_dir) if out_dir else None
        if model is None:
            cfg = preset(settings.preset, drop_rate=settings.drop_rate, tie_weights=True)
            model = build_model(cfg, seed=settings.seed)
        self.model = model
        self.cfg: GPTConfig = model.cfg
        self.train_ids, self.val_ids = split_tokens(text, settings.val_fraction, self.cfg.context_length)
        decay = [p for n, p in model.named_parameters() if p.dim() >= 2]
        no_decay = [p for n, p in model.named_parameters() if p.dim() < 2]
        self.optimizer = torch.optim.AdamW(
            [{"params": decay, "weight_decay": settings.weight_decay},
             {"params": no_decay, "weight_decay": 0.0}], lr=settings.lr, betas=(0.9, 0.95))
        if optimizer_state is not None:
            self.optimizer.load_state_dict(optimizer_state)
        self.state = state or TrainState()

    # ------------------------------------------------------------------ evaluation
    @torch.no_grad()
    def evaluate(self) -> tuple[float, float]:
        self.model.eval()
        out = []
        for tokens, offset in ((self.train_ids, 0), (self.val_ids, 1)):
            gen = torch.Generator().manual_seed(self.settings.seed + offset)  # the same batches each time
            losses = [loss_of(self.model, *batch(tokens, self.settings.batch_size, self.cfg.context_length, gen)).item()
                      for _ in range(self.settings.eval_batches)]
            out.append(sum(losses) / len(losses))
        self.model.train()
        return out[0], out[1]

    def sample(self) -> str:
        self.model.eval()
        result = generate(self.model, encode(self.settings.sample_prompt),
                          GenerationSettings(max_new_tokens=self.settings.sample_tokens, stop_at_eot=False))
        self.model.train()
        return self.settings.sample_prompt + decode(result.new_ids)

    # ------------------------------------------------------------------ training
    def run(self) -> Iterator[StepEvent | EvalEvent | CheckpointEvent]:
        """Train until max_steps or max_minutes; yields after every step."""
        s = self.settings
        start = time.perf_counter()
        saved = None
        self.model.train()
        if self.state.step == 0:
            yield self._eval_event()
        while self.state.step < s.max_steps:
            if s.max_minutes is not None and time.perf_counter() - start > 60 * s.max_minutes:
                break
            t0 = time.perf_counter()
            lr = learning_rate(self.state.step, s)
            for group in self.optimizer.param_groups:
                group["lr"] = lr
            gen = torch.Generator().manual_seed(s.seed * 1_000_003 + self.state.step)
            x, y = batch(self.train_ids, s.batch_size, self.cfg.context_length, gen)
            torch.manual_seed(s.seed * 1_000_003 + self.state.step)  # dropout masks, per step
            loss = loss_of(self.model, x, y)
            self.optimizer.zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(self.model.parameters(), s.grad_clip)
            self.optimizer.step()
            self.state.step += 1
            dt = time.perf_counter() - t0
            yield StepEvent(self.state.step, loss.item(), lr, x.numel() / dt, time.perf_counter() - start)
            if self.state.step % s.eval_every == 0 or self.state.step == s.max_steps:
                yield self._eval_event()
                if self.out_dir is not None:
                    saved = self.state.step
                    yield CheckpointEvent(saved, str(self.save()))
        if self.out_dir is not None and saved != self.state.step:
            yield CheckpointEvent(self.state.step, str(self.save()))

    def _eval_event(self) -> EvalEvent:
        train_loss, val_loss = self.evaluate()
        event = EvalEvent(self.state.step, train_loss, val_loss, self.sample())
        self.state.history.append(asdict(event))
        return event

    # ------------------------------------------------------------------ checkpoints
    def save(self, out_dir: str | Path | None = None) -> Path:
        """Model (project format), optimizer and trainer state, written atomically."""
        folder = Path(out_dir or self.out_dir)
        folder.mkdir(parents=True, exist_ok=True)
        path = save_checkpoint(self.model, folder / MODEL_FILE, trained=self.state.step > 0,
                               metadata={"train_step": str(self.state.step)})
        tmp = folder / (OPTIMIZER_FILE + ".part")
        torch.save(self.optimizer.state_dict(), tmp)
        tmp.replace(folder / OPTIMIZER_FILE)
        state = {"step": self.state.step, "history": self.state.history, "settings": asdict(self.settings)}
        (folder / (STATE_FILE + ".part")).write_text(json.dumps(state, indent=1))
        (folder / (STATE_FILE + ".part")).replace(folder / STATE_FILE)
        return path

    @classmethod
    def resume(cls, folder: str | Path, text: str, **changes) -> "Trainer":
        """Continue a run saved in ``folder`` (settings may be changed, e.g. max_steps)."""
        folder = Path(folder)
        try:
            state = json.loads((folder / STATE_FILE).read_text())
        except (OSError, ValueError) as exc:
            raise ValueError(f"{folder}: no resumable training run here ({exc})") from None
        settings = TrainSettings(**{**state["settings"], **changes})
        loaded = load_checkpoint(folder / MODEL_FILE)
        optimizer_state = torch.load(folder / OPTIMIZER_FILE, map_location="cpu", weights_only=True)
        model = loaded.model.train()
        for p in model.parameters():
            p.requires_grad_(True)
        return cls(text, settings, folder, model, TrainState(state["step"], state["history"]),
                   optimizer_state)


def default_text() -> str:
    return resource_path("the-verdict.txt").read_text(encoding="utf-8")


def train(text_path: str | None, settings: TrainSettings, out_dir: str | Path, report,
          should_stop=None) -> str:
    """Train on a text file (default: "The Verdict"), reporting every event; a stop
    saves a checkpoint at the current step. Returns the last checkpoint's path."""
    try:
        text = Path(text_path).read_text(encoding="utf-8") if text_path else default_text()
    except (OSError, UnicodeDecodeError) as exc:
        raise ValueError(f"{text_path}: cannot read it as UTF-8 text ({exc})") from None
    trainer = Trainer(text, settings, out_dir)
    last = ""
    for event in trainer.run():
        if isinstance(event, CheckpointEvent):
            last = event.path
        report(event)
        if should_stop is not None and should_stop():
            return str(trainer.save())
    return last
