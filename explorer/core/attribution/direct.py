"""Direct logit attribution: why a token gets its logit at one position.

Pre-LN (GPT-2): the final norm's input is exactly the sum of the embeddings and every
block's attention and feed-forward branches. With the final norm's scale for this
position held fixed (its 1/σ: the standard linearisation), the logit of a token — or
the difference between two tokens' logits — is a sum of one term per branch,
``(γ ⊙ u / σ − mean) · branch``, plus the norm's shift ``u · β`` (u: the token's row of
the output head). The terms add up to the model's logit. Each attention branch splits
further by head (its slice of ``out_proj``) and its bias; each feed-forward branch by
neuron (the GELU's output times the neuron's column of Linear 2) and its bias.

The parallel block's stream is such a sum too. Post-LN: a norm follows every add, so no
such sum exists; with a norm inside each branch (OLMo's, Peri-LN) a branch is no sum of
heads and neurons; DyT's final tanh has no fixed scale. What is given for those instead
is the change of the logit lens (final norm and head applied to the stream) across each
half of each block: the changes add up to the logit too, but they are not contributions;
no head or neuron split is given.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

import numpy as np

from ..gpt.block_model import BlockModel
from ..gpt.norms import DyT, norm_rows
from ..gpt.nodes import (FINAL_NORM, FIRST_ADD, HEADS_MIX, LOGITS,
                         SECOND_ADD, TOKEN_EMBEDDING, block_hook_name,
                         block_title, embeddings, order_of, residual_branches, residual_nodes,
                         role, Role)
from .reading import Reading
from ..gpt.config import NormPosition

EXACT_NOTE = ("Direct attribution: the final norm's scale at this position held fixed (the "
              "standard linearisation), each part is its branch's share of the logit; the "
              "parts and the norm's shift add up to the logit.")
RMS_NOTE = ("Direct attribution: the final RMSNorm's scale at this position held fixed (the "
            "standard linearisation), each part is its branch's share of the logit; RMSNorm "
            "takes no mean out and adds no shift, so the parts alone add up to the logit.")
LENS_CHANGES = ("Shown instead: how the logit lens's value of the token changes across each "
                "half of each block. The changes add up to the logit but are not "
                "contributions, and no head or neuron split is given.")
POST_LN_NOTE = "Post-LN: a norm follows every add, so the logit is not a sum of the branches. " \
    + LENS_CHANGES
IN_BRANCH_NOTE = ("{title}: each branch ends in a norm, so what a branch adds is not a sum of "
                  "its heads' or its neurons' parts. " + LENS_CHANGES)
DYT_NOTE = ("DyT: the final norm's place is taken by tanh, value by value, which no fixed "
            "scale linearises, so the logit is not a sum of the branches. " + LENS_CHANGES)


def lens_note(position: NormPosition, final_norm) -> str | None:
    """Why a model's logit is given as lens changes rather than direct contributions, or
    None where the final norm's input is the sum of branches that are their sublayers'
    own outputs (Pre-LN, the parallel block) and the final norm a linearisable norm."""
    if isinstance(final_norm, DyT):
        return DYT_NOTE
    if position == NormPosition.POST:
        return POST_LN_NOTE
    if position in (NormPosition.BRANCH, NormPosition.PERI):
        return IN_BRANCH_NOTE.format(title=position.title)
    return None


class Branch(StrEnum):
    """What part of the model a share of a logit comes from (a ``Part`` of an attribution,
    an edge of the contribution graph); the word is what labels say."""
    EMBEDDING = "embedding"
    ATTENTION = "attention"
    HEAD = "head"  # one attention head (the contribution graph's edges)
    FEED_FORWARD = "feed-forward"
    SHIFT = "shift"  # the final LayerNorm's shift


class Split(StrEnum):
    """What an attribution's feed-forward terms are: one a neuron (a dense feed-forward),
    or one an expert (a mixture's)."""
    NEURON = "neuron"
    EXPERT = "expert"


@dataclass(frozen=True)
class Part:
    label: str  # "Block 2 of 12 attention"
    kind: Branch
    layer: int | None
    node: str | None  # the node to select for it
    value: float


@dataclass(frozen=True)
class Attribution:
    position: int
    target: int
    versus: int | None  # None: the target's logit; else the target's minus this one's
    logit: float  # the model's own value of it
    exact: bool  # Pre-LN: the parts are contributions; Post-LN: lens changes
    parts: tuple[Part, ...]  # in forward order; their sum is the logit
    heads: np.ndarray | None = None  # (layers, heads)
    attention_bias: np.ndarray | None = None  # (layers,)
    neurons: np.ndarray | None = None  # (layers, hidden)
    ff_bias: np.ndarray | None = None  # (layers,)
    scale: float = 1.0  # the final norm's σ at this position
    lens_note: str = POST_LN_NOTE  # why lens changes, not contributions (when not exact)
    split: Split = Split.NEURON  # what ``neurons`` splits the feed-forward by

    @property
    def note(self) -> str:
        if not self.exact:
            return self.lens_note
        return EXACT_NOTE if any(p.kind == Branch.SHIFT for p in self.parts) else RMS_NOTE

    @property
    def total(self) -> float:
        return float(sum(p.value for p in self.parts))

    def block_totals(self) -> np.ndarray:
        n = max((p.layer for p in self.parts if p.layer is not None), default=-1) + 1
        out = np.zeros(n)
        for p in self.parts:
            if p.layer is not None:
                out[p.layer] += p.value
        return out

    def top_heads(self, k: int = 10) -> list[tuple[int, int, float]]:
        """(layer, head, value), the largest in size first."""
        return _top(self.heads, k)

    def top_neurons(self, k: int = 10) -> list[tuple[int, int, float]]:
        top = _top(self.neurons, k)  # an expert the token was not routed to is no part
        return [t for t in top if t[2] != 0] if self.split is Split.EXPERT else top


def _top(values: np.ndarray | None, k: int) -> list[tuple[int, int, float]]:
    if values is None or values.size == 0:
        return []
    flat = np.argsort(-np.abs(values), axis=None, kind="stable")[:k]
    return [(int(i // values.shape[1]), int(i % values.shape[1]), float(values.flat[i]))
            for i in flat]


def _weights(model: BlockModel, name: str) -> np.ndarray:
    return model.get_parameter(name).detach().double().cpu().numpy()


def direction(model: BlockModel, target: int, versus: int | None) -> np.ndarray:
    """The output head's row of the target, less the row of ``versus``."""
    head = model.get_parameter(f"{LOGITS}.weight")
    u = head[target].detach().double().cpu().numpy()
    if versus is not None:
        u = u - head[versus].detach().double().cpu().numpy()
    return u


def attribute(model: BlockModel, reading: Reading, target: int,
              versus: int | None = None) -> Attribution:
    """The attribution of ``target``'s logit (or its difference to ``versus``'s) at the
    reading's position."""
    vocab = reading.logits.shape[0]
    for token in (target, versus):
        if token is not None and not 0 <= token < vocab:
            raise ValueError(f"token id {token} is outside the vocabulary of {vocab:,}")
    if target == versus:
        raise ValueError("a token against itself: choose two different tokens")
    u = direction(model, target, versus)
    logit = float(reading.logits[target] - (reading.logits[versus] if versus is not None else 0))
    final_norm = model.get_submodule(FINAL_NORM)
    why_lens = lens_note(reading.norm_position.position, final_norm)
    if why_lens is not None:
        return _lens_changes(reading, target, versus, logit, u, final_norm, why_lens)
    rms = not model.cfg.family.centred_norm  # RMSNorm: no centring, no shift
    gamma = (final_norm.gain() if rms else final_norm.scale).detach().double().cpu().numpy()
    beta = np.zeros_like(gamma) if rms else _weights(model, f"{FINAL_NORM}.shift")
    eps = final_norm.eps
    r = reading.final_input
    sigma = float(np.sqrt((r ** 2).mean() + eps)) if rms else float(np.sqrt(r.var() + eps))
    w = gamma * u / sigma
    if not rms:
        w = w - w.mean()  # the norm's centring, moved onto the direction
    parts = [Part("Token embedding", Branch.EMBEDDING, None, TOKEN_EMBEDDING,
                  float(w @ reading.token_embedding))]
    order = order_of(model.cfg)
    position = role(order, Role.POSITION_EMBEDDING)
    if position is not None:  # a learned position embedding (RoPE adds none to the stream)
        parts.append(Part("Position embedding", Branch.EMBEDDING, None, position,
                          float(w @ reading.position_embedding)))
    heads, att_bias, neurons, ff_bias = [], [], [], []
    branches = residual_branches(order)
    n = len(reading.blocks)
    for layer, block in enumerate(reading.blocks):
        title = block_title(layer, n)
        mix = block_hook_name(layer, HEADS_MIX)
        per_dim = _weights(model, f"{mix}.weight").T @ w  # (C,): each context value's share
        heads.append((per_dim * block.context).reshape(model.cfg.n_heads, -1).sum(axis=1))
        att_bias.append(_bias_part(model, mix, w))
        last = role(order, Role.LAST_LINEAR)  # None: experts, not one layer of neurons
        linear2 = block_hook_name(layer, last) if last else None
        neurons.append(block.gelu * (_weights(model, f"{linear2}.weight").T @ w) if last
                       else _expert_parts(model, layer, block, w))
        ff_bias.append(_bias_part(model, linear2, w) if last else 0.0)
        parts += [Part(f"{title} attention", Branch.ATTENTION, layer,
                       block_hook_name(layer, branches[FIRST_ADD]), float(w @ block.attention)),
                  Part(f"{title} feed-forward", Branch.FEED_FORWARD, layer,
                       block_hook_name(layer, branches[SECOND_ADD]), float(w @ block.feed_forward))]
    if not rms:
        parts.append(Part("Final norm's shift", Branch.SHIFT, None, FINAL_NORM, float(u @ beta)))
    return Attribution(reading.position, target, versus, logit, True, tuple(parts),
                       np.array(heads), np.array(att_bias), np.array(neurons),
                       np.array(ff_bias), sigma,
                       split=Split.EXPERT if reading.blocks and reading.blocks[0].experts
                       else Split.NEURON)


def _expert_parts(model, layer: int, block, w: np.ndarray) -> np.ndarray:
    """A mixture's feed-forward split by expert, along the direction ``w``: each expert's
    weight × its SwiGLU output on the token's input (0 for the experts the token was not
    routed to); they add up to the feed-forward's part. No experts: an empty row."""
    if block.experts is None:
        return np.zeros(0)
    x, weights = block.experts
    ff = model.trf_blocks[layer].ff
    parts = np.zeros(weights.shape[0])

    def matrix(linear) -> np.ndarray:
        return linear.weight.detach().double().cpu().numpy()
    for e in np.flatnonzero(weights):
        gate, up = matrix(ff.fc1[e]) @ x, matrix(ff.fc2[e]) @ x
        out = matrix(ff.fc3[e]) @ (gate / (1 + np.exp(-gate)) * up)
        parts[e] = weights[e] * float(w @ out)
    return parts


def _bias_part(model, linear: str, w: np.ndarray) -> float:
    """What a Linear's bias adds along the direction (0 for a Linear without one)."""
    bias = model.get_submodule(linear).bias
    return 0.0 if bias is None else float(w @ bias.detach().double().cpu().numpy())


def _lens_changes(reading: Reading, target: int, versus: int | None, logit: float,
                  u: np.ndarray, final_norm, note: str) -> Attribution:
    def lens(x: np.ndarray) -> float:  # the final norm and the head's direction applied
        return float(u @ norm_rows(final_norm, x))

    before = lens(reading.embeddings)
    parts = [Part("Embeddings (read by the lens)", Branch.EMBEDDING, None,
                  embeddings(reading.norm_position), before)]
    n = len(reading.blocks)
    names = residual_nodes(reading.norm_position)
    for layer, block in enumerate(reading.blocks):
        for half, kind, name in zip(block.residual, (Branch.ATTENTION, Branch.FEED_FORWARD), names):
            now = lens(half)
            parts.append(Part(f"{block_title(layer, n)} {kind} half (lens change)", kind, layer,
                              block_hook_name(layer, name), now - before))
            before = now
    return Attribution(reading.position, target, versus, logit, False, tuple(parts),
                       lens_note=note)
