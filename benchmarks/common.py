"""Shared set-up for benchmarks: identical random gpt2-small weights in transformers and
in the explorer, and a machine description line."""

from __future__ import annotations

import os
import platform
import tempfile

import torch


def machine_line() -> str:
    return (f"{platform.node()} · {platform.processor() or platform.machine()} · "
            f"{os.cpu_count()} cores · torch {torch.__version__} · "
            f"{torch.get_num_threads()} threads")


def twin_models(seed: int = 0, preset_name: str = "gpt2-small"):
    """A transformers GPT2LMHeadModel with random weights and our GPTModel loaded from
    the same weights through our checkpoint loader (both fp32, eval, CPU)."""
    from transformers import GPT2Config, GPT2LMHeadModel

    from explorer.core.weights.checkpoints import load_checkpoint
    from explorer.core.gpt.config import preset

    cfg = preset(preset_name)
    torch.manual_seed(seed)
    hf = GPT2LMHeadModel(GPT2Config(n_embd=cfg.emb_dim, n_layer=cfg.n_layers, n_head=cfg.n_heads,
                                    n_positions=cfg.context_length, vocab_size=cfg.vocab_size)).eval()
    with tempfile.TemporaryDirectory() as tmp:
        hf.save_pretrained(tmp)
        ours = load_checkpoint(tmp).model
    return hf, ours
