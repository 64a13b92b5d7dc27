"""Attention patterns as images: a large pattern shrunk so that its peaks still show,
and every head's pattern as one image of tiles (one image, not one plot a head)."""

from __future__ import annotations

import numpy as np


def block_max(weights: np.ndarray, factor: int) -> np.ndarray:
    """(T, T) weights shrunk by ``factor`` in both directions, each cell the largest
    weight of its block, so a sharp attention peak still shows in a small image."""
    w = np.asarray(weights, dtype=np.float32)
    if factor <= 1:
        return w
    T = w.shape[-1]
    size = -(-T // factor) * factor
    if size != T:
        padded = np.zeros((size, size), dtype=np.float32)
        padded[:T, :T] = w
        w = padded
    # rows first (a reduction over a middle axis runs along contiguous memory), then
    # strided maxima over the columns (numpy's max over a short last axis is slow)
    rows = w.reshape(size // factor, factor, size).max(axis=1)
    out = rows[:, 0::factor].copy()
    for i in range(1, factor):
        np.maximum(out, rows[:, i::factor], out=out)
    return out


def mosaic(tiles: list[np.ndarray], columns: int, gap: int) -> np.ndarray:
    """Square tiles side by side, ``columns`` per row, ``gap`` NaN cells (drawn
    transparent) between them: one image instead of one plot per head."""
    n = tiles[0].shape[0]
    rows = -(-len(tiles) // columns)
    out = np.full((rows * (n + gap) - gap, columns * (n + gap) - gap), np.nan, dtype=np.float32)
    for i, tile in enumerate(tiles):
        r, c = divmod(i, columns)
        out[r * (n + gap): r * (n + gap) + n, c * (n + gap): c * (n + gap) + n] = tile
    return out
