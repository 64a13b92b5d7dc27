"""Each node's formula, worked with one token's numbers from the captured tensors and
the model's parameters, equals what the node captured — for every node of a Pre-LN and
a Post-LN model, at every position."""

import re

import pytest

from explorer.core.gpt.config import preset
from explorer.core.lessons.formulas import worked
from explorer.core.gpt.build import build_model
from explorer.core.gpt.nodes import all_hook_names
from explorer.core.run.passes import Keep, run_prompt
from explorer.core.gpt.tokenizer import encode


@pytest.mark.parametrize("order", ["pre", "post"])
def test_every_nodes_worked_formula_equals_its_captured_output(order):
    model = build_model(preset("tiny", norm_position=order), seed=3).eval()
    ids = encode("Every effort moves you")
    result = run_prompt(model, ids, Keep(inside=True))  # attention's own steps too
    for name in all_hook_names(model.cfg, inside=True):
        for pos in range(len(ids)):
            for head in (0, model.cfg.n_heads - 1):
                w = worked(model, name, result.views, ids, pos, head)
                assert w.value.shape == w.captured.shape, name
                assert w.max_error <= 1e-5, (name, pos, w.max_error)
                assert w.formula and w.lines and all(w.lines), name


def test_the_words_name_this_models_numbers():
    model = build_model(preset("tiny"), seed=3).eval()
    ids = encode("Every effort moves you")
    views = run_prompt(model, ids).views
    norm = worked(model, "trf_blocks.0.norm1", views, ids, 3)
    assert norm.formula == "y = (x − mean) / √(var + eps) · scale + shift"
    assert "token ' you' at position 3" in norm.lines[0] and "biased variance" in norm.lines[0]
    assert "eps 1e-05" in norm.lines[0] and len(norm.lines) == 4
    assert "eps keeps the division finite for a token whose values are all equal" in norm.lines[0]
    import numpy as np
    x = np.asarray(views["drop_emb"].array, dtype=np.float64)[0, 3]
    spread = (x.var() / (x.var() + 1e-5)) ** 0.5  # the normalised std the line states
    assert f"√(var / (var + eps)) = {spread:.4g}, not quite 1" in norm.lines[0]
    gelu = worked(model, "trf_blocks.0.ff.layers.1", views, ids, 3)
    assert "tanh(√(2/π)·(x + 0.044715·x³))" in gelu.formula
    att = worked(model, "trf_blocks.1.att", views, ids, 3, head=2)
    assert "head 2" in att.lines[0] and "4 keys" in att.lines[0]
    head = worked(model, "out_head", views, ids, 3)
    assert "tied" in head.formula and "the top logit is" in head.lines[0]
    add = worked(model, "trf_blocks.0.add2", views, ids, 0)
    assert "trf_blocks.0.drop2" in add.lines[0] and "trf_blocks.0.add1" in add.lines[0]
    post = build_model(preset("tiny", norm_position="post"), seed=3).eval()
    add = worked(post, "trf_blocks.0.add2", run_prompt(post, ids).views, ids, 0)
    assert "trf_blocks.0.norm1" in add.lines[0]  # Post-LN: the shortcut is norm1's output


def shown_keys(line: str) -> dict[int, float]:
    import re
    return {int(k): float(v) for k, v in re.findall(r"key (\d+) (-?[\d.]+(?:e-?\d+)?)", line)}


@pytest.mark.parametrize("words", ["Every effort moves you",
                                   "I had always thought Jack Gisburn rather a cheap genius"])
