"""Learn mode's questions: every answer and every feedback line comes from the live
tensors of a pass, for every node of Pre-LN, Post-LN and a wider feed-forward."""

import random
import re

import pytest
import torch

from explorer.core.gpt.node_types import Kind
from explorer.core.run.capture import Capture
from explorer.core.gpt.config import preset
from explorer.core.gpt.build import build_model
from explorer.core.gpt.nodes import all_hook_names, block_hook_name, block_input, node_for_hook
from explorer.core.lessons.learn import Score, question_for, questions_for
from explorer.core.lessons.quiz import (ORDER, SHAPES, VALUES, Live, first_node_question,
                                        shape_question, width_question)

CONFIGS = {"pre": preset("tiny"), "post": preset("tiny", norm_position="post"),
           "wide": preset("tiny", emb_dim=48, n_heads=3)}


def capture(cfg, train=False, seed=3):
    model = build_model(cfg, seed=seed)
    model.train(train)
    torch.manual_seed(0)
    ids = torch.tensor([[464, 1049, 11, 290], [40, 716, 257, 3797]])[:, :3]  # a 2 x 3 batch
    with torch.no_grad(), Capture(model, tensors=True, inside=True) as cap:  # attention's steps too
        model(ids)
    return cap.views()


@pytest.fixture(scope="module")
def passes():
    return {key: capture(cfg) for key, cfg in CONFIGS.items()}


def every_question(views, cfg):
    for name in all_hook_names(cfg, inside=True):
        for asked in range(len(questions_for(name, cfg.norm_position))):
            yield name, question_for(name, views, cfg.norm_position, asked, seed=asked)


@pytest.mark.parametrize("key", list(CONFIGS))
def test_every_node_gets_well_formed_questions_of_its_own(passes, key):
    cfg, views = CONFIGS[key], passes[key]
    for name, q in every_question(views, cfg):
        assert 2 <= len(q.options) <= 4 and len(set(q.options)) == len(q.options), (name, q)
        assert 0 <= q.answer < len(q.options) and q.hides <= {SHAPES, ORDER, VALUES}
        for choice in range(len(q.options)):
            text = q.feedback(choice)
            assert "&#" not in text and "&amp;" not in text
            assert text.startswith("Right." if choice == q.answer else "Not quite")
        assert len(questions_for(name, cfg.norm_position)) >= 2  # they vary per node


@pytest.mark.parametrize("key", list(CONFIGS))
def test_shape_and_width_answers_are_the_live_tensors(passes, key):
    cfg, views = CONFIGS[key], passes[key]
    for name in all_hook_names(cfg):
        live = Live(name, views, cfg.norm_position)
        q = shape_question(live, random.Random(1))
        assert q.options[q.answer] == str(views[name].shape)
        assert q.explanation.startswith(str(views[name].shape))
        assert "What shape comes out of" in q.text
        w = width_question(live, random.Random(2))
        assert w.options[w.answer] == str(views[name].shape[-1])
    pattern = views[block_hook_name(0, "att.attn_weights")]
    assert pattern.shape == (2, cfg.n_heads, 3, 3)  # the last dimension is the tokens, not 1
    live = Live(block_hook_name(1, "ff.layers.0"), views, cfg.norm_position)
    w = width_question(live, random.Random(0))
    assert w.options[w.answer] == str(4 * cfg.emb_dim)
    assert f"it went in with {cfg.emb_dim}" in w.explanation


