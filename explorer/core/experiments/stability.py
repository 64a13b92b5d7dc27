"""Where the norm sits, measured: the stability experiments for every placement side by
side, on one small GPT of the experiment's shape (``ln_compare.EXPERIMENT_CONFIG``) and
one text ("The Verdict"), as numbers and for the figures.

- ``at_initialisation``: Xiong et al. (2020)'s gradient norm of each block's last
  feed-forward Linear after one backward of the LM loss (their Fig. 3: Post-LN's grow
  toward the output, Pre-LN's stay level), and the residual stream's size after every
  block on the same tokens (the growth Peri-LN was proposed to tame) — seconds a
  placement.
- ``loss_curves``: the same small model trained with each placement on the same text and
  schedule, with and without the learning rate's warm-up (Xiong's claim: Post-LN needs
  it), the training loss at every step.

Qt-free; ``gpt-explorer compare-ln --json`` writes them, ``--plot`` draws them."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
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

WARMUPS = {"warm-up": 20, "no warm-up": 0}  # the learning rate's warm-up steps compared
TRAIN_PRESET = "tiny"  # the model the training comparison trains (seconds a hundred steps)


@dataclass
class Placed:
    """One placement's measurements: per block at initialisation, and (when trained)
    the training loss at every step with and without the warm-up."""

    position: NormPosition
    grad_norms: list[float]  # |grad| of each block's last feed-forward Linear weight
    residual_norms: list[float]  # mean per-token L2 norm of each block's output
    losses: dict[str, list[list[float]]] = field(default_factory=dict)  # -> [[step, loss]]

    def as_json(self) -> dict:
        out = {"grad_norms": self.grad_norms, "residual_norms": self.residual_norms}
        if self.losses:
            out["losses"] = self.losses
        return out


def at_initialisation(cfg: GPTConfig, ids: list[int], scheme: str = "xavier",
                      seed: int = 0) -> tuple[list[float], list[float]]:
    """(each block's last Linear's gradient norm, each block's output's mean per-token L2
    norm) of ``cfg``'s model, initialised by ``scheme``, dropout off, on ``ids``."""
    model = initialise(build_model(cfg.replace(drop_rate=0.0), seed=None), scheme, seed)
    model.train()
    order = order_of(model.cfg)
    sizes: dict[int, float] = {}

    def keep(layer: int):
        def hook(module, inputs, out):
            sizes[layer] = float(out.detach().norm(dim=-1).mean())
        return hook

    outputs = [(block_hook_name(i, block_output(order)), keep(i)) for i in range(cfg.n_layers)]
    with hooks(model, outputs):
        loss = lm_loss(model, torch.tensor([ids[: cfg.context_length + 1]]))
    loss.backward()
    last = role(order, Role.LAST_LINEAR)
    grads = [float(model.get_submodule(block_hook_name(i, last)).weight.grad.norm())
             for i in range(cfg.n_layers)]
    return grads, [sizes[i] for i in range(cfg.n_layers)]


def loss_curves(position: NormPosition, text: str, steps: int, seed: int = 0,
                should_stop=None) -> dict[str, list[list[float]]]:
    """The training loss at every step of ``TRAIN_PRESET`` with its norms at
    ``position``, with and without the warm-up, on ``text``, same schedule otherwise."""
    from .training import Trainer, TrainSettings, StepEvent

    out = {}
    for name, warmup in WARMUPS.items():
        settings = TrainSettings(preset=TRAIN_PRESET, norm_position=str(position),
                                 max_steps=steps, warmup_steps=min(warmup, steps), seed=seed,
                                 eval_every=10**9, snapshots=0, precision="float32")
        trainer = Trainer(text, settings)
        curve = []
        for event in trainer.run():
            check(should_stop)
            if isinstance(event, StepEvent):
                curve.append([event.step, event.loss if math.isfinite(event.loss) else None])
        out[name] = curve
    return out


def stability(base: GPTConfig, ids: list[int], positions=tuple(NormPosition),
              scheme: str = "xavier", seed: int = 0, train_steps: int = 0, text: str = "",
              progress: Callable[[int, int], None] | None = None,
              should_stop=None) -> dict[NormPosition, Placed]:
    """Each placement of ``positions``, measured on ``base``'s shape at initialisation,
    and trained ``train_steps`` steps on ``text`` with and without warm-up (none: 0).
    ``progress(done, total)`` after each placement; ``should_stop`` between steps."""
    out = {}
    positions = [NormPosition(p) for p in positions]
    for i, position in enumerate(positions):
        check(should_stop)
        grads, sizes = at_initialisation(base.replace(norm_position=position), ids, scheme, seed)
        placed = Placed(position, grads, sizes)
        if train_steps:
            placed.losses = loss_curves(position, text, train_steps, seed, should_stop)
        out[position] = placed
        if progress is not None:
            progress(i + 1, len(positions))
    return out


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
            final = next((loss for _, loss in reversed(curve) if loss is not None), None)
            line += f"; {name}: loss {final:.3f}" if final is not None else f"; {name}: diverged"
        lines.append(line)
    return lines
