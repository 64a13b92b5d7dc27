"""A model's norm applied to float64 numpy rows, as its module computes it: LayerNorm
(mean taken out, biased variance, scale and shift) or RMSNorm (divided by the root mean
square, scaled, nothing taken out, nothing shifted). For the readings that apply the
final norm outside the forward pass (the logit lens of attribution, the layer table)."""

from __future__ import annotations

import numpy as np
from torch import nn


def norm_rows(module: nn.Module, x: np.ndarray) -> np.ndarray:
    """``module`` (a LayerNorm or an RMSNorm of the explorer's) applied along x's last axis."""
    scale = module.scale.detach().double().cpu().numpy()
    shift = getattr(module, "shift", None)
    if shift is None:  # RMSNorm
        return scale * x / np.sqrt((x ** 2).mean(-1, keepdims=True) + module.eps)
    centred = x - x.mean(-1, keepdims=True)
    return (scale * centred / np.sqrt(x.var(-1, keepdims=True) + module.eps)
            + shift.detach().double().cpu().numpy())