def test_the_first_operation_keeps_the_seeds_distractors_and_says_why(passes):
    seeds = {"LayerNorm 1 (norm1)", "Multi-head attention (att)", "Feed-forward (ff)",
             "Dropout on the shortcut (drop_shortcut)"}
    for key, first, right in (("pre", "norm1", "LayerNorm 1 (norm1)"),
                              ("post", "att", "Multi-head attention (att)")):
        cfg, views = CONFIGS[key], passes[key]
        for seed in range(20):
            q = first_node_question(Live(block_hook_name(1, first), views, cfg.norm_position),
                                    random.Random(seed))
            assert set(q.options) == seeds and q.options[q.answer] == right
            assert q.hides == {ORDER}
        wrong = [w for i, w in enumerate(q.why) if i != q.answer]
        assert all(wrong) and len(wrong) == 3
        assert "(2, 3, 32)" in q.text  # x's live shape
        # asked first at a block's input (the embeddings, the block before's output), never
        # at the block's first node, whose selection would give the answer away
        for at in ("drop_emb", block_input(1, cfg.norm_position)):
            asked = question_for(at, views, cfg.norm_position, 0)
            assert asked.text.startswith("Which operation touches"), at
            assert asked.options[asked.answer] == right
        for asked_n in range(4):
            q0 = question_for(block_hook_name(0, first), views, cfg.norm_position, asked_n)
            assert not q0.text.startswith("Which operation touches")
    q = question_for(block_hook_name(0, "add2"), passes["pre"], "pre", 0)  # block 1's input
    att_line = q.why[q.options.index("Multi-head attention (att)")]
    x = passes["pre"][block_hook_name(0, "add2")].array.reshape(-1, 32)[-1]
    assert f"{x.std():.3g} in x" in att_line  # with the live numbers
    assert "16 values" not in q.why[q.options.index("Feed-forward (ff)")]
    assert "128 values" in q.why[q.options.index("Feed-forward (ff)")]


def test_answers_follow_the_live_tensors(passes):
    pre, post = passes["pre"], passes["post"]
    q = question_for(block_hook_name(0, "att.attn_weights"), pre, "pre", 1)
    assert q.options[q.answer] == "1" and "exactly zero" in q.explanation
    zeros = float((pre[block_hook_name(0, "att.attn_weights")].array == 0).mean())
    assert f"{100 * zeros:.1f}%" in q.explanation
    q = question_for(block_hook_name(0, "drop1"), pre, "pre", 0)
    assert q.options[q.answer].startswith("it changes nothing")
    trained = capture(CONFIGS["pre"], train=True)  # dropout on: the answer changes
    q = question_for(block_hook_name(0, "drop1"), trained, "pre", 0)
    assert q.options[q.answer].startswith("it zeroes")
    q = question_for(block_hook_name(0, "add2"), pre, "pre", 1)  # 0: block 2's first operation
    assert q.options[q.answer] == "the first add's output (add1)"
    q = question_for(block_hook_name(0, "add2"), post, "post", 0)
    assert q.options[q.answer] == "LayerNorm 1's output (norm1)"
    name = block_hook_name(1, "ff.layers.1")
    q = question_for(name, pre, "pre", 0)
    share = float((pre[block_hook_name(1, "ff.layers.0")].array < 0).mean())
    assert f"{100 * share:.1f}%" in q.explanation
    assert q.options[q.answer] == ["under 25%", "25–50%", "50–75%", "over 75%"][min(3, int(share * 4))]
    norm = [question_for(block_hook_name(0, "norm2"), v, p, asked)
            for v, p in ((pre, "pre"), (post, "post")) for asked in range(4)]
    kinds = [q.options[q.answer] for q in norm if q.text == "Is this model Pre-LN or Post-LN?"]
    assert [k.split(":")[0] for k in kinds] == ["Pre-LN", "Post-LN"]
    numbers = re.findall(r"std (-?[\d.]+)", question_for(block_hook_name(0, "norm2"), pre, "pre", 0).explanation)
    after = pre[block_hook_name(0, "norm2")].array.reshape(-1, 32)[-1]
    assert numbers[1] == f"{after.std():.3g}"
    assert node_for_hook(block_hook_name(0, "norm2")).kind == Kind.NORM


def test_a_node_missing_from_the_pass_gets_no_question(passes):
    assert question_for("trf_blocks.9.norm1", passes["pre"], "pre") is None


def test_score_counts():
    s = Score()
    s.record(True)
    s.record(False)
    assert (s.asked, s.right) == (2, 1)


