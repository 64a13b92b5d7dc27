import math

import pytest
import torch

from explorer.core.gpt.node_types import Kind
from explorer.core.gpt import layers
from explorer.core.gpt.config import preset
from explorer.core.gpt.build import build_model
from explorer.core.gpt.families.gpt2 import MODEL_NODES_AFTER, MODEL_NODES_BEFORE
from explorer.core.gpt.nodes import (all_hook_names,
                                     block_nodes, node_for_hook, select_hook_names)
from tests import book_model


def test_layernorm_matches_book_formula_and_normalises():
    x = torch.randn(2, 5, 16) * 3 + 1.5
    ln = layers.LayerNorm(16)
    with torch.no_grad():
        ln.scale.uniform_(0.5, 2.0)
        ln.shift.uniform_(-1, 1)
    ref = book_model.LayerNorm(16)
    ref.load_state_dict(ln.state_dict())
    torch.testing.assert_close(ln(x), ref(x), atol=1e-5, rtol=1e-5)
    plain = layers.LayerNorm(16)(x)
    assert plain.mean(-1).abs().max() < 1e-5
    torch.testing.assert_close(plain.var(-1, unbiased=False), torch.ones(2, 5), atol=1e-3, rtol=0)


def test_gelu_variants_match_torch_and_book():
    x = torch.linspace(-6, 6, 1001)
    torch.testing.assert_close(layers.GELU()(x), book_model.GELU()(x), atol=1e-6, rtol=0)
    torch.testing.assert_close(layers.gelu_tanh_formula(x), torch.nn.functional.gelu(x, approximate="tanh"),
                               atol=1e-6, rtol=0)
    exact = torch.nn.functional.gelu(x, approximate="none")  # the exact Gaussian CDF
    torch.testing.assert_close(exact, x * 0.5 * (1 + torch.erf(x / math.sqrt(2))), atol=1e-6, rtol=0)
    gap = (layers.GELU()(x) - exact).abs().max()
    assert 1e-5 < gap < 1e-3  # close, but not the same function


def test_feedforward_keeps_width_and_widens_inside():
    cfg = preset("tiny")
    ff = layers.FeedForward(cfg)
    seen = {}
    ff.layers[0].register_forward_hook(lambda m, i, o: seen.update(hidden=o.shape))
    out = ff(torch.randn(2, 3, cfg.emb_dim))
    assert out.shape == (2, 3, cfg.emb_dim)
    assert seen["hidden"] == (2, 3, 4 * cfg.emb_dim)


def test_fused_and_explicit_attention_agree_and_pattern_is_causal():
    torch.manual_seed(0)
    att = layers.MultiHeadAttention(32, 32, 16, 0.0, 4, qkv_bias=True).eval()
    x = torch.randn(2, 7, 32)
    fused = att(x)
    patterns = []
    handle = att.attn_weights.register_forward_hook(lambda m, i, o: patterns.append(o))
    explicit = att(x)
    handle.remove()
    torch.testing.assert_close(fused, explicit, atol=1e-5, rtol=1e-5)
    (p,) = patterns
    assert p.shape == (2, 4, 7, 7)
    torch.testing.assert_close(p.sum(-1), torch.ones(2, 4, 7))
    assert torch.all(p.triu(1) == 0)  # no token looks ahead


def test_attention_matches_book_and_ignores_book_mask_buffer():
    ref = book_model.MultiHeadAttention(32, 32, 16, 0.0, 4, qkv_bias=False).eval()
    ours = layers.MultiHeadAttention(32, 32, 16, 0.0, 4, qkv_bias=False).eval()
    assert "mask" in ref.state_dict()
    ours.load_state_dict(ref.state_dict())  # strict: the mask key is accepted
    assert "mask" not in ours.state_dict()
    x = torch.randn(3, 9, 32)
    torch.testing.assert_close(ours(x), ref(x), atol=1e-5, rtol=1e-5)