def test_a_row_of_attention_is_shown_whole_or_with_an_ellipsis(words):
    """Up to 8 keys every key's score and weight, summing to the stated sum; beyond, the
    first, the largest and the last with "…" where keys are left out, and the sum over
    every key — never part of a row under "(sum 1)"."""
    import re

    import numpy as np
    model = build_model(preset("tiny"), seed=3).eval()
    ids = encode(words)
    views = run_prompt(model, ids).views
    pos = len(ids) - 1
    att = worked(model, "trf_blocks.1.att", views, ids, pos, head=1)
    scores, weights = shown_keys(att.lines[0]), shown_keys(att.lines[2])
    row = np.asarray(views["trf_blocks.1.att.attn_weights"].array)[0, 1, pos, :pos + 1]
    assert f"sum over all {pos + 1} keys 1" in att.lines[2]
    if pos + 1 <= 8:
        assert sorted(weights) == list(range(pos + 1)) == sorted(scores)
        assert "…" not in att.lines[2]
        assert sum(weights.values()) == pytest.approx(1, abs=1e-3)
    else:
        keys = sorted({0, int(np.argmax(row)), pos})
        assert sorted(weights) == keys and "…" in att.lines[2]
        assert re.search(rf"key {int(np.argmax(row))} \S+ \(largest\)", att.lines[2])
        assert att.lines[2].count("…") == sum(b > a + 1 for a, b in zip([-1] + keys, keys))
    for k, w in weights.items():
        assert w == pytest.approx(row[k], rel=1e-3, abs=1e-6)
    # attn_scores: the one quantity the Scores node holds, q·k before the scaling
    import dataclasses

    from explorer.core.run.passes import EVERYTHING
    opened = run_prompt(model, ids, dataclasses.replace(EVERYTHING, inside=True)).views
    node = np.asarray(opened["trf_blocks.1.att.attn_scores"].array)[0, 1, pos]
    for k, score in scores.items():
        assert score == pytest.approx(node[k], rel=1e-3, abs=1e-5)


def test_the_steps_inside_attention_show_their_rows_whole():
    """Scores, masked scores and the weighted sum: the query's whole row over its keys,
    the masked ones as −inf, the weights' sum stated — for head 1 at position 2."""
    model = build_model(preset("tiny"), seed=3).eval()
    ids = encode("Every effort moves you")
    views = run_prompt(model, ids, Keep(inside=True)).views
    scores = worked(model, "trf_blocks.0.att.attn_scores", views, ids, 2, head=1)
    assert set(shown_keys(scores.lines[0])) == {0, 1, 2, 3}  # later keys too: not yet masked
    masked = worked(model, "trf_blocks.0.att.masked_scores", views, ids, 2, head=1)
    assert "key 3 -inf" in masked.lines[0] and "keys 3…3 set to −inf" in masked.lines[0]
    assert shown_keys(masked.lines[0]) == {k: v for k, v in shown_keys(scores.lines[0]).items() if k < 3}
    context = worked(model, "trf_blocks.0.att.context", views, ids, 2, head=1)
    weights = shown_keys(context.lines[0])
    assert set(weights) == {0, 1, 2, 3} and weights[3] == 0
    assert sum(weights.values()) == pytest.approx(1, abs=2e-3) and "sum over all 4 keys 1" in context.lines[0]
    split = worked(model, "trf_blocks.0.att.queries", views, ids, 2, head=1)
    assert "head 1 (head_dim 8 = 32 / 4 heads)" in split.lines[0] and "values 8…15" in split.lines[0]


def test_a_linear_without_a_bias_writes_no_bias_and_layer_norm_says_how_far_under_1():
    """qkv_bias off: W_query's formula has no "+ b" (it showed "+ b[0] 0"), and its
    values are still the captured ones; LayerNorm's std of the normalised values, which
    prints as 1 to four digits, is said as how far under 1 it is."""
    import dataclasses

    import numpy as np
    from explorer.core.run.passes import EVERYTHING
    model = build_model(preset("tiny", qkv_bias=False), seed=3).eval()
    ids = encode("Every effort moves you")
    views = run_prompt(model, ids, dataclasses.replace(EVERYTHING, inside=True)).views
    pos = len(ids) - 1
    att = worked(model, "trf_blocks.0.att.W_query", views, ids, pos)
    assert att.formula.startswith("y = x·Wᵀ (no bias)") and not any("+ b[" in line for line in att.lines)
    np.testing.assert_allclose(att.value, views["trf_blocks.0.att.W_query"].array[0, pos], atol=1e-5)
    said = worked(model, "trf_blocks.0.norm1", views, ids, pos).lines[0]
    assert "0.99" in said and "not quite 1" in said  # a small variance: visibly under 1
    import torch
    with torch.no_grad():  # embeddings 100 times larger: a variance far above eps
        model.tok_emb.weight.mul_(100)
        model.pos_emb.weight.mul_(100)
    views = run_prompt(model, ids).views
    said = worked(model, "trf_blocks.0.norm1", views, ids, pos).lines[0]
    assert re.search(r"= 1 − [0-9.]+e-0\d, a hair under 1", said) and "= 1, not quite 1" not in said


