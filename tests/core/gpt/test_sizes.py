"""Where the parameter counts come from: per component, tied and untied, against the
built model's own parameters; the book's 163,009,536 and 621.83 MB; the literature."""

import pytest

from explorer.core.gpt.config import BOOK_GPT_CONFIG_124M, preset
from explorer.core.gpt.build import build_model
from explorer.core.gpt.sizes import sizes


@pytest.mark.parametrize("name", ["tiny", "llama-tiny", "qwen3-tiny"])
@pytest.mark.parametrize("tie", [True, False])
def test_the_counts_are_the_built_models(tie, name):
    cfg = preset(name, tie_weights=tie)
    model = build_model(cfg)
    unique = sum(p.numel() for p in model.parameters())  # a shared weight counted once
    s = sizes(cfg)
    assert (s.tied if tie else s.untied) == unique
    assert sum(r.count for r in s.rows) == unique
    tok = dict((r.component.split(" (")[0], r.count) for r in s.rows)
    assert tok["token embedding"] == model.tok_emb.weight.numel()
    att = sum(p.numel() for n, p in model.named_parameters() if ".att." in n)
    ff = sum(p.numel() for n, p in model.named_parameters() if ".ff." in n)
    rows = {r.component.split(" (")[0]: r for r in s.rows}
    assert rows["attention"].count == att and rows["feed-forward"].count == ff
    assert rows["attention"].per_block * cfg.n_layers == att
    assert ("position embedding" in rows) != (cfg.family.name == "llama")  # RoPE: no table of positions
    norms = sum(p.numel() for n, p in model.named_parameters() if n.startswith("trf_blocks.0.norm"))
    assert rows["RMSNorms" if (cfg.family.name == "llama") else "layer norms"].per_block == norms


def test_gpt2_sizes_and_the_books_figures():
    small = sizes(preset("gpt2-small"))
    assert (small.tied, small.untied) == (124_439_808, 163_037_184)
    notes = " ".join(small.notes())
    assert "The book's 163,009,536" in notes and "621.83 MB" in notes
    assert "27,648 fewer, 124,412,160" in notes and "38,597,376 more: 50,257 × 768" in notes
    assert "called 124M" in notes and "117M (7.4M fewer)" in notes
    book = sizes(BOOK_GPT_CONFIG_124M)
    assert book.untied == 163_009_536
    assert book.megabytes(book.untied) == pytest.approx(621.83, abs=0.005)
    exact = {"gpt2-medium": (354_823_168, "355M", "345M"), "gpt2-large": (774_030_080, "774M", "762M"),
             "gpt2-xl": (1_557_611_200, "1558M", "1542M")}
    for name, (count, released, paper) in exact.items():
        s = sizes(preset(name))
        assert s.tied == count and s.preset == name
        text = " ".join(s.notes())
        assert f"called {released}" in text and f"says {paper}" in text
    assert sizes(preset("tiny", emb_dim=48, n_heads=4)).preset is None


def test_the_notes_for_the_books_own_checkpoint_compare_with_gpt2():
    """A book state dict (qkv_bias off, head untied) has gpt2-small's shape: its notes
    measure the book's figures against GPT-2's biased, tied 124,439,808, never '0 fewer'."""
    book = sizes(BOOK_GPT_CONFIG_124M.replace(tie_weights=False))
    assert book.preset == "gpt2-small"
    notes = " ".join(book.notes())
    assert "against GPT-2's 124,439,808" in notes and "27,648 fewer, 124,412,160" in notes
    assert " 0 fewer" not in notes
    assert "called 124M: GPT-2's tied count with the qkv biases, 124,439,808" in notes
    assert "this model's own tied count is 124,412,160" in notes