def test_the_books_attention_steps_and_the_fast_paths_give_the_same_numbers():
    """book_forward is the book's forward line by line (the Code view shows it); the
    fast paths — the fused kernel, the pattern a chunk of rows at a time, the KV cache a
    token or a chunk at a time — agree with it, and with the book's own class."""
    from explorer.core.gpt.hooks import hooks
    torch.manual_seed(1)
    ref = book_model.MultiHeadAttention(32, 32, 200, 0.0, 4, qkv_bias=True).eval()
    att = layers.MultiHeadAttention(32, 32, 200, 0.0, 4, qkv_bias=True).eval()
    att.load_state_dict(ref.state_dict())
    for t in (1, 7, layers.PATTERN_ROWS, 150):  # 150: three chunks of query rows
        x = torch.randn(2, t, 32)
        book = att.book_forward(x)
        torch.testing.assert_close(book, ref(x), atol=1e-6, rtol=1e-5)
        torch.testing.assert_close(att.fast_forward(x), book, atol=1e-5, rtol=1e-5)  # fused
        seen = []
        with hooks(att, [("attn_weights", lambda m, i, o: seen.append(o))]):
            torch.testing.assert_close(att.fast_forward(x), book, atol=1e-5, rtol=1e-5)
            torch.testing.assert_close(att(x), book, atol=1e-5, rtol=1e-5)
        assert seen[0].shape == (2, 4, t, t)
        torch.testing.assert_close(seen[0], seen[1], atol=1e-6, rtol=1e-5)  # the same pattern
        kv = layers.LayerKV()  # the prompt in two chunks, then token by token
        half = max(1, t // 2)
        parts = [att.fast_forward(x[:, :half], kv, 0)]
        parts += [att.fast_forward(x[:, i:i + 1], kv, i) for i in range(half, t)]
        torch.testing.assert_close(torch.cat(parts, dim=1), book, atol=1e-5, rtol=1e-5)


def test_watched_scores_give_the_books_steps_on_the_fast_path():
    """With the scores watched, fast_forward computes every step whole (dense copies of
    q and k, the mask put in by ``where``, the pattern times the values a chunk of rows
    at a time): scores, masked scores, pattern and output equal the book's, for a prompt
    of three chunks of rows and for a chunk after cached tokens."""
    from explorer.core.gpt.hooks import hooks
    torch.manual_seed(2)
    att = layers.MultiHeadAttention(32, 32, 200, 0.0, 4, qkv_bias=True).eval()
    names = ("attn_scores", "masked_scores", "attn_weights")
    x = torch.randn(2, 150, 32)

    def steps(run):
        seen = {}
        with hooks(att, [(n, lambda m, i, o, n=n: seen.setdefault(n, o)) for n in names]):
            return run(), seen

    book, want = steps(lambda: att.book_forward(x))
    fast, got = steps(lambda: att.fast_forward(x))
    torch.testing.assert_close(fast, book, atol=1e-5, rtol=1e-5)
    for n in names:
        assert got[n].shape == (2, 4, 150, 150), n
        torch.testing.assert_close(got[n], want[n], atol=1e-5, rtol=1e-5)
    assert int(torch.isneginf(got["masked_scores"]).sum()) == 2 * 4 * 150 * 149 // 2
    assert int(torch.isneginf(got["attn_scores"]).sum()) == 0
    kv = layers.LayerKV()
    att.fast_forward(x[:, :100], kv, 0)  # the first 100 tokens cached, nothing watched
    tail, got = steps(lambda: att.fast_forward(x[:, 100:], kv, 100))
    torch.testing.assert_close(tail, book[:, 100:], atol=1e-5, rtol=1e-5)
    for n in names:
        assert got[n].shape == (2, 4, 50, 150), n
        torch.testing.assert_close(got[n], want[n][:, :, 100:], atol=1e-5, rtol=1e-5)


def test_the_code_view_shows_the_books_attention():
    from explorer.core.lessons.listing import listing
    shown = listing("trf_blocks.0.att.attn_weights")
    assert shown.forward_name == "book_forward"
    code = "\n".join(shown.forward)
    for step in ("queries = self.W_query(x)", "attn_scores = queries @ keys.transpose(2, 3)",
                 "attn_scores = attn_scores.masked_fill(mask_bool, -torch.inf)",
                 "the book fills in place (masked_fill_)",
                 "attn_weights = torch.softmax(attn_scores / keys.shape[-1] ** 0.5, dim=-1)",
                 "the book: (attn_weights @ values).transpose(1, 2)"):
        assert step in code, step
    assert "self.attn_weights(" in shown.forward[shown.forward_line]
    # each step inside attention points at its own line
    for key, line in (("W_key", "keys = self.W_key(x)"), ("masked_scores", "self.masked_scores(attn_scores)"),
                      ("context", "self.context(attn_weights @ values)"), ("out_proj", "self.out_proj(")):
        shown = listing(f"trf_blocks.0.att.{key}")
        assert line in shown.forward[shown.forward_line], key
        assert f"{key}" in shown.init[shown.init_line], key


def _book_cfg(cfg):
    return {k: getattr(cfg, k) for k in ("vocab_size", "context_length", "emb_dim", "n_heads",
                                         "n_layers", "drop_rate", "qkv_bias")}


@pytest.mark.parametrize("qkv_bias", [False, True])
def test_model_matches_book_model_on_book_state_dict(qkv_bias):
    cfg = preset("tiny", qkv_bias=qkv_bias, tie_weights=False)
    book = book_model.GPTModel(_book_cfg(cfg)).eval()
    ours = build_model(cfg, seed=None)
    ours.load_state_dict(book.state_dict())  # strict, no key map
    ids = torch.randint(0, cfg.vocab_size, (2, 11))
    with torch.no_grad():
        torch.testing.assert_close(ours(ids), book(ids), atol=1e-4, rtol=1e-4)


def test_output_shapes_and_tied_head():
    cfg = preset("tiny")
    model = build_model(cfg)
    assert model.out_head.weight is model.tok_emb.weight
    ids = torch.randint(0, cfg.vocab_size, (3, 5))
    assert model(ids).shape == (3, 5, cfg.vocab_size)
    assert model(ids, last_only=True).shape == (3, 1, cfg.vocab_size)


def test_sequence_longer_than_context_is_rejected():
    model = build_model(preset("tiny"))
    with pytest.raises(ValueError, match="context length 64"):
        model(torch.zeros(1, 65, dtype=torch.long))


@pytest.mark.parametrize("norm_position", ["pre", "post"])
def test_kv_cache_gives_the_same_logits_as_full_forward(norm_position):
    cfg = preset("tiny", norm_position=norm_position)
    model = build_model(cfg, seed=3)
    ids = torch.randint(0, cfg.vocab_size, (2, 20))
    with torch.no_grad():
        full = model(ids)
        cache = model.new_cache()
        parts = [model(ids[:, :8], cache=cache),  # prompt
                 model(ids[:, 8:13], cache=cache)]  # a chunk after cached tokens
        parts += [model(ids[:, t:t + 1], cache=cache) for t in range(13, 20)]  # one at a time
    torch.testing.assert_close(torch.cat(parts, dim=1), full, atol=1e-5, rtol=1e-5)
    assert cache.length == 20


def test_seeded_initialisation_is_reproducible_and_gpt2_scaled():
    a, b, c = (build_model(preset("tiny"), seed=s) for s in (5, 5, 6))
    assert torch.equal(a.trf_blocks[0].att.W_query.weight, b.trf_blocks[0].att.W_query.weight)
    assert not torch.equal(a.trf_blocks[0].att.W_query.weight, c.trf_blocks[0].att.W_query.weight)
    big = build_model(preset("tiny", emb_dim=256, n_heads=4), seed=0)
    assert abs(float(big.trf_blocks[0].att.W_query.weight.detach().std()) - 0.02) < 1e-3
    resid = 0.02 / math.sqrt(2 * big.cfg.n_layers)
    assert abs(float(big.trf_blocks[0].ff.layers[2].weight.detach().std()) - resid) < 1e-3


# --- the node table -------------------------------------------------------------------

@pytest.mark.parametrize("norm_position", ["pre", "post"])
def test_every_node_is_a_module_and_fires_in_table_order(norm_position):
    cfg = preset("tiny", norm_position=norm_position)
    model = build_model(cfg)
    modules = dict(model.named_modules())
    names = all_hook_names(cfg)
    assert all(n in modules for n in names), [n for n in names if n not in modules]
    fired = []
    handles = [modules[n].register_forward_hook(lambda m, i, o, n=n: fired.append(n)) for n in names]
    try:
        model(torch.randint(0, cfg.vocab_size, (1, 4)))
    finally:
        for h in handles:
            h.remove()
    # pos_emb runs before tok_emb in some forward orders; everything else follows the table.
    assert sorted(fired[:2]) == ["pos_emb", "tok_emb"]
    assert fired[2:] == names[2:]


def test_block_order_pre_and_post():
    pre = [n.key for n in block_nodes("pre")]
    post = [n.key for n in block_nodes("post")]
    assert pre == ["norm1", "att.attn_weights", "att", "drop1", "add1", "norm2", "ff.layers.0",
                   "ff.layers.1", "ff.layers.2", "ff", "drop2", "add2"]
    assert post == ["att.attn_weights", "att", "drop1", "add1", "norm1", "ff.layers.0",
                    "ff.layers.1", "ff.layers.2", "ff", "drop2", "add2", "norm2"]
    assert [n.key for n in MODEL_NODES_BEFORE] == ["tok_emb", "pos_emb", "emb_add", "drop_emb"]
    assert [n.key for n in MODEL_NODES_AFTER] == ["final_norm", "out_head"]


def test_node_shapes_follow_config():
    cfg = preset("gpt2-small")
    shapes = {n.key: n.shape(cfg, 1, 7) for n in block_nodes("pre")}
    assert shapes["norm1"] == (1, 7, 768)
    assert shapes["ff.layers.0"] == shapes["ff.layers.1"] == (1, 7, 3072)
    assert shapes["att.attn_weights"] == (1, 12, 7, 7)
    assert node_for_hook("out_head").shape(cfg, 1, 7) == (1, 7, 50257)


def test_node_selection_by_glob_layer_and_list():
    cfg = preset("tiny")
    assert select_hook_names(cfg, "trf_blocks.*.add2") == ["trf_blocks.0.add2", "trf_blocks.1.add2"]
    layer1 = select_hook_names(cfg, layer=1)
    assert layer1[0] == "trf_blocks.1.norm1" and "trf_blocks.1.att.attn_weights" not in layer1
    assert select_hook_names(cfg, ["final_norm", "tok_emb"]) == ["tok_emb", "final_norm"]
    with pytest.raises(KeyError, match="nope"):
        select_hook_names(cfg, "nope")
    assert node_for_hook("trf_blocks.1.ff.layers.1").kind == Kind.GELU
