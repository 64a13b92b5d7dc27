"""Chapter 4's plan in Learn ▸ Model: its eight pieces in the book's order, each named with
the loaded model's own nodes and sizes."""

import pytest

from explorer.core.gpt.config import preset
from explorer.core.gpt.sizes import count_parameters
from explorer.core.lessons.chapter_plan import chapter_plan


@pytest.mark.parametrize("name, norms, activation", [
    ("gpt2-small", "norm1, norm2 in each block (LayerNorm)", "ff.layers.1 (GELU)"),
    ("tiny", "norm1, norm2 in each block (LayerNorm)", "ff.layers.1 (GELU)"),
    ("llama-tiny", "norm1, norm2 in each block (RMSNorm)", "ff.silu (SiLU)"),
    ("qwen3moe-tiny", "norm1, norm2 in each block (RMSNorm)", "each expert's ff.silu.E")])
def test_the_plan_names_each_piece_in_the_model(name, norms, activation):
    cfg = preset(name)
    plan = chapter_plan(cfg)
    assert [line.split(".")[0] for line in plan] == [str(i) for i in range(1, 9)]
    assert norms in plan[1] and activation in plan[2]
    assert f"{cfg.emb_dim:,} → {cfg.hidden_dim:,} → {cfg.emb_dim:,}" in plan[3]
    assert f"{cfg.n_layers} blocks, {count_parameters(cfg).total:,} parameters" in plan[6]
    assert plan[0].startswith("1. The GPT's backbone: tok_emb")

