"""Llama 3's rotary frequency scaling as a config holds it (no torch)."""

from __future__ import annotations

import math
from dataclasses import dataclass


@dataclass(frozen=True)
class RopeScaling:
    """Llama 3's rotary frequency scaling (the book's ``rope_freq``, Hugging Face's
    ``rope_scaling`` of type "llama3"): long wavelengths divided by ``factor``, short ones
    kept, those between smoothly blended."""

    factor: float = 8.0
    low_freq_factor: float = 1.0
    high_freq_factor: float = 4.0
    original_context_length: int = 8192

    def __post_init__(self) -> None:
        for name in ("factor", "low_freq_factor", "high_freq_factor"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value < 1e6:
                raise ValueError(f"rope scaling's {name} must be a positive number, got {value!r}")
        if self.high_freq_factor <= self.low_freq_factor:
            raise ValueError("rope scaling's high_freq_factor must be above its low_freq_factor")
        n = self.original_context_length
        if isinstance(n, bool) or not isinstance(n, int) or not 0 < n <= 1 << 24:
            raise ValueError(f"rope scaling's original_context_length must be a positive "
                             f"whole number, got {n!r}")

    def pairs(self, base: float, head_dim: int) -> tuple[int, int, int]:
        """How many of a head's head_dim/2 pairs keep θᵢ = base^(−2i/head_dim) (short
        wavelengths), have it blended, and have it divided by ``factor`` (long ones)."""
        low = self.original_context_length / self.low_freq_factor
        high = self.original_context_length / self.high_freq_factor
        lengths = [2 * math.pi * base ** (2 * i / head_dim) for i in range(head_dim // 2)]
        kept = sum(w < high for w in lengths)
        divided = sum(w > low for w in lengths)
        return kept, len(lengths) - kept - divided, divided

    def words(self, base: float, head_dim: int) -> str:
        """The scaling in one sentence with this head's numbers."""
        kept, blended, divided = self.pairs(base, head_dim)
        low = self.original_context_length / self.low_freq_factor
        high = self.original_context_length / self.high_freq_factor
        return (f"Llama 3's frequency scaling then divides θᵢ by {self.factor:g} where the "
                f"pair's wavelength 2π/θᵢ is over {low:,.0f} positions ({divided} of the "
                f"{head_dim // 2} pairs), keeps it under {high:,.0f} ({kept}) and blends the "
                f"{blended} between")

