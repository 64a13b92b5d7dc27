"""The KV caches. ``KVCache`` grows with the sequence. ``StaticCache``'s shapes never
change, for a decoding step that can be recorded once and replayed (a CUDA graph): every
layer's keys and values preallocated for ``size`` positions, and the position of the next
token a tensor on the device, moved on by the step itself. The attention of a step reads every position of the cache with the later
ones masked (``allowed_at``), so the step's kernels and their shapes are the same from
one token to the next; its numbers are the growing cache's, to float rounding.

A forward knows a static cache by its position: a (1,) tensor instead of an int."""

from __future__ import annotations

import torch
import torch.nn.functional as F


class LayerKV:
    """Preallocated key/value buffers of one attention layer for incremental decoding."""

    __slots__ = ("k", "v")

    def __init__(self) -> None:
        self.k: torch.Tensor | None = None
        self.v: torch.Tensor | None = None


class KVCache:
    """Keys and values of every layer for the tokens seen so far (in every family: a
    rotary block's keys are kept rotated)."""

    def __init__(self, n_layers: int) -> None:
        self.layers = [LayerKV() for _ in range(n_layers)]
        self.length = 0

    def start(self):
        """Where the next tokens go (a static cache's is a tensor)."""
        return self.length

    def advance(self, t: int) -> None:
        self.length += t


class StaticCache(KVCache):
    """Keys and values of ``size`` positions per layer; ``position`` (1,) on the device is
    where the next token goes, ``length`` the same count on the host."""

    def __init__(self, cache: KVCache, size: int) -> None:
        """The grown ``cache``'s keys and values (its first sequence) copied into buffers of
        ``size`` positions on their device, in their dtype."""
        super().__init__(len(cache.layers))
        n = cache.length
        if not 0 < n < size:
            raise ValueError(f"a static cache of {size} positions cannot continue {n} cached tokens")
        for layer, grown in zip(self.layers, cache.layers):
            for part in ("k", "v"):
                have = getattr(grown, part)  # (B, H, >= n, hd)
                buffer = have.new_zeros((1, have.shape[1], size, have.shape[3]))
                buffer[:, :, :n] = have[:1, :, :n]
                setattr(layer, part, buffer)
        self.length = n
        self.size = size
        self.position = torch.tensor([n], device=self.layers[0].k.device)

    def start(self):
        return self.position

    def growing(self) -> KVCache:
        """The same keys and values as a cache that grows (a run past ``size``)."""
        cache = KVCache(len(self.layers))
        cache.layers, cache.length = self.layers, self.length
        return cache

    def advance(self, t: int) -> None:
        if t != 1:
            raise ValueError("a static cache takes one token a step")
        self.length += 1
        self.position.add_(1)


def static(pos) -> bool:
    """Whether a forward's position is a static cache's (a tensor on the device)."""
    return isinstance(pos, torch.Tensor)


def write(kv, k: torch.Tensor, v: torch.Tensor, pos: torch.Tensor):
    """The step's keys and values (B, H, 1, hd) written at ``pos``; every position of the
    cache, (B, H, size, hd)."""
    kv.k.index_copy_(2, pos, k)
    kv.v.index_copy_(2, pos, v)
    return kv.k, kv.v


def allowed_at(pos: torch.Tensor, t_k: int, window: int | None = None) -> torch.Tensor:
    """(1, T_k) True at the keys the query at ``pos`` may see in a cache of T_k positions:
    those up to its own, and with a sliding ``window`` only the last ``window`` of them."""
    keys = torch.arange(t_k, device=pos.device)
    allowed = keys <= pos
    if window is not None:
        allowed &= keys > pos - window
    return allowed.view(1, t_k)


def watched(*points) -> bool:
    """Whether a forward hook is on any of these modules (hook points)."""
    return any(p._forward_hooks or p._forward_pre_hooks for p in points)


def attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, allowed: torch.Tensor,
              scale: float | None, scores_point, masked_point, weights_point,
              gqa: bool = False) -> torch.Tensor:
    """One query (B, H, 1, hd) over a static cache's keys and values, the positions not
    ``allowed`` masked: the fused kernel, or the book's steps through their hook points
    when one of them is watched (the scores, the masked scores, the pattern)."""
    if not watched(scores_point, masked_point, weights_point):
        extra = {"enable_gqa": True} if gqa else {}
        return F.scaled_dot_product_attention(q, k, v, attn_mask=allowed, scale=scale, **extra)
    scores = scores_point(q @ k.transpose(2, 3))  # (B, H, 1, T_k)
    masked = masked_point(scores.masked_fill(~allowed, -torch.inf))
    scaled = masked / k.shape[-1] ** 0.5 if scale is None else masked * scale
    return weights_point(torch.softmax(scaled, dim=-1)) @ v
