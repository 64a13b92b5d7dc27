"""Attention opened: every step inside MultiHeadAttention is a node whose capture equals
the book's own intermediate (tests/book_model.py ``attention_steps``) — in Pre-LN and
Post-LN, with and without the qkv bias, for a prompt (short: the book's path; long: the
chunked path), for KV-cached generation steps, and for a padded batch."""

import numpy as np
import pytest
import torch

from explorer.core.gpt.config import preset
from explorer.core.gpt.build import build_model
from explorer.core.gpt.families.gpt2 import ATTENTION_INSIDE
from explorer.core.gpt.nodes import (ATTENTION, all_hook_names, block_hook_name,
                                     input_node, node_for_hook)
from explorer.core.run.capture import Capture
from tests import book_model

STEPS = [n.key for n in ATTENTION_INSIDE]


def _book_attention(att):
    """The book's MultiHeadAttention with our module's weights."""
    book = book_model.MultiHeadAttention(att.W_query.in_features, att.d_out, att.context_length,
                                         0.0, att.num_heads, att.W_query.bias is not None)
    missing = book.load_state_dict(att.state_dict(), strict=False)
    assert missing.missing_keys == ["mask"] and not missing.unexpected_keys
    return book.eval()


def _attention_input(cap, model, layer):
    return cap[input_node(block_hook_name(layer, ATTENTION), model.cfg.norm_position)].tensor


def _assert_steps_equal(cap, model, layer, book_steps, rows=slice(None)):
    """Every inside node of ``layer`` against the book's intermediate (``rows``: the query
    positions the capture holds)."""
    for key in STEPS:
        got = cap[block_hook_name(layer, key)].tensor
        want = book_steps[key.removeprefix(ATTENTION + ".")]
        want = want[..., rows, :] if got.dim() == 4 else want[:, rows]
        if got.shape[-1] != want.shape[-1]:  # a cached step: keys so far, not the whole row
            want = want[..., :got.shape[-1]]
        assert got.shape == want.shape, key
        finite = torch.isfinite(want)
        assert torch.equal(finite, torch.isfinite(got)), key  # −inf exactly where masked
        torch.testing.assert_close(got[finite], want[finite], atol=1e-5, rtol=0, msg=key)


@pytest.mark.parametrize("norm_position", ["pre", "post"])
@pytest.mark.parametrize("qkv_bias", [False, True])
@pytest.mark.parametrize("tokens", [7, 90])  # the book's path; the long-prompt path
def test_every_step_inside_attention_equals_the_books(norm_position, qkv_bias, tokens):
    cfg = preset("tiny", norm_position=norm_position, qkv_bias=qkv_bias, context_length=128)
    model = build_model(cfg, seed=11).eval()
    ids = torch.randint(0, cfg.vocab_size, (1, tokens), generator=torch.Generator().manual_seed(3))
    with torch.no_grad(), Capture(model, inside=True, tensors=True) as cap:
        logits = model(ids)
        plain = model(ids)  # hooks or not, the same logits
    assert list(cap.records) == all_hook_names(cfg, inside=True)  # the table's forward order
    torch.testing.assert_close(logits, plain, atol=1e-5, rtol=0)
    for layer in range(cfg.n_layers):
        att = model.trf_blocks[layer].att
        with torch.no_grad():
            steps = book_model.attention_steps(_book_attention(att), _attention_input(cap, model, layer))
        _assert_steps_equal(cap, model, layer, steps)
    shapes = {key: cap[block_hook_name(0, key)].shape for key in STEPS}
    h, hd = cfg.n_heads, cfg.head_dim
    assert shapes["att.W_query"] == (1, tokens, cfg.emb_dim) == shapes["att.context_vec"]
    assert shapes["att.keys"] == (1, h, tokens, hd) == shapes["att.context"]
    assert shapes["att.attn_scores"] == (1, h, tokens, tokens) == shapes["att.masked_scores"]
    for key in STEPS:  # the table says each shape
        assert node_for_hook(block_hook_name(0, key)).shape(cfg, 1, tokens) == shapes[key], key
    masked = cap[block_hook_name(0, "att.masked_scores")].stats
    assert masked.n_inf == h * tokens * (tokens - 1) // 2  # the upper triangle, counted apart
    assert masked.count - masked.n_inf == h * tokens * (tokens + 1) // 2  # the moments' share
    seen = cap[block_hook_name(0, "att.masked_scores")].tensor
    assert masked.mean == pytest.approx(float(seen[torch.isfinite(seen)].double().mean()), abs=1e-6)