def test_the_feed_forward_width_is_a_choice_with_a_cost():
    from explorer.core.gpt.sizes import feed_forward_cost
    cfg = preset("gpt2-small")
    four = feed_forward_cost(cfg, 4)
    assert four.hidden == cfg.hidden_dim == 3072
    assert four.parameters == 2 * 768 * 3072 + 3072 + 768  # 4,722,432 per block
    assert four.model_parameters == sizes(cfg).tied == 124_439_808
    assert four.multiply_adds == 2 * 768 * 3072
    two, eight = feed_forward_cost(cfg, 2), feed_forward_cost(cfg, 8)
    assert two.multiply_adds * 2 == four.multiply_adds == eight.multiply_adds // 2
    assert eight.model_parameters - four.model_parameters == 12 * (eight.parameters - four.parameters)
    built = build_model(preset("tiny"))
    assert feed_forward_cost(built.cfg, 4).parameters == sum(
        p.numel() for n, p in built.named_parameters() if n.startswith("trf_blocks.0.ff."))
    llama = build_model(preset("llama-tiny", ff_dim=2 * 32))  # SwiGLU: three matrices, no bias
    two = feed_forward_cost(llama.cfg, 2)
    assert two.parameters == 3 * 32 * 64 == sum(
        p.numel() for n, p in llama.named_parameters() if n.startswith("trf_blocks.0.ff."))
    assert two.model_parameters == sizes(llama.cfg).tied


def test_the_head_note_says_which_head_this_model_has():
    """The book's untied model is never described as tied, and a tied one never as
    untied; each says what the other choice would count."""
    from explorer.core.gpt.config import BOOK_GPT_CONFIG_124M
    untied, tied = sizes(BOOK_GPT_CONFIG_124M), sizes(preset("gpt2-small"))
    assert untied.notes()[0].startswith("Untied head (this model): out_head is a 50,257 × 768 "
                                        "matrix of its own")
    assert f"{untied.untied:,} in all. Tied to tok_emb" in untied.notes()[0]
    assert tied.notes()[0].startswith("Tied head (this model)")
    assert f"{tied.tied:,} in all. Untied" in tied.notes()[0]


def test_a_post_ln_gpt2_small_gets_gpt2_smalls_notes():
    notes = " ".join(sizes(preset("gpt2-small", norm_position="post")).notes())
    assert "The book's 163,009,536" in notes and "says 117M" in notes


@pytest.mark.parametrize("position", ["pre", "post", "branch", "peri", "parallel", "dyt"])
@pytest.mark.parametrize("name", ["tiny", "llama-tiny"])
def test_every_placement_counts_the_norms_it_has(name, position):
    """Peri-LN has four norms a block, the parallel block one, a DyT three numbers' worth
    more than a norm (α): the norms' row names them and counts the built model's."""
    cfg = preset(name, norm_position=position)
    model = build_model(cfg)
    assert sizes(cfg).tied == sum(p.numel() for p in model.parameters())
    row = next(r for r in sizes(cfg).rows if "final_norm" in r.component)
    keys = cfg.family.norm_keys(position)
    assert row.component.endswith(f"({', '.join(keys)}, final_norm)")
    assert len(keys) == {"peri": 4, "parallel": 1}.get(position, 2)
    block = model.trf_blocks[0]
    assert row.per_block == sum(p.numel() for k in keys for p in block.get_submodule(k).parameters())
    assert row.count == row.per_block * cfg.n_layers + sum(
        p.numel() for p in model.final_norm.parameters())


def test_smollm2_135m_says_its_rows_are_gpt2s_where_its_size_is_shown():
    """The preset keeps GPT-2's 50,257 token rows (it reads with GPT-2's tokenizer):
    the size line and the notes say so, with SmolLM2-135M's own 49,152 rows and count
    computed from the config."""
    from explorer.core.gpt.config import preset
    from explorer.core.gpt.sizes import count_parameters, describe_size, sizes
    cfg = preset("smollm2-135m")
    real = count_parameters(cfg.replace(vocab_size=49152)).total
    assert real == 134_515_008 and count_parameters(cfg).total == 135_151_488
    assert describe_size(cfg).endswith(" · GPT-2's 50,257 token rows (SmolLM2-135M's are 49,152)")
    assert "SmolLM2-135M has 49,152 token rows and 134,515,008 parameters; this preset keeps " \
           "GPT-2's 50,257 rows" in " ".join(sizes(cfg).notes())
    assert "token rows" not in describe_size(preset("llama3.2-1b"))
