"""Where the norm sits, measured: the stability experiments for every placement side by
side, on one small GPT of the experiment's shape (``ln_compare.EXPERIMENT_CONFIG``) and
one text ("The Verdict"), as numbers and for the figures.

- ``at_initialisation``: Xiong et al. (2020)'s gradient norm of each block's last
  feed-forward Linear after one backward of the LM loss (their Fig. 3: Post-LN's grow
  toward the output, Pre-LN's stay level), and the residual stream's size after every
  block on the same tokens (the growth Peri-LN was proposed to tame) — seconds a
  placement.
- ``train_placement``: the same model trained with each placement on the same text and
  schedule, with and without the learning rate's warm-up (Xiong's claim: Post-LN needs
  it): the training loss at every step, and the stream's size after every block once
  trained (where Peri-LN's taming would show).

Qt-free; ``gpt-explorer compare-ln --json`` writes them, ``--plot`` draws them."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Callable

import numpy as np
import torch

from ..base.cancel import check
from ..gpt.build import build_model
from ..gpt.config import GPTConfig
from ..gpt.hooks import hooks
from ..gpt.nodes import Role, block_hook_name, block_output, order_of, role
from ..gpt.norm_position import NormPosition
from .ln_compare import initialise, lm_loss
from .training import StepEvent, Trainer, TrainSettings

INTRO = ("The same fresh model in each placement: the gradient that reaches each block and the "
         "stream's size after it, at initialisation (Xiong et al. 2020's Fig. 3, every "
         "placement); trained on the sample text, the loss with and without the learning "
         "rate's warm-up (their claim: Post-LN needs it).")
WARMUPS = {"warm-up": 20, "no warm-up": 0}  # the learning rate's warm-up steps compared
TRAIN_CONTEXT = 64  # tokens a row: a hundred steps of 12 blocks in about fifteen seconds on a CPU
LAST = 10  # the final loss said is the mean of the last steps' (one batch's is noisy)
TRAIN_LR = TrainSettings.lr  # the trainer's own peak learning rate
NO_CLIPPING = 1e6  # a gradient clip no gradient of these models reaches


class Measure(StrEnum):
    """What the experiments measure of each placement: the gradient per block at
    initialisation, the stream after each block, the training loss."""
    GRAD = "grad"
    RESIDUAL = "residual"
    LOSS = "loss"


@dataclass
class Placed:
    """One placement's measurements: per block at initialisation, and (when trained)
    the training loss at every step and the stream's size after training, each with
    and without the warm-up."""

    position: NormPosition
    grad_norms: list[float]  # |grad| of each block's last feed-forward Linear weight
    residual_norms: list[float]  # mean per-token L2 norm of each block's output
    losses: dict[str, list[list[float]]] = field(default_factory=dict)  # -> [[step, loss]]
    trained_residual_norms: dict[str, list[float]] = field(default_factory=dict)

    def as_json(self) -> dict:
        out = {"grad_norms": self.grad_norms, "residual_norms": self.residual_norms}
        if self.losses:
            out["losses"] = self.losses
            out["trained_residual_norms"] = self.trained_residual_norms
        return out


def _keep_sizes(model, sizes: dict[int, float]) -> list:
    """Hooks that keep each block output's mean per-token L2 norm in ``sizes``."""
    def keep(layer: int):
        def hook(module, inputs, out):
            sizes[layer] = float(out.detach().norm(dim=-1).mean())
        return hook

    output = block_output(order_of(model.cfg))
    return [(block_hook_name(i, output), keep(i)) for i in range(model.cfg.n_layers)]


def _fresh(cfg: GPTConfig, scheme: str, seed: int):
    """``cfg``'s model initialised by ``scheme`` (ln_compare.INITS), dropout off."""
    return initialise(build_model(cfg.replace(drop_rate=0.0), seed=None), scheme, seed)


def at_initialisation(cfg: GPTConfig, ids: list[int], scheme: str = "xavier",
                      seed: int = 0) -> tuple[list[float], list[float]]:
    """(each block's last Linear's gradient norm, each block's output's mean per-token L2
    norm) of ``cfg``'s model, initialised by ``scheme``, dropout off, on ``ids``."""
    model = _fresh(cfg, scheme, seed).train()
    sizes: dict[int, float] = {}
    with hooks(model, _keep_sizes(model, sizes)):
        loss = lm_loss(model, torch.tensor([ids[: cfg.context_length + 1]]))
    loss.backward()
    last = role(order_of(model.cfg), Role.LAST_LINEAR)
    grads = [float(model.get_submodule(block_hook_name(i, last)).weight.grad.norm())
             for i in range(cfg.n_layers)]
    return grads, [sizes[i] for i in range(cfg.n_layers)]


