"""Numbers behind the explanatory plots: GELU curves and where real GELU inputs fall,
statistics of every node across layers, and the logit lens. Qt-free; the views only
draw what these return."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import numpy.ma  # noqa: F401 (numpy loads it at the first quantile: 20 ms, then on the GUI thread)
import torch

from ..gpt.layers import gelu_tanh_formula
from ..gpt.block_model import BlockModel
from ..gpt.nodes import Kind, block_hook_name, block_nodes, residual_nodes
from ..gpt.tokenizer import tokenizer_of

GELU_DIP_X = -0.7518  # where exact GELU has its minimum (about -0.17)
SILU_DIP_X = -1.2785  # where SiLU has its minimum (about -0.28)
SHUT = 0.05  # a SiLU gate whose output is within this of 0 lets (almost) nothing through


@dataclass(frozen=True)
class GeluCurves:
    x: np.ndarray
    tanh: np.ndarray  # the model's GELU (tanh approximation)
    exact: np.ndarray  # x * Phi(x)
    relu: np.ndarray
    d_tanh: np.ndarray  # derivatives
    d_exact: np.ndarray
    d_relu: np.ndarray
    max_gap: float  # largest |tanh - exact| over x
    max_gap_at: float


def gelu_curves(lo: float = -4.0, hi: float = 4.0, points: int = 801) -> GeluCurves:
    x = torch.linspace(lo, hi, points, dtype=torch.float64, requires_grad=True)
    curves = {"tanh": gelu_tanh_formula(x),  # the book's formula, as the model computes it
              "exact": x * 0.5 * (1.0 + torch.erf(x / math.sqrt(2.0))),
              "relu": torch.clamp(x, min=0.0)}
    grads = {k: torch.autograd.grad(v.sum(), x)[0] for k, v in curves.items()}
    gap = (curves["tanh"] - curves["exact"]).abs()
    i = int(gap.argmax())
    return GeluCurves(
        x=x.detach().numpy(), tanh=curves["tanh"].detach().numpy(),
        exact=curves["exact"].detach().numpy(), relu=curves["relu"].detach().numpy(),
        d_tanh=grads["tanh"].numpy(), d_exact=grads["exact"].numpy(), d_relu=grads["relu"].numpy(),
        max_gap=float(gap[i].detach()), max_gap_at=float(x[i].detach()))


@dataclass(frozen=True)
class GeluInputShares:
    count: int
    negative: float  # x < 0: GELU output in (-0.17, 0]
    dip: float  # |x - (-0.75)| < 0.5: around GELU's minimum
    identity: float  # x > 3: GELU(x) ~ x
    shut: float = 0.0  # SiLU gates only: |SiLU(x)| < SHUT, the gate nearly closed


def gelu_input_shares(values: np.ndarray) -> GeluInputShares:
    """Shares of the GELU's inputs in its three regimes. Counts in the values' own
    precision without copies where it can: the GUI thread calls this for 3 million
    values (a 1024-token prompt of gpt2-small)."""
    v = np.asarray(values).reshape(-1)
    if v.dtype.kind != "f":
        v = v.astype(np.float64)
    if not np.isfinite(v.sum(dtype=np.float64)):  # rare: leave NaN and Inf out
        v = v[np.isfinite(v)]
    n = max(v.size, 1)
    dip = np.count_nonzero(np.abs(v - v.dtype.type(GELU_DIP_X)) < 0.5)
    return GeluInputShares(count=int(v.size), negative=float(np.count_nonzero(v < 0) / n),
                           dip=float(dip / n), identity=float(np.count_nonzero(v > 3) / n))


def silu_curve(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """SiLU, x·σ(x), and its derivative σ(x)·(1 + x·(1 − σ(x)))."""
    s = 1.0 / (1.0 + np.exp(-x))
    return x * s, s * (1 + x * (1 - s))


def silu_input_shares(values: np.ndarray) -> GeluInputShares:
    """A SiLU gate's inputs (fc1's values) in its regimes: negative (SiLU between −0.28
    and 0), around its dip at −1.28, above 3 (SiLU ≈ x), and the gates nearly shut."""
    v = np.asarray(values, dtype=np.float64).reshape(-1)
    v = v[np.isfinite(v)]
    n = max(v.size, 1)
    silu, _ = silu_curve(v)
    return GeluInputShares(count=int(v.size), negative=float(np.count_nonzero(v < 0) / n),
                           dip=float(np.count_nonzero(np.abs(v - SILU_DIP_X) < 0.5) / n),
                           identity=float(np.count_nonzero(v > 3) / n),
                           shut=float(np.count_nonzero(np.abs(silu) < SHUT) / n))


def layer_table(views: dict, n_layers: int, norm_position: str, stat: str) -> tuple[list[str], np.ndarray]:
    """A nodes x layers matrix of one statistic (NaN where a node was not captured);
    rows are the block's node keys in forward order (patterns left out)."""
    keys = [n.key for n in block_nodes(norm_position) if n.kind != Kind.PATTERN]
    table = np.full((len(keys), n_layers), np.nan)
    for r, key in enumerate(keys):
        for layer in range(n_layers):
            view = views.get(block_hook_name(layer, key))
            if view is not None:
                table[r, layer] = getattr(view.stats, stat)
    return keys, table


