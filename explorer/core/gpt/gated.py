"""The gated feed-forwards of the bonus chapters' blocks and those after them, with the
book's names: SwiGLU (Llama, Qwen, OLMo: fc3(silu(fc1(x)) ⊙ fc2(x))) and GeGLU (Gemma:
GELU with the tanh approximation in SiLU's place); a family's ``Classes`` names its own."""

from __future__ import annotations

from typing import TYPE_CHECKING

import torch
from torch import nn

from .layers import HookPoint

if TYPE_CHECKING:
    from .config import GPTConfig


class FeedForward(nn.Module):
    """SwiGLU: fc3(silu(fc1(x)) ⊙ fc2(x)), no biases; ``silu`` and ``product`` name the
    two steps between."""

    def __init__(self, cfg: GPTConfig) -> None:
        super().__init__()
        self.fc1 = nn.Linear(cfg.emb_dim, cfg.hidden_dim, bias=False)
        self.fc2 = nn.Linear(cfg.emb_dim, cfg.hidden_dim, bias=False)
        self.fc3 = nn.Linear(cfg.hidden_dim, cfg.emb_dim, bias=False)
        self.silu = nn.SiLU()
        self.product = HookPoint()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x_fc1 = self.fc1(x)  # (B, T, hidden)
        x_fc2 = self.fc2(x)
        x = self.product(self.silu(x_fc1) * x_fc2)
        return self.fc3(x)  # (B, T, C)


class GeGLUFeedForward(FeedForward):
    """Gemma's gated feed-forward: fc3(gelu(fc1(x)) ⊙ fc2(x)), GELU with the tanh
    approximation where SwiGLU has SiLU (the book's Gemma 3: gelu(x_fc1,
    approximate="tanh")); ``gelu`` and ``product`` name the two steps between."""

    def __init__(self, cfg: GPTConfig) -> None:
        super().__init__(cfg)
        del self.silu
        self.gelu = nn.GELU(approximate="tanh")

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x_fc1 = self.fc1(x)  # (B, T, hidden)
        x_fc2 = self.fc2(x)
        x = self.product(self.gelu(x_fc1) * x_fc2)
        return self.fc3(x)  # (B, T, C)

