"""Gradient flow through the shortcuts, live: the prompt's next-token loss (each token
predicting the next, cross-entropy) backpropagated through the loaded model, and the
norm of the gradient at every node's output — with the shortcuts in place, and with
every block's two shortcuts removed (each add returns only its branch: the
``no-shortcut`` intervention at every add). The book's vanishing-gradient
demonstration (chapter 4, ``ExampleDeepNeuralNetwork``) at GPT-2 scale.

Hooks are temporary and removed in ``finally``; no parameter gradient is accumulated
(``torch.autograd.grad`` asks only for the nodes' outputs). The memory a run needs is
checked before it starts, and Stop is asked after every block, forward and backward.
Qt-free."""

from __future__ import annotations

import math
from contextlib import ExitStack
from dataclasses import dataclass

import torch
import torch.nn.functional as F

from ..base.cancel import Cancelled, check
from ..base.devices import check_memory
from ..gpt.hooks import hooks
from ..gpt.block_model import BlockModel
from ..gpt.config import NormPosition
from ..gpt.nodes import (Kind, embeddings, order_of, EMBEDDING_SUM, POSITION_EMBEDDING, TOKEN_EMBEDDING,
                         all_hook_names, block_hook_name, block_module_name, block_nodes,
                         block_output, residual_branches)
from .interventions import shortcut_hooks


@dataclass(frozen=True)
class GradientRun:
    shortcut: bool
    norms_kept: bool  # False: the blocks' LayerNorms pass their input through
    loss: float
    norms: dict[str, float]  # hook name -> L2 norm of d loss / d (node output)
    residual: tuple[float, ...]  # along the residual stream: the embeddings, then each block's output
    blocks: tuple[float, ...]  # each block's parameters together: the gradient that trains them

    def first_layer(self) -> float:
        """The norm of the gradient of block 0's parameters — the book's measure (its
        ``print_gradients`` reads the first layer's weight gradient)."""
        return self.blocks[0]


@dataclass(frozen=True)
class GradientReport:
    prompt_tokens: int
    runs: tuple[GradientRun, ...]  # with shortcuts first, then without (when asked)
    norm: str = "LayerNorm"  # what the blocks' norms are ("RMSNorm", "DyT")
    placement: str = "Pre-LN, x + f(norm(x))"  # where they sit, in words and formula

    def ratio(self) -> float | None:
        """The first block's gradient norm with shortcuts / without."""
        if len(self.runs) < 2:
            return None
        with_, without = self.runs[0].first_layer(), self.runs[1].first_layer()
        if without == 0:  # it underflowed on its way down
            return math.inf if with_ > 0 else None
        return with_ / without


def without_block_norms(model: BlockModel):
    """Every block's LayerNorms return their input unchanged while the context is open
    (the final norm stays): the blocks become a plain deep network."""
    cfg = model.cfg
    norms = [n.key for n in block_nodes(order_of(cfg)) if n.kind in (Kind.NORM, Kind.RMSNORM)]
    return hooks(model, [(block_hook_name(i, key), lambda m, inp, out: inp[0])
                         for i in range(cfg.n_layers) for key in norms])


def without_shortcuts(model: BlockModel):
    """Every block's adds return only their branch while the context is open (the
    no-shortcut intervention at every add)."""
    cfg = model.cfg
    return hooks(model, [hook for i in range(cfg.n_layers) for key in residual_branches(order_of(cfg))
                         for hook in shortcut_hooks(block_hook_name(i, key), order_of(cfg))])


def gradient_bytes(cfg, tokens: int) -> int:
    """About what one run holds: the logits with their softmax and gradient, every
    block's activations kept for the backward pass (the attention scores among them),
    and a gradient for each block parameter."""
    from ..gpt.sizes import count_parameters

    logits = 3 * tokens * cfg.vocab_size * 4
    activations = tokens * cfg.n_layers * (20 * cfg.emb_dim + 3 * cfg.n_heads * tokens) * 4
    return logits + activations + 2 * count_parameters(cfg).total * 4


def _stop_points(model: BlockModel, should_stop):
    """Stop is asked when each block's forward ends and when the backward pass reaches
    its output (a hook on the output tensor, gone with the graph): one block's work at
    most."""
    def after_block(module, inputs, out):
        check(should_stop)
        if out.requires_grad:
            out.register_hook(lambda grad: check(should_stop))

    return hooks(model, [(block_module_name(i), after_block) for i in range(model.cfg.n_layers)])


def _starts_the_gradient(module, inputs, out):
    """The gradient starts at the embeddings' output, whatever the parameters need."""
    if not out.requires_grad:
        out.requires_grad_(True)


