"""RMSNorm, the norm of the bonus chapters' blocks (and of the blocks after them); and a
model's norm applied to float64 numpy rows, as its module computes it: LayerNorm (mean
taken out, biased variance, scale and shift) or RMSNorm (divided by the root mean square,
scaled, nothing taken out, nothing shifted), for the readings that apply the final norm
outside the forward pass (the logit lens of attribution, the layer table)."""

from __future__ import annotations

import numpy as np
import torch
from torch import nn


class RMSNorm(nn.Module):
    """x / √(mean(x²) + eps) · scale, computed in float32 (as Llama and Qwen do): no mean
    subtracted, no shift. ``scale`` is the book's Qwen3 name (nn.RMSNorm's ``weight``)."""

    def __init__(self, dim: int, eps: float = 1e-5) -> None:
        super().__init__()
        self.eps = eps
        self.scale = nn.Parameter(torch.ones(dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        dtype = x.dtype
        x = x.to(torch.float32)
        x = x * torch.rsqrt(x.pow(2).mean(dim=-1, keepdim=True) + self.eps)
        return self.scale * x.to(dtype)


def norm_rows(module: nn.Module, x: np.ndarray) -> np.ndarray:
    """``module`` (a LayerNorm or an RMSNorm of the explorer's) applied along x's last axis."""
    scale = module.scale.detach().double().cpu().numpy()
    shift = getattr(module, "shift", None)
    if shift is None:  # RMSNorm
        return scale * x / np.sqrt((x ** 2).mean(-1, keepdims=True) + module.eps)
    centred = x - x.mean(-1, keepdims=True)
    return (scale * centred / np.sqrt(x.var(-1, keepdims=True) + module.eps)
            + shift.detach().double().cpu().numpy())
