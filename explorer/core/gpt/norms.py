"""RMSNorm, the norm of the bonus chapters' blocks (and of the blocks after them); DyT,
what takes a norm's place in a block without normalisation; and a model's norm applied to
float64 numpy rows, as its module computes it: LayerNorm (mean taken out, biased
variance, scale and shift), RMSNorm (divided by the root mean square, scaled, nothing
taken out, nothing shifted) or DyT (squashed value by value), for the readings that apply
the final norm outside the forward pass (the logit lens of attribution, the layer
table)."""

from __future__ import annotations

import numpy as np
import torch
from torch import nn


class RMSNorm(nn.Module):
    """x / √(mean(x²) + eps) · scale, computed in float32 (as Llama and Qwen do): no mean
    subtracted, no shift. ``scale`` is the book's Qwen3 name (nn.RMSNorm's ``weight``)."""

    offset = 0.0  # what the stored scale is added to (OffsetRMSNorm's 1)

    def __init__(self, dim: int, eps: float = 1e-5) -> None:
        super().__init__()
        self.eps = eps
        self.scale = nn.Parameter(torch.ones(dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        dtype = x.dtype
        x = x.to(torch.float32)
        x = x * torch.rsqrt(x.pow(2).mean(dim=-1, keepdim=True) + self.eps)
        return self.scale * x.to(dtype)

    def gain(self) -> torch.Tensor:
        """What each normalised value is multiplied by."""
        return self.scale + self.offset if self.offset else self.scale


class OffsetRMSNorm(RMSNorm):
    """Gemma's RMSNorm: the gain is stored around 0 and used as 1 + scale (a stored 0
    means × 1), multiplied in float32 before the cast back, as the book's Gemma 3 and
    ``transformers`` compute it."""

    offset = 1.0

    def __init__(self, dim: int, eps: float = 1e-6) -> None:
        super().__init__(dim, eps)
        self.scale = nn.Parameter(torch.zeros(dim))  # a gain of 1

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        dtype = x.dtype
        x = x.to(torch.float32)
        x = x * torch.rsqrt(x.pow(2).mean(dim=-1, keepdim=True) + self.eps)
        x = x * (1.0 + self.scale.float())
        return x.to(dtype)


class DyT(nn.Module):
    """Dynamic Tanh ("Transformers without Normalization", Zhu, Chen, He, LeCun and Liu,
    2025): ``scale · tanh(alpha · x) + shift``, value by value. No statistic of the token
    is taken: ``alpha``, one learned number (``ALPHA`` at the start), sets how soon large
    values are squashed; ``scale`` and ``shift`` are a norm's."""

    ALPHA = 0.5  # the paper's α₀

    def __init__(self, dim: int) -> None:
        super().__init__()
        self.alpha = nn.Parameter(torch.full((1,), self.ALPHA))
        self.scale = nn.Parameter(torch.ones(dim))
        self.shift = nn.Parameter(torch.zeros(dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = torch.tanh(self.alpha * x)
        return self.scale * x + self.shift


def norm_rows(module: nn.Module, x: np.ndarray) -> np.ndarray:
    """``module`` (a LayerNorm, an RMSNorm or a DyT of the explorer's) applied along x's
    last axis."""
    gain = module.gain() if isinstance(module, RMSNorm) else module.scale
    scale = gain.detach().double().cpu().numpy()
    if isinstance(module, DyT):
        alpha = float(module.alpha.detach().double().cpu()[0])
        return scale * np.tanh(alpha * x) + module.shift.detach().double().cpu().numpy()
    shift = getattr(module, "shift", None)
    if shift is None:  # RMSNorm
        return scale * x / np.sqrt((x ** 2).mean(-1, keepdims=True) + module.eps)
    centred = x - x.mean(-1, keepdims=True)
    return (scale * centred / np.sqrt(x.var(-1, keepdims=True) + module.eps)
            + shift.detach().double().cpu().numpy())
