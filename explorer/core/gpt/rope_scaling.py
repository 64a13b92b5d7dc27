"""Llama 3's rotary frequency scaling as a config holds it (no torch)."""

from __future__ import annotations

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
