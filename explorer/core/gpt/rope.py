"""Rotary position embeddings as the bonus chapters compute them: the inverse frequencies
(with Llama 3's scaling), the angles of each position, a head's values turned by them,
and the table of angles a model keeps (``Rotary``), grown as longer sequences come."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import torch

if TYPE_CHECKING:
    from .config import GPTConfig, RopeScaling


def rope_inverse_frequencies(head_dim: int, base: float,
                             scaling: RopeScaling | None = None) -> torch.Tensor:
    """θᵢ = base^(−2i/head_dim) for i < head_dim/2; with Llama 3's scaling, long
    wavelengths (beyond original_context / low_freq_factor) divided by ``factor``, short
    ones (below original_context / high_freq_factor) kept, those between blended."""
    steps = torch.arange(0, head_dim, 2, dtype=torch.int64, device="cpu")  # not meta, ever
    inv_freq = 1.0 / (base ** (steps.float() / head_dim))
    if scaling is None:
        return inv_freq
    low_wavelen = scaling.original_context_length / scaling.low_freq_factor
    high_wavelen = scaling.original_context_length / scaling.high_freq_factor
    wavelen = 2 * math.pi / inv_freq
    scaled = torch.where(wavelen > low_wavelen, inv_freq / scaling.factor, inv_freq)
    smooth = ((scaling.original_context_length / wavelen - scaling.low_freq_factor)
              / (scaling.high_freq_factor - scaling.low_freq_factor))
    blended = (1 - smooth) * scaled / scaling.factor + smooth * scaled
    medium = (wavelen >= high_wavelen) & (wavelen <= low_wavelen)
    return torch.where(medium, blended, scaled)


def rope_angles(inv_freq: torch.Tensor, start: int, stop: int) -> tuple[torch.Tensor, torch.Tensor]:
    """cos and sin of position · θᵢ for positions start..stop-1, each angle twice (for
    the two halves of a head): (stop - start, head_dim), in float32."""
    positions = torch.arange(start, stop, dtype=torch.float32, device=inv_freq.device)
    angles = positions[:, None] * inv_freq[None, :]  # (T, head_dim / 2)
    angles = torch.cat([angles, angles], dim=-1)  # (T, head_dim)
    return torch.cos(angles), torch.sin(angles)


def apply_rope(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """The book's apply_rope: each value i of the first half paired with i + head_dim/2
    and the pair rotated by its angle; x is (b, heads, T, head_dim), cos and sin (T,
    head_dim)."""
    head_dim = x.shape[-1]
    x1 = x[..., : head_dim // 2]  # first half
    x2 = x[..., head_dim // 2:]  # second half
    rotated = torch.cat((-x2, x1), dim=-1)
    x_rotated = (x * cos) + (rotated * sin)  # cos, sin broadcast over batch and heads
    return x_rotated.to(dtype=x.dtype)


class Rotary:
    """The angles of every position so far, made on the device that asks and grown as
    longer sequences come (a 131k-token context is not computed up front). Not a module:
    nothing of it is a weight, and a model built on the meta device has none to fill."""

    def __init__(self, cfg: GPTConfig, base: float | None = None) -> None:
        """The angles of ``cfg``'s rotation, or of its own θ ``base`` (a sliding layer's,
        unscaled: Gemma 3 scales only its global layers' frequencies)."""
        self.inv_freq = (rope_inverse_frequencies(cfg.head_dim, cfg.rope_base, cfg.rope_scaling)
                         if base is None else rope_inverse_frequencies(cfg.head_dim, base))
        self._cos = self._sin = None

    def __call__(self, start: int, stop: int, device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
        if self._cos is None or self._cos.shape[0] < stop or self._cos.device != device:
            have = 0 if self._cos is None or self._cos.device != device else self._cos.shape[0]
            # plain tensors even when a pass in inference mode makes them, so that a later
            # pass with gradients (the gradient view, training) can use them
            with torch.inference_mode(False), torch.no_grad():
                self._cos, self._sin = rope_angles(self.inv_freq.to(device), 0,
                                                   max(stop, 2 * have, 256))
        return self._cos[start:stop], self._sin[start:stop]

    def at(self, positions: torch.Tensor, size: int, device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
        """cos and sin at ``positions`` (a tensor on the device, each below ``size``): a
        static cache's step, which does not know its position on the host."""
        self(0, size, device)
        return self._cos.index_select(0, positions), self._sin.index_select(0, positions)


def layer_rotary(cfg: GPTConfig, layer: int) -> Rotary:
    """The angles block ``layer`` of ``cfg`` turns by: a sliding layer's own θ where it
    has one (unscaled), else the model's."""
    if layer in cfg.sliding_layers and cfg.rope_base_of(layer) != cfg.rope_base:
        return Rotary(cfg, cfg.rope_base_of(layer))
    return Rotary(cfg)
