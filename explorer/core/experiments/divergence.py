"""The divergence finder: run two models on the same prompt, compare them node by node in
forward order, and point at the first node where they differ beyond a tolerance, with
the size of the difference at every node after it.

Model B is a checkpoint, another model, or a *mutation* of model A — the seeds'
debugging exercises: remove a shortcut, move the norms (Post-LN), GELU -> ReLU, a second
feed-forward Linear sized 4C -> 1024 (shapes stop matching), LayerNorm with unbiased
variance, a different eps, dropout left on. Qt-free.
"""

from __future__ import annotations

import copy
import math
from dataclasses import dataclass, field
from enum import StrEnum

import numpy as np
import torch
from torch import nn

from .interventions import shortcut_hooks
from ..gpt.mutations import FF_WIDTH, MUTATIONS, Mutation, known
from .ln_compare import post_ln_twin
from ..gpt.hooks import attach, hooks
from ..gpt.layers import LayerNorm
from ..gpt.block_model import BlockModel
from ..gpt.nodes import (FEED_FORWARD, SECOND_NORM, all_hook_names, block_hook_name, block_module_name,
                         order_of, residual_branches, shortcut_sources)
from ..run.batch import Batch
from ..run.passes import Keep, run_prompt
from ..gpt.config import NormPosition

def describe(name: str, cfg=None) -> str:
    """The mutation in words; with the model's config, true of its block (a Post-LN
    block's LayerNorm 2 normalises its output, not what the feed-forward reads)."""
    if name == Mutation.NO_NORM2 and cfg is not None and cfg.norm_position == NormPosition.POST:
        return "LayerNorm 2 removed (the block's output is the second add's sum, not normalised)"
    m = FF_WIDTH.match(name)
    return MUTATIONS.get(name) or f"second feed-forward Linear sized 4*emb -> {m[1]}"


def ff_mutation(cfg) -> str:
    """The inner-size exercise for this model: a width other than its emb_dim (1024,
    or 768 where emb_dim is 1024), so that B's output no longer fits its shortcut."""
    return "ff-1024" if cfg.emb_dim != 1024 else "ff-768"


class _UnbiasedLayerNorm(nn.Module):
    """The book's LayerNorm, but with torch.var's default unbiased estimate."""

    def __init__(self, original) -> None:
        super().__init__()
        self.scale, self.shift, self.eps = original.scale, original.shift, original.eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        mean = x.mean(dim=-1, keepdim=True)
        var = x.var(dim=-1, keepdim=True, unbiased=True)
        return self.scale * (x - mean) / torch.sqrt(var + self.eps) + self.shift


def _has_what_it_changes(model: BlockModel, mutation: str, layer: int) -> None:
    """A norm exercise on a block whose norms sit elsewhere, or are no LayerNorm (DyT):
    said in one line, not made as a change that changes nothing."""
    block, title = model.trf_blocks[layer], model.cfg.norm_position.title
    if mutation == Mutation.NO_NORM2 and not hasattr(block, SECOND_NORM):
        raise ValueError(f"no-norm2 removes LayerNorm 2: this {title} block has no second norm "
                         "(one norm feeds both its sublayers)")
    if mutation in (Mutation.UNBIASED_LN, Mutation.EPS) and not isinstance(block.norm1, LayerNorm):
        raise ValueError(f"{mutation} changes LayerNorm 1: in this {title} block norm1 is a "
                         f"{type(block.norm1).__name__}")


