import pytest

from explorer.core.gpt.config import preset
import re

import torch

from explorer.core.run.batch import make_batch
from explorer.core.experiments.divergence import MUTATIONS, Status, find_divergence, lesson, mutate
from explorer.core.gpt.build import build_model
from explorer.core.gpt.tokenizer import encode

IDS = encode("Every effort moves you forward, and then some more")


@pytest.fixture(scope="module")
def model():
    return build_model(preset("tiny", n_layers=3), seed=2)


def test_identical_models_do_not_diverge(model):
    result = find_divergence(model, model, IDS)
    assert result.first is None and all(r.max_abs == 0 for r in result.rows)


@pytest.mark.parametrize("mutation,layer,node", [
    ("no-shortcut", 1, "trf_blocks.1.add1"),
    ("post-ln", 0, "trf_blocks.0.norm1"),
    ("relu", 2, "trf_blocks.2.ff.layers.1"),
    ("no-activation", 1, "trf_blocks.1.ff.layers.1"),
    ("ff-1024", 1, "trf_blocks.1.ff.layers.2"),
    ("unbiased-ln", 1, "trf_blocks.1.norm1"),
    ("eps", 2, "trf_blocks.2.norm1"),
    ("dropout-on", 0, "drop_emb"),
    ("ff-inner", 1, "trf_blocks.1.ff.layers.0"),
    ("no-norm2", 2, "trf_blocks.2.norm2"),
    ("wrong-shortcut2", 1, "trf_blocks.1.add2"),
])
def test_each_mutation_is_found_where_it_was_made(model, mutation, layer, node):
    result = find_divergence(model, mutate(model, mutation, layer=layer), IDS)
    assert result.first == node
    names = [r.name for r in result.rows]
    before = names[: names.index(node)]
    assert all(r.max_abs == 0 for r in result.rows if r.name in before)  # not earlier
    assert set(MUTATIONS) >= {mutation}


def test_ff_1024_reports_the_shapes_and_the_clear_error(model):
    result = find_divergence(model, mutate(model, "ff-1024", layer=1), IDS)
    row = next(r for r in result.rows if r.name == "trf_blocks.1.ff.layers.2")
    assert row.shape_a[-1] == 32 and row.shape_b[-1] == 1024 and row.status == Status.SHAPES_DIFFER
    assert result.error_b and "1024" in result.error_b
    assert any(r.status == Status.NOT_REACHED for r in result.rows)
    assert "first divergence: trf_blocks.1.ff.layers.2" in result.table()


def test_differences_after_the_first_node_are_reported(model):
    result = find_divergence(model, mutate(model, "relu", layer=0), IDS)
    after = [r for r in result.rows if r.name == "out_head"][0]
    assert after.max_abs > 0 and after.relative > 0


def test_unknown_mutation_and_bad_layer(model):
    with pytest.raises(ValueError, match="relu"):
        mutate(model, "swap-heads")
    with pytest.raises(ValueError, match="layer 9"):
        mutate(model, "relu", layer=9)


def test_ff_1024_on_the_seeds_2_by_3_batch_is_a_shape_mismatch_not_inf():
    gpt2 = build_model(preset("tiny", emb_dim=48, n_heads=4), seed=1)
    batch = make_batch(["Every effort moves", "Every day holds"], 64)
    assert (batch.size, batch.width) == (2, 3)
    b = mutate(gpt2, "ff-1024", layer=0)
    result = find_divergence(gpt2, b, batch)
    row = next(r for r in result.rows if r.name == "trf_blocks.0.ff.layers.2")
    assert (row.shape_a, row.shape_b) == ((2, 3, 48), (2, 3, 1024))
    table = result.table()
    assert "shape mismatch, A (2, 3, 48) vs B (2, 3, 1024)" in table
    assert "inf" not in table and " nan" not in table and "not reached in B" in table
    assert "1024 values per token instead of 48" in " ".join(lesson("ff-1024", b, 0, batch))


def test_without_gelu_the_feed_forward_is_one_linear_map(model):
    b = mutate(model, "no-activation", layer=1)
    ff = b.trf_blocks[1].ff
    x = torch.randn(2, 5, 32)
    with torch.no_grad():  # what the mutated block computes: Linear 2 of Linear 1, no GELU
        w = ff.layers[2].weight @ ff.layers[0].weight
        bias = ff.layers[2].weight @ ff.layers[0].bias + ff.layers[2].bias
        torch.testing.assert_close(ff(x), x @ w.T + bias, rtol=0, atol=1e-5)
    note, = lesson("no-activation", b, 1, IDS)
    assert "32×32 (in place of 128×32 and 32×128)" in note
    assert float(re.search(r"within ([\d.e-]+)", note).group(1)) < 1e-5
    dropout, = lesson("dropout-on", mutate(model, "dropout-on"), 0, IDS)
    assert "1/(1 − 0.1) = 1.11" in dropout and "overfitting" in dropout
    assert lesson("relu", mutate(model, "relu"), 0, IDS) == []


