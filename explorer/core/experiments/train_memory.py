"""What a training step holds in memory, and the refusal of one that will not fit — with
what would: the largest batch that fits, or why none does (the weights and AdamW's
moments alone, or one row of a very long context)."""

from __future__ import annotations

from ..base import devices
from ..gpt.config import GPTConfig


def training_bytes(cfg: GPTConfig, batch_size: int) -> int:
    """About what a training step holds: the logits with their softmax and gradient, the
    activations kept for the backward pass, and the weights with AdamW's two moments."""
    from ..gpt.sizes import count_parameters

    tokens = batch_size * cfg.context_length
    logits = 3 * tokens * cfg.vocab_size * 4
    activations = tokens * cfg.n_layers * (16 * cfg.emb_dim + 2 * cfg.n_heads * cfg.context_length) * 4
    return logits + activations + 4 * count_parameters(cfg).total * 4


def check_training_memory(cfg: GPTConfig, batch_size: int, device, what: str) -> None:
    """Refuse a training that will not fit, saying what would: the largest batch that
    fits, or — where not one row of the model's full context does — that context."""
    try:
        devices.check_memory(training_bytes(cfg, batch_size), device,
                     f"training {what} with batch size {batch_size}")
    except MemoryError as exc:
        free = devices.free_memory_bytes(device) or 0
        fits = max((b for b in range(1, batch_size) if training_bytes(cfg, b) <= free),
                   default=0)
        fixed = training_bytes(cfg, 0)  # the weights, their gradients and AdamW's moments
        said = (f"a batch of {fits} fits" if fits else
                f"its weights and AdamW's moments alone need {fixed / 2**30:.1f} GiB"
                if fixed > free else f"not even one row of its {cfg.context_length:,}-token "
                "context fits: train a preset of a shorter context (mini, llama-mini)")
        raise MemoryError(f"{exc}; {said}") from None