def mutate(model: BlockModel, mutation: str, layer: int = 0, seed: int = 0) -> BlockModel:
    """A deep copy of ``model`` with one change made at block ``layer``."""
    if not known(mutation):
        raise ValueError(f"unknown mutation {mutation!r}; choose one of: {', '.join(MUTATIONS)} "
                         "(ff-N for any width N)")
    if not 0 <= layer < model.cfg.n_layers:
        raise ValueError(f"layer {layer} out of range 0..{model.cfg.n_layers - 1}")
    family = model.cfg.family
    if family.mutations is not None and mutation not in family.mutations:
        raise ValueError(f"{mutation} is one of the book's GPT-2 exercises (chapter 4): a "
                         f"{family.title} block has no {family.words.lacks(mutation)}; on this "
                         f"model try {' or '.join(family.mutations)}, or compare two models")
    if mutation == Mutation.POST_LN:
        if model.cfg.norm_position == NormPosition.POST:
            raise ValueError("post-ln moves the norms after the adds: this model is Post-LN "
                             "already, so B would be A and nothing would differ; choose "
                             "another mutation")
        return post_ln_twin(model)
    _has_what_it_changes(model, mutation, layer)
    b = copy.deepcopy(model)
    b.tie_weights()
    block = b.trf_blocks[layer]
    if mutation == Mutation.NO_SHORTCUT:  # the copy keeps the intervention's hooks for good
        order = order_of(b.cfg)
        attach(b, shortcut_hooks(block_hook_name(layer, next(iter(residual_branches(order)))), order))
    elif mutation == Mutation.RELU:
        block.ff.layers[1] = nn.ReLU()
    elif mutation == Mutation.NO_ACTIVATION:
        block.ff.layers[1] = nn.Identity()
    elif FF_WIDTH.match(mutation):
        cfg = b.cfg
        torch.manual_seed(seed)
        param = next(b.parameters())
        width = int(FF_WIDTH.match(mutation)[1])
        if width < 1:
            raise ValueError("ff-N needs a width N of at least 1")
        block.ff.layers[2] = nn.Linear(cfg.hidden_dim, width).to(param.device, param.dtype)
    elif mutation == Mutation.FF_INNER:
        cfg = b.cfg
        torch.manual_seed(seed)
        param = next(b.parameters())
        block.ff.layers[0] = nn.Linear(cfg.emb_dim, cfg.hidden_dim // 2).to(param.device, param.dtype)
    elif mutation == Mutation.NO_NORM2:
        block.norm2 = nn.Identity()
    elif mutation == Mutation.WRONG_SHORTCUT2:
        attach(b, *_wrong_second_shortcut(layer, order_of(b.cfg)))
    elif mutation == Mutation.UNBIASED_LN:
        block.norm1 = _UnbiasedLayerNorm(block.norm1)
    elif mutation == Mutation.EPS:
        block.norm1.eps = 1e-2
    elif mutation == Mutation.DROPOUT_ON:
        if b.cfg.drop_rate == 0:
            raise ValueError("this model's drop_rate is 0: dropout left on changes nothing")
        torch.manual_seed(seed)
        b.train()
    return b


class Status(StrEnum):
    """How a node of B compares with A's (the words the table prints)."""
    SAME = "same"
    DIFFERS = "differs"
    SHAPES_DIFFER = "shapes differ"
    NOT_REACHED = "not reached in B"


NO_SIZE = (Status.SHAPES_DIFFER, Status.NOT_REACHED)  # no size of a difference to give


@dataclass
class NodeDiff:
    name: str
    shape_a: tuple[int, ...] | None
    shape_b: tuple[int, ...] | None
    max_abs: float  # inf when the shapes differ, nan when a side is missing
    relative: float  # max |a - b| / max |a|

    @property
    def status(self) -> Status:
        if self.shape_b is None:
            return Status.NOT_REACHED
        if self.shape_a != self.shape_b:
            return Status.SHAPES_DIFFER
        return Status.DIFFERS if math.isfinite(self.max_abs) and self.max_abs > 0 else Status.SAME


@dataclass
class Divergence:
    rows: list[NodeDiff]
    tolerance: float
    first: str | None  # the first node beyond the tolerance, or None
    error_b: str | None = None  # the exception model B raised, if any
    notes: list[str] = field(default_factory=list)

    def table(self) -> str:
        lines = [f"{'node':34s} {'shape A':>16s} {'shape B':>16s} {'max |A-B|':>11s} {'relative':>10s}"]
        for r in self.rows:
            mark = "  <- first divergence" if r.name == self.first else ""
            sa = str(r.shape_a) if r.shape_a else "-"
            sb = str(r.shape_b) if r.shape_b else "-"
            if r.status in NO_SIZE:
                lines.append(f"{r.name:34s} {sa:>16s} {sb:>16s} {r.status:>22s}{mark}")
            else:
                lines.append(f"{r.name:34s} {sa:>16s} {sb:>16s} {r.max_abs:11.3g} {r.relative:10.3g}{mark}")
        if self.first is None:
            lines.append(f"no node differs by more than {self.tolerance:g}")
        else:
            lines.append(f"first divergence: {self.headline()}")
        if self.error_b:
            lines.append(f"model B failed: {self.error_b}")
        lines += self.notes
        return "\n".join(lines)

    def headline(self) -> str:
        """The first divergence in words: a shape mismatch says so, with both shapes."""
        row = next((r for r in self.rows if r.name == self.first), None)
        if row is None:
            return str(self.first)
        if row.status == Status.SHAPES_DIFFER:
            return f"{row.name}: shape mismatch, A {row.shape_a} vs B {row.shape_b}"
        return row.name


EVERY_TENSOR = Keep(budget_bytes=1 << 62, attention=False)  # both models, every node in full


def _max_difference(ta: np.ndarray, tb: np.ndarray) -> float:
    """The largest |A - B|, where a NaN or infinity in one and not the same in the other
    is an infinite difference (a NaN is never 'equal')."""
    finite_a, finite_b = np.isfinite(ta), np.isfinite(tb)
    if (finite_a != finite_b).any() or (~finite_a & (ta != tb) & ~(np.isnan(ta) & np.isnan(tb))).any():
        return float("inf")
    both = finite_a & finite_b
    return float(np.abs(ta[both] - tb[both]).max()) if both.any() else 0.0


def find_divergence(a: BlockModel, b: BlockModel, ids: list[int] | Batch, tolerance: float = 1e-4,
                    should_stop=None) -> Divergence:
    """Compare every node of A (in A's forward order) with the same-named node of B, on
    one prompt or a batch (the seeds' exercises use a 2 x 3 batch)."""
    from ..base.validate import real

    real(tolerance, "the tolerance", 0.0)
    run_a = run_prompt(a, ids, EVERY_TENSOR, should_stop, tolerate_errors=True)
    if run_a.error:
        raise ValueError(f"model A failed on the prompt: {run_a.error}")
    run_b = run_prompt(b, ids, EVERY_TENSOR, should_stop, tolerate_errors=True)
    error_b = run_b.error
    rows, first = [], None
    for name in all_hook_names(a.cfg, include_pattern=False):
        va, vb = run_a.views.get(name), run_b.views.get(name)
        ta = va.array if va is not None else None
        tb = vb.array if vb is not None else None
        if ta is None:
            continue
        if tb is None:
            rows.append(NodeDiff(name, tuple(ta.shape), None, float("nan"), float("nan")))
            continue
        if ta.shape != tb.shape:
            diff = NodeDiff(name, tuple(ta.shape), tuple(tb.shape), float("inf"), float("inf"))
        else:
            d = _max_difference(ta, tb)
            scale = float(np.nanmax(np.abs(ta))) if np.isfinite(ta).any() else 1.0
            diff = NodeDiff(name, tuple(ta.shape), tuple(tb.shape), d, d / (scale or 1.0))
        rows.append(diff)
        if first is None and (diff.shape_a != diff.shape_b or diff.max_abs > tolerance):
            first = name
    if first is None and error_b:
        first = next((r.name for r in rows if r.shape_b is None), None)
    return Divergence(rows, tolerance, first, error_b)


def _wrong_second_shortcut(layer: int, order) -> tuple[list, list]:
    """Forward and pre-forward hooks that make the second add carry the block's input
    instead of the first add's output: the seeds' wrong shortcut."""
    seen: dict = {}
    add = list(residual_branches(order))[1]  # the second add
    branch = block_hook_name(layer, residual_branches(order)[add])
    return ([(branch, lambda m, i, o: seen.__setitem__("branch", o)),
             (block_hook_name(layer, add), lambda m, i, o: seen["branch"] + seen["input"])],
            [(block_module_name(layer), lambda m, args: seen.__setitem__("input", args[0]))])


def lesson(mutation: str, b: BlockModel, layer: int, prompt: list[int] | Batch) -> list[str]:
    """What a mutation teaches, shown with this model's numbers (for the exercises that
    have a point to make beyond where the models part)."""
    block = b.trf_blocks[layer]
    if mutation == Mutation.NO_ACTIVATION:
        seen = {}
        watch = (block_hook_name(layer, FEED_FORWARD),
                 lambda m, inp, out: seen.update(x=inp[0].detach(), y=out.detach()))
        batch = prompt if isinstance(prompt, Batch) else Batch((tuple(prompt),), (len(prompt),))
        device = next(b.parameters()).device
        with hooks(b, [watch]), torch.no_grad():
            b(torch.tensor(batch.ids, device=device))
        first, second = block.ff.layers[0], block.ff.layers[2]
        with torch.no_grad():
            w = second.weight.double() @ first.weight.double()  # (C, C): one map
            bias = second.weight.double() @ first.bias.double() + second.bias.double()
            y = seen["x"].double() @ w.T + bias
            err = float((y - seen["y"].double()).abs().max())
        c, h = first.in_features, first.out_features
        return [f"Without GELU, block {layer}'s Linear 2 after Linear 1 is one linear map: "
                f"W2·W1 is {c}×{c} (in place of {h}×{c} and {c}×{h}), and x·(W2·W1)ᵀ + "
                f"(W2·b1 + b2) gives the feed-forward's output here within {err:.2g} "
                "(float32 rounding). Stacked linear layers without a non-linearity add no power."]
    if mutation == Mutation.DROPOUT_ON:
        p = b.cfg.drop_rate
        return [f"B is in training mode: every dropout zeroes a random share {p:g} of its "
                f"values and scales the rest by 1/(1 − {p:g}) = {1 / (1 - p):.3g}. In training "
                "that keeps the model from leaning on single values (against overfitting); "
                "when the model is used it must be off, as in A."]
    if mutation == Mutation.FF_INNER:
        c = b.cfg
        return [f"B's Linear 1 gives {c.hidden_dim // 2} values per token but its Linear 2 "
                f"reads {c.hidden_dim}: the feed-forward's two inner sizes must match "
                f"(emb {c.emb_dim} → hidden → emb), so B stops at Linear 2. Look first where "
                "the second half starts and follow its shapes."]
    if mutation == Mutation.NO_NORM2:
        if b.cfg.norm_position == NormPosition.POST:
            return ["B's block ends at the second add's sum, not normalised (in Post-LN "
                    "LayerNorm 2 comes last): the block's output is the first node to differ."]
        return ["B's feed-forward half reads the first add's output as it is, not normalised: "
                "the first node that differs is where LayerNorm 2 was, and every later one "
                "follows from it."]
    if mutation == Mutation.WRONG_SHORTCUT2:
        return _wrong_shortcut_words(b, layer, prompt)
    if FF_WIDTH.match(mutation):
        width = int(FF_WIDTH.match(mutation)[1])
        if width == b.cfg.emb_dim:
            return [f"B's second feed-forward Linear gives {width} values per token, as many "
                    f"as emb_dim: this width fits the shortcut. Choose another (ff-N) to see "
                    "the mismatch."]
        return [f"B's second feed-forward Linear gives {width} values per token instead of "
                f"{b.cfg.emb_dim}: its output no longer fits the shortcut it is added to."]
    return []


def _wrong_shortcut_words(b: BlockModel, layer: int, prompt: list[int] | Batch) -> list[str]:
    """How far the second add moves, measured: by the first half's output minus the
    block's input — the attention half's contribution in Pre-LN, but not in Post-LN,
    whose first half ends in LayerNorm 1 (it rescales the whole sum)."""
    order = order_of(b.cfg)
    source = shortcut_sources(order)[list(residual_branches(order))[1]]  # add1, or norm1
    seen = {}
    watch = [(block_hook_name(layer, source), lambda m, i, o: seen.__setitem__("half", o.detach())),
             (block_module_name(layer), lambda m, args: seen.__setitem__("input", args[0].detach()))]
    batch = prompt if isinstance(prompt, Batch) else Batch((tuple(prompt),), (len(prompt),))
    with hooks(b, watch[:1], watch[1:]), torch.no_grad():
        b(torch.tensor(batch.ids, device=next(b.parameters()).device))
    gap = float((seen["half"] - seen["input"]).abs().max())
    said = ("B's second add adds the block's input instead of the first half's output: every "
            "node before the second add is the same; the add itself is the first to differ, by ")
    if order.position == NormPosition.POST:
        return [said + f"LayerNorm 1's output minus the block's input — up to {gap:.3g} here. "
                "Not the attention's contribution: in Post-LN the first half ends in LayerNorm "
                "1, which rescales the whole sum."]
    return [said + f"exactly the attention half's contribution (add1 − input) — up to "
            f"{gap:.3g} here."]
