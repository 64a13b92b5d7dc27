"""OLMo 2 and OLMo 3 against ``transformers``' own Olmo2ForCausalLM and Olmo3ForCausalLM:
random small configs written with ``save_pretrained``, opened as a user would (a folder
with its tokenizer.json), every node of ours equal to theirs within 1e-5 in float32 —
the norms inside the branches, the q/k norms over the whole projection, the sliding
layers' masks — the logits, greedy tokens and KV-cached steps; and the book's OLMo 3
state dict (``blocks.N``) with its config dict."""

import json

import pytest
import torch

from explorer.core.gpt.nodes import order_of
from explorer.core.weights.checkpoints import load_checkpoint
from tests.hf_reference import (compare_nodes, compare_steps_and_greedy, jitter_norms,
                                 opened_as_a_user_would)
from tests.llama_folder import write_tokenizer

transformers = pytest.importorskip("transformers")

TOL = 1e-5
SLIDING = ["sliding_attention", "sliding_attention", "sliding_attention", "full_attention"]
CASES = {
    "olmo2-gqa": ("Olmo2", dict(num_key_value_heads=2, num_hidden_layers=2)),
    "olmo2-tied-mha": ("Olmo2", dict(num_key_value_heads=4, num_hidden_layers=2,
                                     tie_word_embeddings=True)),
    "olmo3-sliding": ("Olmo3", dict(num_key_value_heads=2, num_hidden_layers=4,
                                    sliding_window=4, layer_types=SLIDING)),
}


def hf_model(case: str, seed: int = 0):
    kind, extra = CASES[case]
    torch.manual_seed(seed)
    config = getattr(transformers, f"{kind}Config")(
        vocab_size=320, hidden_size=32, intermediate_size=72, num_attention_heads=4,
        max_position_embeddings=64, rms_norm_eps=1e-6, attn_implementation="eager",
        eos_token_id=0, pad_token_id=1, **extra)
    model = getattr(transformers, f"{kind}ForCausalLM")(config).eval()
    return jitter_norms(model)


@pytest.fixture(params=list(CASES))
def pair(request, tmp_path):
    return (*opened_as_a_user_would(hf_model(request.param), tmp_path), request.param)


def test_every_node_equals_transformers(pair):
    theirs, ours, case = pair
    cfg = ours.config
    assert cfg.family.name == "olmo" and cfg.norm_position == "branch" and cfg.qk_norm
    assert cfg.kv_heads == theirs.config.num_key_value_heads
    assert cfg.tie_weights == theirs.config.tie_word_embeddings
    assert cfg.sliding_layers == ((0, 1, 2) if "sliding" in case else ())
    torch.manual_seed(1)
    ids = torch.randint(0, 320, (1, 12))  # longer than the window: it masks
    names = compare_nodes(ours, theirs, ids, TOL)
    assert len(names) == 1 + cfg.n_layers * 29 + 2  # tok_emb, 29 a block, final norm, head
    assert [n for n in names if n.startswith("trf_blocks.0.") and n.count(".") == 2] == [
        "trf_blocks.0.att", "trf_blocks.0.norm1", "trf_blocks.0.add1", "trf_blocks.0.ff",
        "trf_blocks.0.norm2", "trf_blocks.0.add2"]  # no norm before attention or the ff


def test_greedy_tokens_and_kv_cached_steps_equal_transformers(pair):
    theirs, ours, _ = pair
    compare_steps_and_greedy(ours, theirs, TOL, pad=1)


def test_the_order_and_the_words_are_olmos(pair):
    _, ours, case = pair
    order = order_of(ours.config)
    assert order.family.name == "olmo" and order.position == "branch"
    norm1 = order.family.node("trf_blocks.0.norm1", "branch")
    assert "inside its branch" in norm1.description and "OLMo" in norm1.description
    q_norm = next(n for n in order.family.attention_inside if n.key == "att.q_norm")
    assert q_norm.inputs == ("att.W_query",) and "whole query projection" in q_norm.description
    assert ours.config.family.display_name(ours.config) == ("OLMo 3" if "olmo3" in case else "OLMo 2")
    assert "OLMo" in ours.label


def test_llama_reads_none_of_olmos_names(tmp_path):
    """Hugging Face's post_attention_layernorm is OLMo's norm after attention (ours:
    norm1 in the branch order), never a Llama block's norm2."""
    theirs = hf_model("olmo2-gqa")
    theirs.save_pretrained(tmp_path)
    write_tokenizer(tmp_path, 320)
    loaded = load_checkpoint(tmp_path)
    block = loaded.model.trf_blocks[0]
    want = theirs.model.layers[0].post_attention_layernorm.weight
    assert torch.equal(block.norm1.scale, want) and not hasattr(block, "post_norm1")


def _book_state_dict(sd: dict) -> dict:
    """Our state dict under the book's OLMo 3 notebook's names."""
    out = {}
    for key, t in sd.items():
        key = key.replace("trf_blocks.", "blocks.").replace(".norm1.", ".post_attention_layernorm.")
        key = key.replace(".norm2.", ".post_feedforward_layernorm.")
        out[key.replace(".scale", ".weight")] = t
    return out


def test_the_books_olmo3_pth_and_its_config_dict_load(tmp_path):
    from explorer.core.gpt.build import build_model
    from explorer.core.gpt.config import preset
    cfg = preset("olmo3-tiny")
    ours = build_model(cfg, seed=4)
    torch.save(_book_state_dict(ours.state_dict()), tmp_path / "model.pth")
    book = {"vocab_size": cfg.vocab_size, "context_length": 64, "emb_dim": 32, "n_heads": 4,
            "n_kv_heads": 2, "n_layers": 4, "hidden_dim": 64, "head_dim": 8, "qk_norm": True,
            "sliding_window": 16, "layer_types": SLIDING, "rope_base": 500000.0,
            "rms_norm_eps": 1e-6, "rope_type": "default", "attention_bias": False}
    (tmp_path / "config.json").write_text(json.dumps(book))
    loaded = load_checkpoint(tmp_path / "model.pth")
    assert loaded.config.family.name == "olmo" and loaded.config.sliding_layers == (0, 1, 2)
    assert loaded.config.sliding_window == 16 and loaded.config.kv_heads == 2
    ids = torch.randint(0, cfg.vocab_size, (1, 30))
    with torch.no_grad():
        assert (loaded.model(ids) - ours(ids)).abs().max() <= TOL
