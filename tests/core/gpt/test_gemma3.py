"""Gemma 3 against ``transformers``' own Gemma3ForCausalLM (text only): random small
configs written with ``save_pretrained``, opened as a user would (a folder with its
tokenizer.json), every node of ours equal to theirs within 1e-5 in float32 — the four
norms a block with their 1 + w gains, the embedding scale, the GeGLU gate, the q/k norms
per head, the scores scaled by 1/√query_pre_attn_scalar, the sliding layers' masks and
their own RoPE base — the logits, greedy tokens and KV-cached steps; the book's Gemma 3
state dict (``blocks.N``, zero-centred ``scale``) with its config dict."""

import json

import pytest
import torch

from explorer.core.gpt.nodes import Kind, order_of
from explorer.core.weights.checkpoints import load_checkpoint
from tests.hf_reference import (compare_nodes, compare_steps_and_greedy, jitter_norms,
                                 opened_as_a_user_would)

transformers = pytest.importorskip("transformers")

TOL = 1e-5
CASES = {
    # two sliding layers and a full one (Gemma 3 has five and one); a window of 4
    "sliding-gqa-tied": dict(num_key_value_heads=2, num_hidden_layers=3, sliding_window=4,
                             layer_types=["sliding_attention", "sliding_attention",
                                          "full_attention"]),
    "full-mqa-untied": dict(num_key_value_heads=1, num_hidden_layers=2, tie_word_embeddings=False,
                            query_pre_attn_scalar=64,
                            layer_types=["full_attention", "full_attention"]),
}


def hf_model(case: str, seed: int = 0):
    torch.manual_seed(seed)
    config = transformers.Gemma3TextConfig(
        vocab_size=320, hidden_size=32, intermediate_size=72, num_attention_heads=4,
        head_dim=16, max_position_embeddings=64, rms_norm_eps=1e-6,
        attn_implementation="eager", **CASES[case])
    model = transformers.Gemma3ForCausalLM(config).eval()
    return jitter_norms(model)


@pytest.fixture(params=list(CASES))
def pair(request, tmp_path):
    return (*opened_as_a_user_would(hf_model(request.param), tmp_path), request.param)


def test_every_node_equals_transformers(pair):
    theirs, ours, case = pair
    cfg = ours.config
    assert cfg.family.name == "gemma3" and cfg.norm_position == "peri" and cfg.qk_norm
    assert cfg.tie_weights == theirs.config.tie_word_embeddings
    assert cfg.attn_scalar == theirs.config.query_pre_attn_scalar
    assert cfg.sliding_layers == ((0, 1) if "sliding" in case else ())
    assert (cfg.rope_base, cfg.rope_base_of(0)) == ((1e6, 1e4) if "sliding" in case else (1e6, 1e6))
    torch.manual_seed(1)
    ids = torch.randint(0, 320, (1, 12))
    names = compare_nodes(ours, theirs, ids, TOL)
    # tok_emb, its scaled copy; 31 a block; the final norm and the head
    assert len(names) == 2 + cfg.n_layers * 31 + 2
    assert [n for n in names if n.startswith("trf_blocks.0.") and n.count(".") == 2] == [
        "trf_blocks.0.norm1", "trf_blocks.0.att", "trf_blocks.0.post_norm1", "trf_blocks.0.add1",
        "trf_blocks.0.norm2", "trf_blocks.0.ff", "trf_blocks.0.post_norm2", "trf_blocks.0.add2"]


def test_greedy_tokens_and_kv_cached_steps_equal_transformers(pair):
    theirs, ours, _ = pair
    compare_steps_and_greedy(ours, theirs, TOL, pad=0)


def test_a_stored_gain_of_zero_is_a_gain_of_one():
    from explorer.core.gpt.build import build_model
    from explorer.core.gpt.config import preset
    model = build_model(preset("gemma3-tiny"), seed=0)
    norm = model.trf_blocks[0].norm1
    assert torch.equal(norm.scale, torch.zeros(32)) and torch.equal(norm.gain(), torch.ones(32))
    x = torch.randn(1, 3, 32)
    want = x / torch.sqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6)
    torch.testing.assert_close(norm(x), want)
    with torch.no_grad():
        norm.scale.fill_(0.5)
    torch.testing.assert_close(norm(x), want * 1.5)


def test_the_words_are_gemmas(pair):
    _, ours, _ = pair
    order = order_of(ours.config)
    family = order.family
    assert family.name == "gemma3" and order.position == "peri"
    post = family.node("trf_blocks.0.post_norm1", "peri")
    assert "post_attention_layernorm" in post.description and "1 + w" in post.description
    assert family.node("trf_blocks.0.ff.gelu", "peri").kind is Kind.GELU
    assert family.node("emb_scaled", "peri").label == "× √emb_dim"
    assert family.display_name(ours.config) == "Gemma 3" and "Gemma 3" in ours.label


def _book_state_dict(sd: dict) -> dict:
    """Our state dict under the book's Gemma 3 notebook's names."""
    names = {".norm1.": ".input_layernorm.", ".post_norm1.": ".post_attention_layernorm.",
             ".norm2.": ".pre_feedforward_layernorm.", ".post_norm2.": ".post_feedforward_layernorm."}
    out = {}
    for key, t in sd.items():
        key = key.replace("trf_blocks.", "blocks.")
        for ours, book in names.items():
            key = key.replace(ours, book)
        out[key] = t
    return out


def test_the_books_gemma3_pth_and_its_config_dict_load(tmp_path):
    from explorer.core.gpt.build import build_model
    from explorer.core.gpt.config import preset
    cfg = preset("gemma3-tiny", tie_weights=False)
    ours = build_model(cfg, seed=4)
    with torch.no_grad():
        for name, p in ours.named_parameters():
            if name.endswith("scale"):
                p.add_(torch.randn_like(p) * 0.2)
    torch.save(_book_state_dict(ours.state_dict()), tmp_path / "model.pth")
    book = {"vocab_size": cfg.vocab_size, "context_length": 64, "emb_dim": 32, "n_heads": 4,
            "n_layers": 3, "hidden_dim": 64, "head_dim": 16, "qk_norm": True, "n_kv_groups": 1,
            "rope_local_base": 10000.0, "rope_base": 1e6, "sliding_window": 16,
            "layer_types": ["sliding_attention", "sliding_attention", "full_attention"],
            "query_pre_attn_scalar": 16}
    (tmp_path / "config.json").write_text(json.dumps(book))
    loaded = load_checkpoint(tmp_path / "model.pth")
    assert loaded.config.family.name == "gemma3" and loaded.config.sliding_layers == (0, 1)
    assert loaded.config.attn_scalar == 16 and loaded.config.kv_heads == 1
    ids = torch.randint(0, cfg.vocab_size, (1, 30))
    with torch.no_grad():
        assert (loaded.model(ids) - ours(ids)).abs().max() <= TOL