def residual_profile(views: dict, n_layers: int, norm_position: str) -> tuple[list[str], np.ndarray]:
    """The residual stream's std after each add (and norm, for Post-LN), layer by layer,
    as points in forward order with their hook names."""
    keys = residual_nodes(norm_position)
    names, values = [], []
    for layer in range(n_layers):
        for key in keys:
            name = block_hook_name(layer, key)
            if name in views:
                names.append(name)
                values.append(views[name].stats.std)
    return names, np.asarray(values, dtype=float)


@dataclass(frozen=True)
class LensRow:
    name: str  # the residual-stream node read (after each half of a block)
    top_ids: tuple[int, ...]
    top_pieces: tuple[str, ...]
    top_probs: tuple[float, ...]


def logit_lens(model: BlockModel, residuals: dict[str, torch.Tensor | np.ndarray], position: int,
               k: int = 5) -> list[LensRow]:
    """Apply the final norm and the output head to the residual stream after each add
    (the tensors or a pass's arrays in ``residuals``, shape (1, T, C)) at one position:
    what the model would predict if it stopped there."""
    names = list(residuals)
    if not names:
        return []
    device = next(model.parameters()).device
    dtype = next(model.parameters()).dtype
    with torch.inference_mode():
        stack = torch.stack([torch.as_tensor(residuals[n][0, position]) for n in names]
                            ).to(device, dtype)  # (R, C)
        logits = model.out_head(model.final_norm(stack))
        probs = torch.softmax(logits.float(), dim=-1)
        top = torch.topk(probs, k, dim=-1)
    rows = []
    for name, ids, ps in zip(names, top.indices.tolist(), top.values.tolist()):
        rows.append(LensRow(name, tuple(ids), tuple(tokenizer_of(model).token_piece(i) for i in ids),
                            tuple(ps)))
    return rows


def lens_nodes(n_layers: int, norm_position: str = "pre") -> list[str]:
    """The residual stream after each half of every block, in forward order."""
    return [block_hook_name(layer, key) for layer in range(n_layers)
            for key in residual_nodes(norm_position)]


@dataclass(frozen=True)
class ValueHistogram:
    """Counts of values on 100 equal bins from ``lo`` to ``hi``, with those outside
    counted apart. ``fixed``: the node kind's fixed range (comparable across prompts,
    layers and steps); otherwise the range that holds this tensor's values."""

    edges: np.ndarray
    counts: np.ndarray
    below: int
    above: int
    fixed: bool

    @property
    def lo(self) -> float:
        return float(self.edges[0])

    @property
    def hi(self) -> float:
        return float(self.edges[-1])