def _one_run(model: BlockModel, ids: torch.Tensor, names: list[str], shortcut: bool,
             norms_kept: bool, should_stop=None) -> GradientRun:
    outputs: dict[str, torch.Tensor] = {}
    with ExitStack() as stack:
        if should_stop is not None:
            stack.enter_context(_stop_points(model, should_stop))
        if not shortcut:  # first: the hooks below then see the adds without their shortcut
            stack.enter_context(without_shortcuts(model))
        if not norms_kept:
            stack.enter_context(without_block_norms(model))
        keep = [(name, lambda m, inp, out, n=name: outputs.__setitem__(n, out)) for name in names]
        stack.enter_context(hooks(model, keep + [(embeddings(model.cfg), _starts_the_gradient)]))
        with torch.enable_grad():
            logits = model(ids)  # (1, T, vocab)
            loss = F.cross_entropy(logits[0, :-1].float(), ids[0, 1:])
            kept = [n for n in names if outputs.get(n) is not None and outputs[n].requires_grad]
            params = [list(block.parameters()) for block in model.trf_blocks]
            flat = [p for group in params for p in group]
            grads = torch.autograd.grad(loss, [outputs[n] for n in kept] + flat, allow_unused=True)
    grad_norms = {n: _norm(g) for n, g in zip(kept, grads)}
    rest, blocks = list(grads[len(kept):]), []
    for group in params:
        mine, rest = rest[:len(group)], rest[len(group):]
        blocks.append(sum(_norm(g) ** 2 for g in mine) ** 0.5)
    cfg = model.cfg
    stream = [embeddings(cfg)] + [block_hook_name(i, block_output(order_of(cfg)))
                             for i in range(cfg.n_layers)]
    return GradientRun(shortcut, norms_kept, float(loss.detach()), grad_norms,
                       tuple(grad_norms.get(n, 0.0) for n in stream), tuple(blocks))


def _norm(g: torch.Tensor | None) -> float:
    return float(g.float().norm()) if g is not None else 0.0


def gradient_report(model: BlockModel, ids: list[int], without: bool = True,
                    should_stop=None, progress=None, norms: bool = True) -> GradientReport:
    """Gradient norms at every node for the prompt ``ids`` (at least 2 tokens), with the
    shortcuts, and (``without``) with every shortcut removed; ``norms=False`` runs both
    with the blocks' LayerNorms passing their input through (the book's plain network)."""
    if len(ids) < 2:
        raise ValueError("the gradient needs a prompt of at least 2 tokens: each token's "
                         "loss is how well it predicts the next one")
    if len(ids) > model.cfg.context_length:
        raise ValueError(f"the prompt has {len(ids)} tokens; this model's context is "
                         f"{model.cfg.context_length}")
    device = next(model.parameters()).device
    check_memory(gradient_bytes(model.cfg, len(ids)), device,
                 f"computing the gradients of a {len(ids):,}-token prompt")
    tokens = torch.tensor([ids], device=device)
    names = [n for n in all_hook_names(model.cfg, include_pattern=False)
             if n not in (TOKEN_EMBEDDING, POSITION_EMBEDDING, EMBEDDING_SUM)]
    runs = []
    for i, shortcut in enumerate((True, False) if without else (True,)):
        if should_stop is not None and should_stop():
            raise Cancelled("stopped")
        if progress is not None:
            progress(i, 2 if without else 1)
        runs.append(_one_run(model, tokens, names, shortcut, norms, should_stop))
    position = model.cfg.norm_position
    norm = ("DyT" if position is NormPosition.DYT
            else "LayerNorm" if model.cfg.family.centred_norm else "RMSNorm")
    return GradientReport(len(ids), tuple(runs), norm, f"{position.title}, {position.formula}")


def per_layer(run: GradientRun, key: str, n_layers: int) -> list[float]:
    """One node's gradient norm in every block (``key`` a block node's key)."""
    return [run.norms.get(block_hook_name(i, key), 0.0) for i in range(n_layers)]


def describe(report: GradientReport, n_layers: int) -> list[str]:
    """Lines for the CLI and the view: the loss and the gradient along the stream."""
    lines = []
    for run in report.runs:
        label = ("with shortcuts" if run.shortcut else "shortcuts removed") + \
            ("" if run.norms_kept else f", blocks' {report.norm}s removed")
        lines.append(f"{label}: loss {run.loss:.4g}; block parameters' gradient norm: first "
                     f"block {run.blocks[0]:.3g}, last {run.blocks[-1]:.3g}; along the residual "
                     f"stream: embeddings {run.residual[0]:.3g}, last block's output "
                     f"{run.residual[-1]:.3g}")
    ratio = report.ratio()
    if ratio is not None:
        lines.append(f"first block's gradient norm, with / without shortcuts: {ratio:.3g}" +
                     (" (without them it reaches 0: below what float32 can hold)"
                      if math.isinf(ratio) else ""))
        with_, without = (r.blocks[0] / max(r.blocks[-1], 1e-30) for r in report.runs)
        if without < with_ / 10:
            lines.append(f"Without the shortcuts the gradient fades on its way down: the first "
                         f"block gets {without:.3g}× the last block's, against {with_:.3g}× with "
                         "them. That is what the shortcuts are for.")
        elif report.runs[0].norms_kept:
            lines.append(f"The first block gets {with_:.3g}× the last block's gradient with the "
                         f"shortcuts and {without:.3g}× without: here it does not fade, because "
                         f"the blocks' {report.norm}s ({report.placement}) rescale what flows "
                         f"back. Remove them too to see the book's plain deep network lose it.")
        else:
            lines.append(f"The first block gets {with_:.3g}× the last block's gradient with the "
                         f"shortcuts and {without:.3g}× without.")
    return lines