@pytest.mark.parametrize("norm_position", ["pre", "post"])
def test_a_kv_cached_step_is_one_query_row_against_every_key_so_far(norm_position):
    cfg = preset("tiny", norm_position=norm_position, qkv_bias=True)
    model = build_model(cfg, seed=12).eval()
    ids = torch.randint(0, cfg.vocab_size, (1, 7), generator=torch.Generator().manual_seed(4))
    with torch.no_grad(), Capture(model, inside=True, tensors=True) as whole:
        model(ids)  # the book's way: the whole sequence
    cache = model.new_cache()
    with torch.no_grad():
        model(ids[:, :4], cache=cache)
        for step in range(4, 7):  # then one token at a time from the cache
            with Capture(model, inside=True, tensors=True) as cap:
                model(ids[:, step:step + 1], cache=cache)
            for layer in range(cfg.n_layers):
                att = model.trf_blocks[layer].att
                steps = book_model.attention_steps(_book_attention(att),
                                                   _attention_input(whole, model, layer))
                _assert_steps_equal(cap, model, layer, steps, rows=slice(step, step + 1))
                scores = cap[block_hook_name(layer, "att.attn_scores")]
                assert scores.shape == (1, cfg.n_heads, 1, step + 1)  # 4 + k keys at step k


def test_a_padded_batch_keeps_padding_out_of_every_statistic():
    from explorer.core.run.batch import Batch
    from explorer.core.run.passes import Keep, run_prompt
    cfg = preset("tiny")
    model = build_model(cfg, seed=13).eval()
    a, b = [5, 17, 300, 42, 9], [8, 1000, 77]
    batch = Batch(ids=(tuple(a), tuple(b + [50256, 50256])), lengths=(5, 3))
    shown = run_prompt(model, batch, Keep(inside=True))
    for sample, ids in enumerate((a, b)):
        alone = run_prompt(model, ids, Keep(inside=True))
        for key in STEPS:
            name = block_hook_name(1, key)
            got, want = shown.views[name].array[sample], alone.views[name].array[0]
            n = len(ids)
            square = node_for_hook(name).width == "ctx"
            got = got[:, :n, :n] if square else got[:, :n] if got.ndim == 3 else got[:n]
            np.testing.assert_allclose(got, want, atol=1e-5, err_msg=key)
    h = cfg.n_heads
    view = shown.views[block_hook_name(1, "att.masked_scores")]
    # only the real queries, and of their keys only the ones they see: never a padded key
    assert view.stats.count - view.stats.n_inf == h * (5 * 6 // 2 + 3 * 4 // 2)
    real = np.concatenate([view.array[0].reshape(-1), view.array[1][:, :3, :3].reshape(-1)])
    assert view.stats.mean == pytest.approx(float(real[np.isfinite(real)].astype(np.float64).mean()),
                                            abs=1e-6)
    keys = shown.views[block_hook_name(1, "att.keys")].stats
    assert keys.count == h * (5 + 3) * cfg.head_dim


@pytest.mark.parametrize("norm_position", ["pre", "post"])
def test_attention_opened_on_demand_equals_the_pass_that_kept_it(norm_position):
    """The window opens one block's attention from the input the pass kept: the same
    numbers as a pass that captured the steps itself; a generated step's query is its
    own position against every key so far."""
    from explorer.core.run.opened import attention_input, inside_names, open_attention
    from explorer.core.run.passes import Keep, run_prompt
    cfg = preset("tiny", norm_position=norm_position)
    model = build_model(cfg, seed=14).eval()
    ids = [464, 3290, 318, 257, 1310, 13]
    whole = run_prompt(model, ids, Keep(inside=True))
    plain = run_prompt(model, ids)  # the window's pass: attention's steps not kept
    assert set(inside_names(1)) & set(plain.views) == {block_hook_name(1, "att.attn_weights")}
    x = plain.views[attention_input(1, norm_position)].array
    opened = open_attention(model, x, 1)
    assert list(opened) == inside_names(1)
    for name, view in opened.items():
        np.testing.assert_allclose(view.array, whole.views[name].array, atol=1e-5, err_msg=name)
        assert view.stats.mean == pytest.approx(whole.views[name].stats.mean, abs=1e-5)
    step = open_attention(model, x, 1, last_only=True)
    scores = step[block_hook_name(1, "att.masked_scores")]
    assert scores.shape == (1, cfg.n_heads, 1, len(ids))  # one query row, every key so far
    np.testing.assert_allclose(scores.array[0, :, 0], whole.views[scores.name].array[0, :, -1], atol=1e-5)
    np.testing.assert_allclose(step[block_hook_name(1, "att.out_proj")].array[0, 0],
                               whole.views[block_hook_name(1, "att")].array[0, -1], atol=1e-5)
    with pytest.raises(ValueError, match="attention's input must be"):
        open_attention(model, x[0], 1)
    with pytest.raises(ValueError, match=r"block 2 is not in this model \(blocks 0–1\)"):
        open_attention(model, x, 2)


def test_a_pass_can_keep_one_blocks_steps_only():
    """The window's pass with attention opened keeps the shown block's steps, no other's
    (each block's score matrices are T × T per head)."""
    from explorer.core.run.opened import inside_names
    from explorer.core.run.passes import Keep, run_prompt
    cfg = preset("tiny", n_layers=3)
    model = build_model(cfg, seed=15).eval()
    ids = [464, 3290, 318, 257]
    shown = run_prompt(model, ids, Keep(inside=1))
    whole = run_prompt(model, ids, Keep(inside=True))
    for layer in range(3):
        kept = set(inside_names(layer)) & set(shown.views)
        expected = set(inside_names(layer)) if layer == 1 else {block_hook_name(layer, "att.attn_weights")}
        assert kept == expected, layer
    for name in inside_names(1):
        np.testing.assert_allclose(shown.views[name].array, whole.views[name].array, atol=1e-6)


@pytest.mark.parametrize("norm_position", ["pre", "post"])
@pytest.mark.parametrize("tokens", [6, 80])  # the book's steps; query rows a chunk at a time
def test_a_pass_makes_the_named_blocks_pattern_and_another_opens_on_demand(norm_position, tokens):
    """``Keep.attention`` as a block's index (the window's shown block): the pass makes
    that block's pattern only, block 0 included; the other blocks run the fused kernel,
    the same logits to float rounding; another block's pattern opened from the input the
    pass kept equals the pattern a pass makes; the memory estimate drops by the patterns
    not made."""
    from explorer.core.gpt.nodes import LOGITS, PATTERN, is_pattern
    from explorer.core.run.opened import attention_input, open_attention
    from explorer.core.run.passes import Keep, pass_bytes, run_prompt
    cfg = preset("tiny", n_layers=3, norm_position=norm_position, context_length=128)
    model = build_model(cfg, seed=16).eval()
    ids = torch.randint(0, cfg.vocab_size, (tokens,), generator=torch.Generator().manual_seed(3)).tolist()
    every = run_prompt(model, ids, Keep())
    assert [n for n in every.views if is_pattern(n)] == [block_hook_name(b, PATTERN) for b in range(3)]
    for layer in range(3):
        one = run_prompt(model, ids, Keep(attention=layer))
        pattern = block_hook_name(layer, PATTERN)
        assert [n for n in one.views if is_pattern(n)] == [pattern]
        np.testing.assert_allclose(one.views[pattern].array, every.views[pattern].array, atol=1e-6)
        np.testing.assert_allclose(one.views[LOGITS].array, every.views[LOGITS].array, atol=1e-4)
        other = (layer + 1) % 3
        opened = open_attention(model, one.views[attention_input(other, norm_position)].array,
                                other, steps=False)
        name = block_hook_name(other, PATTERN)
        assert list(opened) == [name] and opened[name].shape == (1, cfg.n_heads, tokens, tokens)
        np.testing.assert_allclose(opened[name].array, every.views[name].array, atol=1e-6)
        np.testing.assert_allclose(opened[name].array.sum(-1), 1.0, atol=1e-5)
        assert opened[name].stats.max == pytest.approx(every.views[name].stats.max, abs=1e-6)
    one_block = cfg.n_heads * 1024 * 1024 * 4
    assert pass_bytes(cfg, 1, 1024, Keep()) - pass_bytes(cfg, 1, 1024, Keep(attention=1)) == 2 * one_block
    assert pass_bytes(cfg, 1, 1024, Keep(attention=1, inside=1)) - pass_bytes(
        cfg, 1, 1024, Keep(attention=1)) == 2 * one_block  # the scores and the masked scores
    assert pass_bytes(cfg, 1, 1024, Keep(attention=False, inside=True)) == pass_bytes(
        cfg, 1, 1024, Keep(inside=True))  # every block's steps: every pattern with them
