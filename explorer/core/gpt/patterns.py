"""The attention pattern where it is materialised: which keys each query may see (the
causal mask, and a sliding layer's window), and the softmax of the scores and its product
with the values computed a chunk of query rows at a time, only up to each chunk's last
allowed key."""

from __future__ import annotations

import math

import torch


PATTERN_ROWS = 64  # query rows per chunk of a materialised attention pattern


def allowed_keys(t: int, t_k: int, device, window: int | None = None) -> torch.Tensor:
    """(T, T_k) True where the last T of T_k positions may look: every key up to its own
    position, or with a sliding ``window`` only the last ``window`` of them (its own
    included), as Gemma 3's and OLMo 3's sliding layers."""
    allowed = torch.ones(t, t_k, dtype=torch.bool, device=device).tril(t_k - t)
    if window is not None:
        allowed &= torch.ones(t, t_k, dtype=torch.bool, device=device).triu(t_k - t - window + 1)
    return allowed


def causal_softmax(q: torch.Tensor, k: torch.Tensor, scale: float | None = None,
                   window: int | None = None) -> torch.Tensor:
    """The attention pattern softmax(q k^T / sqrt(hd)) with the causal mask, (B, H, T,
    T_k), for the last T of T_k positions: as the book computes it, but a chunk of query
    rows at a time and only up to each chunk's last allowed key, so the masked half is
    never computed (it stays exactly 0). About half the time of the full product at
    T=1024 and the same values (dividing by sqrt(64) = 8 and multiplying by 1/8 agree).
    ``scale`` replaces 1/sqrt(hd) (Gemma's 1/sqrt(query_pre_attn_scalar)); a sliding
    ``window`` also masks the keys more than ``window`` - 1 positions back."""
    b, h, t, hd = q.shape
    t_k = k.shape[2]
    weights = q.new_empty(b, h, t, t_k)  # each element written once: softmax or the 0 after
    q = q * (1.0 / math.sqrt(hd) if scale is None else scale)
    tri = torch.ones(PATTERN_ROWS, PATTERN_ROWS, dtype=torch.bool, device=q.device).triu_(1)
    for s in range(0, t, PATTERN_ROWS):
        e = min(t, s + PATTERN_ROWS)
        n, kend = e - s, t_k - t + e  # query s..e-1 sees keys 0..kend-1 at most
        scores = q[:, :, s:e] @ k[:, :, :kend].transpose(2, 3)  # (B, H, n, kend)
        scores[..., kend - n:].masked_fill_(tri[:n, :n], float("-inf"))
        if window is not None:
            scores.masked_fill_(~allowed_keys(n, kend, q.device, window), float("-inf"))
        weights[:, :, s:e, :kend] = torch.softmax(scores, dim=-1)
        weights[:, :, s:e, kend:] = 0.0  # the keys after the chunk's last query
    return weights


def causal_matmul(weights: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    """weights @ v for a causal pattern (B, H, T, T_k): each chunk of query rows only
    with the keys it may see (the rest of its row is 0)."""
    t, t_k = weights.shape[2:]
    parts = []
    for s in range(0, t, PATTERN_ROWS):
        e = min(t, s + PATTERN_ROWS)
        kend = t_k - t + e
        parts.append(weights[:, :, s:e, :kend] @ v[:, :, :kend])
    return torch.cat(parts, dim=2)
