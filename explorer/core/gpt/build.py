"""A model of any block family, from its config: the family's module
(``BlockFamily.model``), on the device and in the dtype asked for, seeded or left for a
loader to fill. The models themselves are the families' own files (model.py for GPT-2,
llama.py for the Llama / Qwen block)."""

from __future__ import annotations

import torch

from .block_model import BlockModel
from .config import GPTConfig
from .tokenizer import gpt2_tokenizer


def new_model(cfg: GPTConfig) -> BlockModel:
    """The module of the config's block family, its parameters as the current device
    (``torch.device("meta")`` for none) makes them."""
    return cfg.family.model.new(cfg)


def build_model(cfg: GPTConfig, device: str | torch.device = "cpu",
                dtype: torch.dtype = torch.float32, seed: int | None = 0,
                should_stop=None) -> BlockModel:
    """The config's model in eval mode; the family's seeded initialisation, or
    uninitialised memory when ``seed`` is None (for a loader that fills every
    parameter). ``should_stop`` is asked between parameters while they are drawn
    (``Cancelled``)."""
    with torch.device("meta"):
        model = new_model(cfg)
    model.to_empty(device=device)
    if seed is not None:
        cfg.family.model.initialise(model, seed, should_stop)
    model = model.to(dtype=dtype)
    model.tie_weights()  # to_empty gave each use of the shared weight its own tensor
    # a model built from a config reads with GPT-2's tokenizer (every preset has its
    # 50,257 ids); a loader gives a model of another vocabulary its own
    model.tokenizer = gpt2_tokenizer()
    return model.eval()