def test_a_mixtures_formulas_and_each_experts_steps_equal_what_they_captured():
    """Qwen3-MoE: every node's formula, each expert's five steps at the positions of the
    tokens routed to it (their rows put in place), equals its capture; a token that did
    not go to an expert is refused in one line; the routing formula says why top-k with
    this model's numbers, the mixture how many parameters were active."""
    import numpy as np
    from explorer.core.gpt.nodes import expert_step
    model = build_model(preset("qwen3moe-tiny"), seed=3).eval()
    ids = encode("Every effort moves you")
    result = run_prompt(model, ids, Keep(inside=True, experts=True))
    routing = {b: result.views[f"trf_blocks.{b}.ff.routing"].array[0] for b in (0, 1)}
    checked = 0
    for name in all_hook_names(model.cfg, inside=True, experts=True):
        found = expert_step(name, model.cfg)
        if name not in result.views:  # an expert no token chose: no steps
            assert found is not None and not routing[found[0]][:, found[1]].any()
            continue
        for pos in range(len(ids)):
            if found is not None and routing[found[0]][pos, found[1]] == 0:
                with pytest.raises(ValueError, match=f"position {pos} was not routed to expert "
                                                     f"{found[1]}"):
                    worked(model, name, result.views, ids, pos)
                continue
            w = worked(model, name, result.views, ids, pos)
            assert w.max_error <= 1e-5, (name, pos, w.max_error)
            checked += found is not None
    assert checked == 2 * 5 * 2 * len(ids)  # two blocks, five steps, two experts a token
    top = worked(model, "trf_blocks.1.ff.routing", result.views, ids, 2)
    share = 100 * np.sort(np.exp(result.views["trf_blocks.1.ff.gate"].array[0, 2]) /
                          np.exp(result.views["trf_blocks.1.ff.gate"].array[0, 2]).sum())[-2:].sum()
    assert f"why top-k: these 2 hold {share:.1f}% of the softmax, and running only them costs " \
           f"this token {2 * 3 * 32 * 32:,} of the {8 * 3 * 32 * 32:,} multiply-adds" in top.lines[-1]
    mix = worked(model, "trf_blocks.1.ff", result.views, ids, 2)
    assert mix.lines[-1] == f"active here: 2 experts × {3 * 32 * 32:,} parameters = " \
                            f"{2 * 3 * 32 * 32:,} of this block's {8 * 3 * 32 * 32:,}"


def test_the_split_into_heads_reads_as_the_books_line():
    """queries = queries.view(b, num_tokens, num_heads, head_dim).transpose(1, 2), as the
    book's MultiHeadAttention writes it, not the node's key on both sides."""
    model = build_model(preset("tiny"), seed=3).eval()
    ids = encode("Every effort moves you")
    views = run_prompt(model, ids, Keep(inside=True)).views
    for var in ("queries", "keys", "values"):
        w = worked(model, f"trf_blocks.0.att.{var}", views, ids, 1)
        assert w.formula == f"{var} = {var}.view(b, num_tokens, num_heads, head_dim).transpose(1, 2)"
        assert w.max_error <= 1e-6