@pytest.mark.parametrize("key", ["pre", "post"])
def test_every_option_of_every_question_says_why_and_no_feedback_repeats(passes, key):
    cfg, views = CONFIGS[key], passes[key]
    for name in all_hook_names(cfg, inside=True):
        for asked in range(len(questions_for(name, cfg.norm_position))):
            q = question_for(name, views, cfg.norm_position, asked)
            wrong = [i for i in range(len(q.options)) if i != q.answer]
            assert all(q.why[i] for i in wrong), (name, q.text, q.options, q.why)
            answer = q.options[q.answer]
            for i in wrong:  # the verdict does not say the answer twice in a row
                said = q.feedback(i).split("\n")[0]
                assert f"{answer}. {answer}" not in said and said.count(answer) == \
                    max(1, q.explanation.count(answer)), said
            numeric = [any(ch.isdigit() for ch in o) for o in q.options]
            assert all(numeric) or not any(numeric) or q.text.startswith(("What share", "Which")), \
                (name, q.options)


def test_attentions_steps_ask_about_heads_the_score_matrix_the_mask_and_the_scaling(passes):
    """head_dim = emb_dim / n_heads; the score matrix is T × T per head; the mask sets
    later keys to −inf; the scores are divided by √head_dim — each from the live pass."""
    views, order = passes["wide"], "pre"  # 48 wide, 3 heads: head_dim 16
    text = lambda q: q.options[q.answer]  # noqa: E731
    heads = question_for(block_hook_name(0, "att.keys"), views, order, 0)
    assert text(heads) == "16" and "48 / 3 = 16" in heads.explanation
    shape = question_for(block_hook_name(0, "att.attn_scores"), views, order, 0)
    assert text(shape) == "(2, 3, 3, 3)" and "3 × 3 table of scores" in shape.explanation
    scaling = question_for(block_hook_name(0, "att.attn_scores"), views, order, 1)
    assert text(scaling) == "√head_dim" and "√head_dim = √16 ≈ 4 here" in scaling.explanation
    mask = question_for(block_hook_name(0, "att.masked_scores"), views, order, 0)
    assert text(mask) == "sets each score of a later key to −inf"
    assert "the first query keeps 1 of its 3 scores and the last 3" in mask.explanation
    rows = question_for(block_hook_name(0, "att.attn_weights"), views, order, 1)
    assert text(rows) == "1"


def test_a_token_tensors_shape_offers_the_seeds_flattened_batch(passes):
    """The chapter's quiz offers (6, 768) for a (2, 3, 768) tensor: batch and tokens run
    together. Every (B, T, C) node offers it, wrong for its own reason."""
    cfg, views = CONFIGS["pre"], passes["pre"]
    for name in (block_hook_name(0, "norm1"), block_hook_name(1, "ff.layers.0"), "out_head"):
        offered = 0
        for seed in range(30):
            q = shape_question(Live(name, views, cfg.norm_position), random.Random(seed))
            b, t, c = views[name].shape
            assert len(q.options) == 4 and q.options[q.answer] == str((b, t, c))
            if str((b * t, c)) in q.options:
                offered += 1
                flat = q.options.index(str((b * t, c)))
                assert f"run together into {b * t} rows" in q.why[flat]
        assert 5 <= offered <= 20, (name, offered)  # a third of the draws



def test_the_first_operation_is_not_asked_at_the_last_blocks_output(passes):
    """The last block's output enters no block (the final norm follows): the question
    about a block's first operation is asked at block 0's output, never at the last's."""
    cfg, views = CONFIGS["pre"], passes["pre"]
    def texts(name):
        return [question_for(name, views, cfg.norm_position, asked, seed=asked).text
                for asked in range(6)]
    assert any(t.startswith("Which operation touches the block's input") for t in
               texts("trf_blocks.0.add2"))
    assert not any(t.startswith("Which operation touches") for t in texts("trf_blocks.1.add2"))