SAMPLE_FOR_RANGE = 1 << 16  # values a range is read from (a strided sample of larger tensors)
CHUNK = 1 << 18  # values counted at a time: the scratch stays in cache, nothing big is allocated


def bucket_counts(flat: np.ndarray, lo: float, hi: float, bins: int) -> np.ndarray:
    """Counts of ``flat`` (float32, finite) in ``bins + 2`` buckets: below ``lo``, the
    bins, above ``hi``. One byte per value, counted with bincount, chunk by chunk
    (~5 ms for 3 million values, and no 12 MB scratch whose first touch costs more)."""
    counts = np.zeros(bins + 2, dtype=np.int64)
    scratch = np.empty(min(CHUNK, flat.size), dtype=np.float32)
    codes = np.empty(scratch.size, dtype=np.uint8)
    offset, scale = np.float32(lo), np.float32(bins / (hi - lo))
    for start in range(0, flat.size, CHUNK):
        part = flat[start:start + CHUNK]
        b, c = scratch[:part.size], codes[:part.size]
        np.subtract(part, offset, out=b)
        b *= scale
        b += 1
        np.clip(b, 0, bins + 1, out=b)
        np.copyto(c, b, casting="unsafe")
        counts += np.bincount(c, minlength=bins + 2)
    return counts


def data_histogram(values: np.ndarray, bins: int = 100, share: float = 0.995,
                   finite: bool = True) -> ValueHistogram:
    """The range that holds ``share`` of the values (quantiles of at most 65,536 evenly
    spread values), widened to include 0 when it is close, and exact counts of all values
    on it — ~7 ms for 3 million values. ``finite``: the caller
    knows there is no NaN or infinity (else they are left out first)."""
    flat = np.asarray(values, dtype=np.float32).reshape(-1)
    if not finite:
        flat = flat[np.isfinite(flat)]
    if flat.size == 0:
        return ValueHistogram(np.linspace(-1.0, 1.0, bins + 1), np.zeros(bins, np.int64), 0, 0, False)
    sample = flat[:: max(1, flat.size // SAMPLE_FOR_RANGE)]
    tail = (1.0 - share) / 2
    lo, hi = (float(v) for v in np.quantile(sample, [tail, 1.0 - tail]))
    if lo > 0 and lo < 0.25 * (hi - lo):  # nearly from zero: show zero as the edge
        lo = 0.0
    if hi < 0 and -hi < 0.25 * (hi - lo):
        hi = 0.0
    if hi <= lo:  # one value (a constant tensor): a small window around it
        pad = max(abs(lo) * 0.05, 1e-6)
        lo, hi = lo - pad, hi + pad
    span = hi - lo
    hi = hi + span * 1e-6  # the largest value belongs to the last bin
    counts = bucket_counts(flat, lo, hi, bins)
    edges = np.linspace(lo, hi, bins + 1)
    return ValueHistogram(edges, counts[1:-1], int(counts[0]), int(counts[-1]), False)


def fixed_histogram(stats) -> ValueHistogram:
    """A node's statistics' fixed-bin histogram as a ValueHistogram."""
    h = stats.hist_range
    return ValueHistogram(np.asarray(h.edges()), np.asarray(stats.hist), int(stats.under),
                          int(stats.over), True)


def branch_ratio(added: np.ndarray, branch: np.ndarray) -> np.ndarray:
    """Per position, ||branch|| / ||shortcut|| for a residual add ``added = branch +
    shortcut`` (the shortcut is recovered as ``added - branch``); shape = shape[:-1]."""
    added = np.asarray(added, dtype=np.float64)
    branch = np.asarray(branch, dtype=np.float64)
    shortcut = np.linalg.norm(added - branch, axis=-1)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.linalg.norm(branch, axis=-1) / shortcut