@torch.no_grad()
def stream_sizes(model, ids: list[int]) -> list[float]:
    """Each block output's mean per-token L2 norm of ``model`` on ``ids`` (evaluation
    mode: what the trained model does, no dropout)."""
    model.eval()
    sizes: dict[int, float] = {}
    with hooks(model, _keep_sizes(model, sizes)):
        model(torch.tensor([ids[: model.cfg.context_length]], device=next(model.parameters()).device))
    return [sizes[i] for i in range(model.cfg.n_layers)]


def train_placement(cfg: GPTConfig, text: str, ids: list[int], steps: int, lr: float = TRAIN_LR,
                    scheme: str = "xavier", seed: int = 0,
                    step_done: Callable[[], None] | None = None,
                    should_stop=None) -> tuple[dict[str, list[list[float]]], dict[str, list[float]]]:
    """``cfg``'s model, initialised as measured at initialisation, trained ``steps``
    steps on ``text`` with and without the warm-up, the schedule otherwise the same: the
    trainer's AdamW and cosine decay at ``lr``, no gradient clipping (a safeguard that
    would hide what the placement does). (the loss at every step, the stream's sizes on
    ``ids`` afterwards), each by warm-up; ``step_done()`` after every step."""
    curves, sizes = {}, {}
    for name, warmup in WARMUPS.items():
        settings = TrainSettings(max_steps=steps, warmup_steps=min(warmup, steps), lr=lr,
                                 min_lr=lr / 10, grad_clip=NO_CLIPPING, seed=seed, drop_rate=0.0,
                                 eval_every=10**9, snapshots=0, precision="float32")
        trainer = Trainer(text, settings, model=_fresh(cfg, scheme, seed))
        curve = []
        for event in trainer.run():
            check(should_stop)
            if isinstance(event, StepEvent):
                curve.append([event.step, event.loss if math.isfinite(event.loss) else None])
                if step_done is not None:
                    step_done()
        curves[name], sizes[name] = curve, stream_sizes(trainer.model, ids)
    return curves, sizes


def stability(base: GPTConfig, ids: list[int], positions=tuple(NormPosition),
              scheme: str = "xavier", seed: int = 0, train_steps: int = 0, text: str = "",
              lr: float = TRAIN_LR, progress: Callable[[int, int], None] | None = None,
              should_stop=None) -> dict[NormPosition, Placed]:
    """Each placement of ``positions`` on ``base``'s shape (rows of at most
    ``TRAIN_CONTEXT`` tokens, tied head): measured at initialisation, and trained
    ``train_steps`` steps on ``text`` with and without warm-up (none: 0).
    ``progress(done, total)`` after each measurement and each step trained;
    ``should_stop`` between them."""
    out = {}
    base = base.replace(context_length=min(base.context_length, TRAIN_CONTEXT), tie_weights=True)
    positions = [NormPosition(p) for p in positions]
    total = len(positions) * (1 + len(WARMUPS) * train_steps)
    done = 0

    def advance() -> None:
        nonlocal done
        done += 1
        if progress is not None:
            progress(done, total)

    for position in positions:
        check(should_stop)
        cfg = base.replace(norm_position=position)
        placed = Placed(position, *at_initialisation(cfg, ids, scheme, seed))
        advance()
        if train_steps:
            placed.losses, placed.trained_residual_norms = train_placement(
                cfg, text, ids, train_steps, lr, scheme, seed, advance, should_stop)
        out[position] = placed
    return out


def final_loss(curve: list[list[float]]) -> float | None:
    """The mean loss of the last ``LAST`` steps; None when one of them diverged."""
    last = [loss for _, loss in curve[-LAST:]]
    return None if not last or None in last else float(np.mean(last))


def summary(results: dict[NormPosition, Placed]) -> list[str]:
    """One line a placement, its numbers in words: the last block's gradient against the
    first's, the stream's growth over the blocks, and (trained) its final losses."""
    lines = []
    for position, r in results.items():
        grads, sizes = np.asarray(r.grad_norms), np.asarray(r.residual_norms)
        line = (f"{position.title:12s} gradient last/first block ×{grads[-1] / grads[0]:.2f}; "
                f"stream after the last block {sizes[-1]:.3g} (×{sizes[-1] / sizes[0]:.2f} "
                "over the blocks)")
        for name, curve in r.losses.items():
            final = final_loss(curve)
            line += (f"; {name}: loss {final:.3f} (last {min(LAST, len(curve))} steps), stream "
                     f"{r.trained_residual_norms[name][-1]:.3g}" if final is not None
                     else f"; {name}: diverged")
        lines.append(line)
    return lines
