"""The Llama / Qwen block's lessons: every node's formula worked with one token's numbers
equals what the node captured (RMSNorm, SiLU, the gated product, RoPE, the shared keys
and values, every step of grouped-query attention); Explain speaks of RMSNorm, SwiGLU and
grouped-query attention with this model's numbers; the Code view points at the line of
the bonus chapters' classes that made each node."""

import numpy as np
import pytest

from explorer.core.gpt.tokenizer import gpt2_tokenizer
import torch

from explorer.core.gpt.config import preset
from explorer.core.gpt.build import build_model
from explorer.core.gpt.nodes import all_hook_names, order_of, parse_hook
from explorer.core.gpt.tokenizer import encode
from explorer.core.lessons.explain import explain
from explorer.core.lessons.formulas import worked
from explorer.core.lessons.listing import listing
from explorer.core.run.passes import Keep, run_prompt

IDS = encode("Every effort moves you")


def model_of(name: str):
    model = build_model(preset(name), seed=3).eval()
    offset = model.cfg.family.model.variant.gain_offset  # Gemma's gains: 1 + a stored 0
    with torch.no_grad():  # norms away from 1: a forgotten weight would show
        for n, p in model.named_parameters():
            if n.endswith("scale"):
                p.add_(0.5 * torch.rand_like(p)) if offset else p.mul_(1 + 0.5 * torch.rand_like(p))
    return model


def trained_llama():
    """llama-tiny after 30 steps on "The Verdict": weights that have moved from their
    initialisation the way training moves them."""
    from explorer.core.experiments.train_text import default_text
    from explorer.core.experiments.training import Trainer, TrainSettings
    settings = TrainSettings(preset="llama-tiny", max_steps=30, batch_size=2, lr=3e-3,
                             min_lr=3e-4, warmup_steps=5, eval_every=30, eval_batches=1,
                             sample_tokens=2, seed=7, snapshots=0)
    trainer = Trainer(default_text(), settings)
    for _ in trainer.run():
        pass
    assert trainer.state.history[-1]["train_loss"] < trainer.state.history[0]["train_loss"] - 1
    return trainer.model.eval()


@pytest.mark.parametrize("name", ["llama-tiny", "qwen3-tiny", "olmo2-tiny", "olmo3-tiny",
                                  "gemma3-tiny", "qwen3moe-tiny", "trained"])
def test_every_llama_nodes_worked_formula_equals_its_captured_output(name):
    model = trained_llama() if name == "trained" else model_of(name)
    views = run_prompt(model, IDS, Keep(inside=True)).views
    names = all_hook_names(model.cfg, inside=True)
    assert ("trf_blocks.0.att.q_norm" in names) == model.cfg.qk_norm
    for node in names:
        for pos in range(len(IDS)):
            for head in (0, model.cfg.n_heads - 1):
                w = worked(model, node, views, IDS, pos, head)
                assert w.value.shape == w.captured.shape, node
                assert w.max_error <= 1e-5, (node, pos, head, w.max_error)
                assert w.formula and w.lines and all(w.lines), node


def test_the_llama_formulas_say_what_changed_from_gpt2():
    model = model_of("qwen3-tiny")
    views = run_prompt(model, IDS, Keep(inside=True)).views
    norm = worked(model, "trf_blocks.0.norm1", views, IDS, 3)
    assert norm.formula == "y = x / √(mean(x²) + eps) · weight"
    assert "is not subtracted and nothing is shifted" in norm.lines[0]
    x = np.asarray(views["tok_emb"].array, dtype=np.float64)[0, 3]
    assert f"√(mean(x²) + eps) {np.sqrt((x ** 2).mean() + 1e-6):.4g}" in norm.lines[0]
    rope = worked(model, "trf_blocks.1.att.queries_rope", views, IDS, 3, head=1)
    assert "at position 3 the angle of pair i is 3·θᵢ" in rope.lines[0]
    assert "pair (0, 8) at angle 3" in rope.lines[1]  # head_dim 16: pairs (i, i + 8)
    shared = worked(model, "trf_blocks.0.att.keys_repeated", views, IDS, 2, head=3)
    assert "its key/value head 1: heads 2…3 share it" in shared.lines[0]
    gate = worked(model, "trf_blocks.0.ff.product", views, IDS, 1)
    assert gate.formula == "silu(fc1·x) ⊙ (fc2·x)" and "gates are within 0.05 of 0" in gate.lines[0]