@pytest.mark.parametrize("name", ["tiny", "mini", "gpt2-small", "gpt2-medium", "gpt2-large", "gpt2-xl"])
def test_the_inner_size_exercise_mismatches_on_every_preset(name):
    """ff-N's default width differs from every preset's emb_dim (1024 is gpt2-medium's),
    so the exercise always breaks the shortcut; the lesson names both widths."""
    from explorer.core.experiments.divergence import ff_mutation
    cfg = preset(name, n_layers=1, vocab_size=64, context_length=8)  # the shape that matters
    small = build_model(cfg, seed=0)
    mutation = ff_mutation(cfg)
    width = int(mutation.split("-")[1])
    assert width != cfg.emb_dim
    result = find_divergence(small, mutate(small, mutation, layer=0), [1, 2, 3])
    row = next(r for r in result.rows if r.name == "trf_blocks.0.ff.layers.2")
    assert row.status == Status.SHAPES_DIFFER and row.shape_b[-1] == width
    assert f"{width} values per token instead of {cfg.emb_dim}" in " ".join(
        lesson(mutation, mutate(small, mutation, layer=0), 0, [1, 2, 3]))


def test_any_width_can_be_asked_for_and_a_fitting_one_says_so(model):
    from explorer.core.sources import parse_source
    assert parse_source("mutation:ff-48").name == "ff-48"
    result = find_divergence(model, mutate(model, "ff-48", layer=0), IDS)
    assert next(r for r in result.rows if r.name == "trf_blocks.0.ff.layers.2").shape_b[-1] == 48
    fits = lesson("ff-32", mutate(model, "ff-32", layer=0), 0, IDS)
    assert "as many as emb_dim: this width fits the shortcut" in fits[0]
    with pytest.raises(ValueError, match="unknown mutation"):
        parse_source("mutation:ff-wide")


def test_the_second_half_exercises_teach_where_to_look(model):
    """The chapter's 'the second half is wrong: where first?': an inner size mismatch
    stops B at Linear 2, a missing LayerNorm 2 and a wrong second shortcut are found
    at the node itself, each with words of this model's sizes."""
    inner = find_divergence(model, mutate(model, "ff-inner", layer=0), IDS)
    row = next(r for r in inner.rows if r.name == "trf_blocks.0.ff.layers.0")
    assert row.shape_b[-1] == 64 and row.status == Status.SHAPES_DIFFER and inner.error_b
    words = lesson("ff-inner", mutate(model, "ff-inner", layer=0), 0, IDS)[0]
    assert "gives 64 values per token but its Linear 2 reads 128" in words
    wrong = find_divergence(model, mutate(model, "wrong-shortcut2", layer=2), IDS)
    assert wrong.first == "trf_blocks.2.add2"
    post = build_model(preset("tiny", n_layers=2, norm_position="post"), seed=2)
    assert find_divergence(post, mutate(post, "no-norm2", layer=0), IDS).first == "trf_blocks.0.norm2"
    assert "LayerNorm 2 comes last" in lesson("no-norm2", mutate(post, "no-norm2"), 0, IDS)[0]


@pytest.mark.parametrize("order", ["pre", "post"])
def test_the_wrong_second_shortcut_is_said_with_what_it_measures(order):
    """The second add moves by the first half's output minus the block's input: the
    attention half's contribution in Pre-LN, measured equal; in Post-LN LayerNorm 1's
    output minus the input, far from the attention's (the text said 'exactly the
    attention half's contribution' for both)."""
    import re

    import numpy as np

    from explorer.core.run.passes import EVERYTHING, run_prompt
    model = build_model(preset("tiny", norm_position=order), seed=2)
    views = run_prompt(model, IDS, EVERYTHING).views
    x = views["drop_emb"]  # block 0's input
    half = views["trf_blocks.0.add1" if order == "pre" else "trf_blocks.0.norm1"].array
    gap = float(np.abs(half - x.array).max())
    attention = float(np.abs(views["trf_blocks.0.drop1"].array).max())
    words = lesson("wrong-shortcut2", mutate(model, "wrong-shortcut2", layer=0), 0, IDS)[0]
    shown = float(re.search(r"up to ([0-9.e+-]+) here", words)[1])
    assert shown == pytest.approx(gap, rel=1e-2)
    if order == "pre":
        assert "exactly the attention half's contribution" in words
        assert gap == pytest.approx(attention, rel=1e-5)
    else:
        assert "Not the attention's contribution" in words and "attention half" not in words
        assert gap > 2 * attention


def test_a_mutations_words_are_true_of_the_blocks_norm_position(capsys, tmp_path):
    """no-norm2 on a Post-LN model: its heading says the block's output goes unnormalised,
    not that the feed-forward half reads an unnormalised stream (Pre-LN's words, and still
    Pre-LN's there); post-ln on a model that is Post-LN already is refused in one line."""
    from explorer.cli import main
    from explorer.core.experiments.divergence import describe
    post, pre = preset("tiny", norm_position="post"), preset("tiny")
    assert describe("no-norm2", post) == ("LayerNorm 2 removed (the block's output is the "
                                          "second add's sum, not normalised)")
    assert "the feed-forward half reads an unnormalised stream" in describe("no-norm2", pre)
    model = build_model(post, seed=1)
    from explorer.core.weights.checkpoints import save_checkpoint
    path = save_checkpoint(model, tmp_path / "post.safetensors")
    assert main(["diff", "Every effort moves", "--a", str(path), "--b", "mutation:no-norm2"]) == 0
    out = capsys.readouterr().out
    assert "A with LayerNorm 2 removed (the block's output is the second add's sum" in out
    assert "reads an unnormalised stream" not in out
    with pytest.raises(ValueError, match="this model is Post-LN already, so B would be A"):
        mutate(model, "post-ln")
    assert mutate(build_model(pre, seed=1), "post-ln").cfg.norm_position == "post"
