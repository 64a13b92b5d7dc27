"""The layer table: one row per block at one position — the residual stream's norm after
each half, the size of each branch and its ratio to the shortcut it is added to, the
attention's mean entropy, the logit lens's top token after the block, and the block's
part of a token's logit (from the attribution). Sortable in the app, a CSV anywhere."""

from __future__ import annotations

import csv
from dataclasses import astuple, dataclass, fields

import numpy as np
import torch

from ..gpt.block_model import BlockModel
from ..gpt.norms import norm_rows
from ..gpt.nodes import FINAL_NORM, LOGITS
from ..gpt.tokenizer import tokenizer_of
from .direct import Attribution
from .reading import Reading


@dataclass(frozen=True)
class LayerRow:
    block: int  # counted from 0, as the window names blocks
    residual_after_attention: float  # |stream| after the first half
    residual_after_ff: float  # after the second: the block's output
    attention_norm: float  # |attention branch|
    ff_norm: float  # |feed-forward branch|
    attention_ratio: float  # |attention branch| / |the shortcut it is added to|
    ff_ratio: float
    entropy: float  # mean over heads of this position's attention entropy, nats
    lens_top: str  # the lens's top token after the block
    lens_top_id: int
    contribution: float  # the block's part of the attributed logit


COLUMNS = ("Block", "|stream| after attention", "|stream| after feed-forward",
           "|attention|", "|feed-forward|", "attention / shortcut", "feed-forward / shortcut",
           "attention entropy (nats)", "lens top token", "lens top id", "part of the logit")


def attention_entropy(query: np.ndarray, keys: np.ndarray) -> float:
    """Mean over heads of the entropy of one query's attention over its keys (the keys
    up to its own position: the causal row)."""
    scores = np.einsum("hd,hkd->hk", query, keys) / np.sqrt(query.shape[-1])
    scores -= scores.max(axis=1, keepdims=True)
    weights = np.exp(scores)
    weights /= weights.sum(axis=1, keepdims=True)
    with np.errstate(divide="ignore", invalid="ignore"):
        terms = np.where(weights > 0, -weights * np.log(weights), 0.0)
    return float(terms.sum(axis=1).mean())


def layer_rows(model: BlockModel, reading: Reading, attribution: Attribution) -> list[LayerRow]:
    head = model.get_parameter(f"{LOGITS}.weight").detach()
    outputs = np.stack([b.residual[1] for b in reading.blocks])  # (L, C)
    normed = norm_rows(model.get_submodule(FINAL_NORM), outputs)
    lens = (head.double().cpu() @ torch.from_numpy(normed).T).numpy()  # (V, L)
    tops = lens[:reading.logits.shape[0]].argmax(axis=0)
    totals = attribution.block_totals()
    tok = tokenizer_of(model)
    rows = []
    for layer, block in enumerate(reading.blocks):
        a, f = np.linalg.norm(block.attention), np.linalg.norm(block.feed_forward)
        first, second = (float(np.linalg.norm(x)) for x in block.residual)
        rows.append(LayerRow(
            layer, first, second, float(a), float(f),
            float(a / max(np.linalg.norm(block.block_input), 1e-12)),
            float(f / max(np.linalg.norm(block.residual[0]), 1e-12)),
            attention_entropy(block.query, block.keys), tok.token_piece(int(tops[layer])),
            int(tops[layer]), float(totals[layer]) if layer < len(totals) else 0.0))
    return rows


def write_csv(rows: list[LayerRow], path) -> None:
    with open(path, "w", newline="", encoding="utf-8") as fh:
        writer = csv.writer(fh)
        writer.writerow([f.name for f in fields(LayerRow)])
        for row in rows:
            writer.writerow([f"{v:.6g}" if isinstance(v, float) else v for v in astuple(row)])
