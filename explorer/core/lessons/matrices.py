"""The weight matrices as objects: for a node that multiplies by a matrix (the attention
projections W_query, W_key, W_value and out_proj, the feed-forward's two Linears, the
token and position embeddings, the output head), its matrix's shape and parameter count,
its Frobenius norm and largest singular values, a heatmap small enough to draw, the
block's other matrices' shapes (to draw them to scale), and what it did to one token
(the input vector and the output vector). Reads the model's parameters, never changes
them; no UI."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import numpy as np
import torch

from ..gpt.block_model import BlockModel
from ..base.cancel import check
from ..gpt.nodes import (FINAL_NORM, HEADS_MIX, KEYS, LOGITS, QUERIES, TOKEN_EMBEDDING, VALUES,
                         Kind, block_hook_name, block_nodes, input_node, model_nodes,
                         node_for_hook, order_of, parse_hook)

SINGULAR = 5  # the largest singular values given
IMAGE_SIDE = 256  # a heatmap's side at most (block means beyond)


def block_matrices(order="pre") -> tuple[str, ...]:
    """The keys of a block's nodes that multiply by a matrix, in the book's order:
    attention's four, then the feed-forward's Linears (two in GPT-2, three in SwiGLU)."""
    return (QUERIES, KEYS, VALUES, HEADS_MIX) + tuple(
        n.key for n in block_nodes(order) if n.kind == Kind.LINEAR)


def model_matrices(order="pre") -> tuple[str, ...]:
    """The tables around the blocks: the embeddings (a learned position table in GPT-2)
    and the output head."""
    before, _ = model_nodes(order)
    return tuple(n.key for n in before if n.kind == Kind.EMBEDDING) + (LOGITS,)


def has_matrix(name: str, order="pre") -> bool:
    """Whether the node ``name`` (a hook name) multiplies by a weight matrix (an embedding
    looks a row up: the same as multiplying a one-hot vector by it)."""
    layer, key = parse_hook(name)
    return key in (model_matrices(order) if layer is None else block_matrices(order))


@dataclass(frozen=True)
class Matrix:
    node: str  # the hook name of the node whose module holds it
    parameter: str  # its name in the state dict
    shape: tuple[int, int]  # as stored: (out, in) for a Linear, (rows, emb) for a table
    parameters: int  # the weight's, plus the bias's when there is one
    bias: bool
    frobenius: float
    singular: tuple[float, ...]  # the largest, largest first
    image: np.ndarray  # (≤ IMAGE_SIDE, ≤ IMAGE_SIDE) float32 block means of the matrix
    cell: tuple[int, int]  # the rows and columns each image cell averages
    others: dict  # the block's (or the model's) matrices: node key -> stored shape
    tied: bool  # the output head is the token embedding's matrix
    x: np.ndarray | None = None  # what it multiplied for the token (a one-hot's index: None)
    y: np.ndarray | None = None  # what came out for it
    note: str = ""


def _module(model: BlockModel, name: str):
    return model.get_submodule(name)


def singular_values(w: torch.Tensor, k: int = SINGULAR) -> tuple[float, ...]:
    """The ``k`` largest singular values of ``w``: from the Gram matrix of its smaller
    side in float64 (a 50,257 × 768 table takes one 768 × 768 eigenproblem)."""
    w = w.detach().to("cpu", torch.float32)
    small = w if w.shape[0] <= w.shape[1] else w.T  # (small, large)
    gram = (small @ small.T).double()
    eig = torch.linalg.eigvalsh(gram).clamp_min(0).sqrt()  # ascending
    return tuple(float(v) for v in eig.flip(0)[:k])


def block_means(w: np.ndarray, side: int = IMAGE_SIDE) -> tuple[np.ndarray, tuple[int, int]]:
    """``w`` shrunk to at most side × side cells, each the mean of its block of values."""
    rows, cols = w.shape
    fr, fc = -(-rows // side), -(-cols // side)
    pr, pc = -(-rows // fr) * fr, -(-cols // fc) * fc
    padded = np.full((pr, pc), np.nan, dtype=np.float32)
    padded[:rows, :cols] = w
    cells = padded.reshape(pr // fr, fr, pc // fc, fc)
    return np.nanmean(cells, axis=(1, 3)).astype(np.float32), (fr, fc)


def describe(model: BlockModel, name: str, views: dict | None = None, pos: int = -1,
             should_stop=None, known: Matrix | None = None) -> Matrix:
    """``name``'s matrix; with a pass's ``views``, also what it did at position ``pos``.
    ``known``: this matrix described before (the same model's): only what it did to the
    token is computed again (the singular values of a 50,257-row table take ~2 s)."""
    if known is not None and known.node == name:
        x, y, note = _applied(model, name, parse_hook(name)[1], views, pos)
        return dataclasses.replace(known, x=x, y=y, note=note)
    if not has_matrix(name, order_of(model.cfg)):
        raise ValueError(f"{name} multiplies by no weight matrix: choose a Linear (the "
                         "attention projections, out_proj, the feed-forward's Linears), an "
                         "embedding or the output head")
    layer, key = parse_hook(name)
    module = _module(model, name)
    w = module.weight.detach()
    bias = getattr(module, "bias", None)
    params = w.numel() + (bias.numel() if bias is not None else 0)
    order = order_of(model.cfg)
    keys = model_matrices(order) if layer is None else block_matrices(order)
    others = {k: tuple(_module(model, k if layer is None else block_hook_name(layer, k)).weight.shape)
              for k in keys}
    image, cell = block_means(w.to("cpu", torch.float32).numpy())
    check(should_stop)
    tied = model.out_head.weight.data_ptr() == model.tok_emb.weight.data_ptr()
    x, y, note = _applied(model, name, key, views, pos)
    return Matrix(name, f"{name}.weight", tuple(w.shape), params, bias is not None,
                  float(torch.linalg.matrix_norm(w.float())), singular_values(w), image, cell,
                  others, tied, x, y, note)


def _applied(model, name: str, key: str, views: dict | None, pos: int):
    """(input vector, output vector, a line) for the token at ``pos`` of the pass."""
    if not views or name not in views or views[name].array is None:
        return None, None, ""
    out = np.asarray(views[name].array, dtype=np.float32)
    if out.ndim == 2:  # the position embedding: (T, C)
        row = pos % out.shape[0]
        return None, out[row], f"row {row} of the table: a lookup, the position's one-hot times it"
    y = out.reshape(-1, out.shape[-1])[pos]
    if key == TOKEN_EMBEDDING:
        return None, y, "the row of the token's id: a lookup, the id's one-hot times the table"
    source = FINAL_NORM if key == LOGITS else input_node(name, order_of(model.cfg))
    if source not in views or views[source].array is None:
        return None, y, ""
    x = np.asarray(views[source].array, dtype=np.float32).reshape(-1, views[source].shape[-1])[pos]
    plus = " + b" if getattr(_module(model, name), "bias", None) is not None else ""
    return x, y, (f"y = x · Wᵀ{plus}, x the output of "
                  f"{node_for_hook(source, order_of(model.cfg)).label} ({source})")
