import pytest

from explorer.core.gpt.config import BOOK_GPT_CONFIG_124M, PRESETS, GPTConfig, preset
from explorer.core.gpt.build import build_model
from explorer.core.gpt.sizes import count_parameters


@pytest.mark.parametrize("name,emb,layers,heads", [
    ("gpt2-small", 768, 12, 12), ("gpt2-medium", 1024, 24, 16),
    ("gpt2-large", 1280, 36, 20), ("gpt2-xl", 1600, 48, 25)])
def test_gpt2_presets_have_gpt2_sizes(name, emb, layers, heads):
    cfg = preset(name)
    assert (cfg.emb_dim, cfg.n_layers, cfg.n_heads) == (emb, layers, heads)
    assert (cfg.context_length, cfg.vocab_size) == (1024, 50257)
    assert cfg.qkv_bias and cfg.tie_weights and cfg.norm_position == "pre"


def test_book_parameter_counts():
    assert count_parameters(BOOK_GPT_CONFIG_124M).total == 163_009_536
    assert count_parameters(BOOK_GPT_CONFIG_124M.replace(tie_weights=True)).total == 124_412_160
    assert count_parameters(preset("gpt2-small")).total == 124_439_808


@pytest.mark.parametrize("name,expected", [
    ("gpt2-medium", 354_823_168), ("gpt2-large", 774_030_080), ("gpt2-xl", 1_557_611_200)])
def test_larger_presets_match_published_counts(name, expected):
    # transformers' GPT2LMHeadModel parameter counts for these sizes.
    assert count_parameters(preset(name)).total == expected


@pytest.mark.parametrize("cfg", [preset("tiny"), preset("tiny", qkv_bias=False, tie_weights=False),
                                 preset("tiny", norm_position="post")])
def test_counted_parameters_equal_built_model(cfg):
    model = build_model(cfg)
    assert sum(p.numel() for p in model.parameters()) == count_parameters(cfg).total


def test_component_counts_add_up():
    c = count_parameters(preset("gpt2-small"))
    assert c.embeddings == 50257 * 768 + 1024 * 768
    assert c.norms == (2 * 12 + 1) * 2 * 768
    assert c.head == 0
    assert c.embeddings + c.attention + c.feed_forward + c.norms == c.total


@pytest.mark.parametrize("changes,message", [
    ({"emb_dim": 30, "n_heads": 4}, "divisible"),
    ({"norm_position": "middle"}, "norm_position"),
    ({"n_layers": 0}, "n_layers"),
    ({"drop_rate": 1.0}, "drop_rate")])
def test_invalid_config_is_rejected_with_reason(changes, message):
    with pytest.raises(ValueError, match=message):
        preset("tiny", **changes)


def test_unknown_preset_lists_choices():
    with pytest.raises(ValueError, match="gpt2-small"):
        preset("gpt5")


def test_config_round_trips_through_json_and_hf_dict():
    cfg = preset("tiny", norm_position="post")
    import json
    assert GPTConfig.from_dict(json.loads(cfg.to_json())) == cfg
    hf = {"vocab_size": 50257, "n_positions": 1024, "n_embd": 768, "n_head": 12, "n_layer": 12}
    assert GPTConfig.from_hf_dict(hf) == PRESETS["gpt2-small"]
