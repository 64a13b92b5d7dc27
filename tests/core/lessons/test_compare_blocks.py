"""GPT-2's block beside the Llama / Qwen block, figures read from the models: parameters
per part against hand counts for four published shapes (built on the meta device: no
memory), the KV cache per token against hand counts and against a cache a real run
fills, and the roles said with each model's numbers."""

import pytest
import torch

from explorer.core.gpt.config import preset
from explorer.core.gpt.build import build_model
from explorer.core.gpt.sizes import count_parameters
from explorer.core.gpt.nodes import all_hook_names
from explorer.core.lessons.compare_blocks import cache_cost, parameter_parts, roles, tied
from explorer.core.sources import random_model

SHAPES = {  # the published models' shapes, each with its own vocabulary
    "gpt2-small": preset("gpt2-small"),
    "SmolLM2-135M": preset("smollm2-135m").replace(vocab_size=49152),
    "Llama-3.2-1B": preset("llama3.2-1b"),
    "Qwen3-0.6B": preset("qwen3-0.6b"),
}


def shaped(name):
    return build_model(SHAPES[name], device="meta", seed=None)


def hand_count(name):
    """Each part by hand: (rows × columns of every matrix) per block, times the blocks."""
    if name == "gpt2-small":
        c, L = 768, 12
        return {"token embedding": 50257 * c, "position embedding": 1024 * c,
                "attention matrices": L * 4 * c * c, "attention biases": L * 4 * c,
                "query and key norms": 0, "feed-forward matrices": L * 2 * c * 4 * c,
                "feed-forward biases": L * (4 * c + c), "norms": (2 * L + 1) * 2 * c,
                "output head": 0}
    vocab, c, L, heads, kv, hd, hidden, qk = {
        "SmolLM2-135M": (49152, 576, 30, 9, 3, 64, 1536, False),
        "Llama-3.2-1B": (128256, 2048, 16, 32, 8, 64, 8192, False),
        "Qwen3-0.6B": (151936, 1024, 28, 16, 8, 128, 3072, True)}[name]
    return {"token embedding": vocab * c, "position embedding": 0,
            "attention matrices": L * (c * heads * hd + 2 * c * kv * hd + heads * hd * c),
            "attention biases": 0, "query and key norms": L * 2 * hd if qk else 0,
            "feed-forward matrices": L * 3 * c * hidden, "feed-forward biases": 0,
            "norms": (2 * L + 1) * c, "output head": 0}


# the totals the model cards give (tied heads)
TOTALS = {"gpt2-small": 124_439_808, "SmolLM2-135M": 134_515_008,
          "Llama-3.2-1B": 1_235_814_400, "Qwen3-0.6B": 596_049_920}


@pytest.mark.parametrize("name", list(SHAPES))
def test_parameters_per_part_equal_hand_counts(name):
    model = shaped(name)
    parts = parameter_parts(model)
    assert parts == hand_count(name)
    assert sum(parts.values()) == TOTALS[name] == count_parameters(model.cfg).total
    assert tied(model)
    untied = build_model(SHAPES[name].replace(tie_weights=False), device="meta", seed=None)
    assert parameter_parts(untied)["output head"] == model.cfg.vocab_size * model.cfg.emb_dim
    assert not tied(untied)


# bytes a token adds to the cache, bfloat16: layers × (keys + values) × kv heads × head_dim × 2
CACHE = {"gpt2-small": (12 * 2 * 12 * 64 * 2, 1.0), "SmolLM2-135M": (30 * 2 * 3 * 64 * 2, 3.0),
         "Llama-3.2-1B": (16 * 2 * 8 * 64 * 2, 4.0), "Qwen3-0.6B": (28 * 2 * 8 * 128 * 2, 2.0)}


@pytest.mark.parametrize("name", list(SHAPES))
def test_the_kv_cache_per_token_equals_hand_counts(name):
    cost = cache_cost(shaped(name), torch.bfloat16)
    per_token, saved = CACHE[name]
    assert cost.per_token == per_token == {"gpt2-small": 36_864, "SmolLM2-135M": 23_040,
                                           "Llama-3.2-1B": 32_768, "Qwen3-0.6B": 114_688}[name]
    assert cost.saved == saved and cost.as_multi_head == per_token * saved


@pytest.mark.parametrize("name", ["tiny", "llama-tiny", "qwen3-tiny"])
def test_a_real_cache_grows_by_the_figure_a_token(name):
    model = random_model(name, seed=0).model
    cache, tokens = model.new_cache(), 9
    with torch.no_grad():
        model(torch.arange(tokens)[None], cache=cache)
    used = sum(layer.k[:, :, :tokens].nbytes + layer.v[:, :, :tokens].nbytes
               for layer in cache.layers)
    assert used == tokens * cache_cost(model).per_token


def test_roles_say_each_blocks_way_with_its_numbers():
    gpt2, smol = shaped("gpt2-small"), shaped("SmolLM2-135M")
    found = {r.name: r for r in roles(gpt2, smol)}
    assert list(found) == ["normalisation", "positions", "attention", "feed-forward",
                           "non-linearity", "dropout", "biases"]
    assert found["normalisation"].ways[0].startswith("LayerNorm") and "2 × 768" in \
        found["normalisation"].ways[0]
    assert found["normalisation"].ways[1].startswith("RMSNorm") and "576 weights" in \
        found["normalisation"].ways[1]
    assert "1,024 × 768" in found["positions"].ways[0] and "100000^(−2i/64)" in \
        found["positions"].ways[1]
    assert "9 query heads share 3 key/value heads (3 each)" in found["attention"].ways[1]
    assert "12 query heads, each with its own" in found["attention"].ways[0]
    assert "576 → 1,536 → 576, three matrices" in found["feed-forward"].ways[1]
    assert "768 → 3,072 → 768, two matrices" in found["feed-forward"].ways[0]
    assert found["dropout"].ways[1] == "none" and found["dropout"].nodes[1] is None
    assert found["biases"].ways[0].startswith("82,944, in attention's and the feed-forward's")
    assert found["biases"].ways[1].startswith("none")
    for model, i in ((gpt2, 0), (smol, 1)):  # every node named is one of its model's
        known = set(all_hook_names(model.cfg, inside=True))
        assert all(r.nodes[i] in known for r in found.values() if r.nodes[i] is not None)


def test_the_notes_say_the_head_and_the_feed_forwards_matrices_by_hand():
    from explorer.core.lessons.compare_blocks import compare
    c = compare(shaped("gpt2-small"), shaped("SmolLM2-135M"), ("gpt2", "smol"))
    gpt2, smol = c.notes()
    assert f"untied, it would add {50257 * 768:,}" in gpt2
    assert f"2 matrices of 768 × 3,072 = {2 * 768 * 3072:,} weights a block — with 3 it " \
           f"would hold {3 * 768 * 3072:,}" in gpt2
    assert f"untied, it would add {49152 * 576:,}" in smol
    assert f"3 matrices of 576 × 1,536 = {3 * 576 * 1536:,}" in smol
    untied = build_model(SHAPES["gpt2-small"].replace(tie_weights=False), device="meta", seed=None)
    assert "a matrix of its own (38,597,376)" in compare(untied, shaped("SmolLM2-135M"),
                                                          ("a", "b")).notes()[0]