def test_explain_speaks_of_the_llama_block_with_its_numbers():
    model = model_of("qwen3-tiny")
    cfg = model.cfg
    views = run_prompt(model, IDS).views
    order = order_of(cfg)
    pieces = ["Every", " effort", " moves", " you"]
    norm = explain("trf_blocks.0.norm1", views, pieces, None, order, cfg, tokenizer=gpt2_tokenizer())
    assert "no mean subtracted" in norm.what and "root mean square" in norm.here
    assert "subtracts no mean" in norm.what and "never subtracts the mean" in norm.mistake
    ff = explain("trf_blocks.0.ff", views, pieces, None, order, cfg, tokenizer=gpt2_tokenizer())
    assert f"from {cfg.emb_dim} to {cfg.hidden_dim} values" in ff.what and "SiLU" in ff.what
    assert "not 4 × emb_dim" in ff.mistake
    att = explain("trf_blocks.0.att", views, pieces, None, order, cfg, tokenizer=gpt2_tokenizer())
    assert f"{cfg.n_heads} query heads of {cfg.head_dim} values share {cfg.kv_heads}" in att.what
    silu = explain("trf_blocks.0.ff.silu", views, pieces, None, order, cfg, tokenizer=gpt2_tokenizer())
    gate = np.asarray(views["trf_blocks.0.ff.fc1"].array).reshape(-1)
    assert f"{100 * float((gate < 0).mean()):.0f}% of its inputs" in silu.here


def test_the_code_view_points_at_the_bonus_chapters_line_of_every_node():
    cfg = preset("qwen3-tiny")
    order = order_of(cfg)
    for name in all_hook_names(cfg, inside=True):
        shown = listing(name, order)
        line = shown.forward[shown.forward_line]
        key = parse_hook(name)[1]
        attr = key.split(".", 1)[-1]
        if shown.title == "RMSNorm":
            assert line.strip() == "return self.scale * x.to(dtype)", name
        elif "add" in key:
            assert line.strip() == "x = x + shortcut", name
        else:
            assert f"self.{attr}(" in line, (name, line)
    assert listing("trf_blocks.0.att.attn_scores", order).forward_name == "_scored"


def test_gemma_and_olmo_formulas_name_their_own_steps():
    """Gemma's embedding scale is its own step (read from the token embedding, no table
    of its own), its norms' gains 1 + w, its scores scaled by 1/√query_pre_attn_scalar;
    OLMo's q/k norms span every head before the split."""
    from explorer.core.gpt.nodes import model_input_node, order_of
    from explorer.core.lessons.matrices import has_matrix
    gemma = model_of("gemma3-tiny")
    order = order_of(gemma.cfg)
    assert model_input_node("emb_scaled", order, gemma.cfg.n_layers) == "tok_emb"
    assert has_matrix("tok_emb", order) and not has_matrix("emb_scaled", order)
    views = run_prompt(gemma, IDS, Keep(inside=True)).views
    scaled = worked(gemma, "emb_scaled", views, IDS, 2)
    assert scaled.formula == "x = tok_emb[token id] × √emb_dim (√32 = 5.657)"
    q = worked(gemma, "trf_blocks.0.att.q_norm", views, IDS, 2, head=1)
    assert q.formula.endswith("· (1 + weight), per head")
    att = worked(gemma, "trf_blocks.0.att", views, IDS, 2)
    assert f"× {gemma.cfg.attn_scalar ** -0.5:.4g}" in att.formula
    olmo = model_of("olmo2-tiny")
    views = run_prompt(olmo, IDS, Keep(inside=True)).views
    k = worked(olmo, "trf_blocks.1.att.k_norm", views, IDS, 3)
    assert k.formula.endswith("· weight, over all heads at once, before the split")
    assert k.value.shape == (olmo.cfg.kv_heads * olmo.cfg.head_dim,)
