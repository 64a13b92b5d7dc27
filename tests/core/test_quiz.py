from explorer.core.config import preset
from explorer.core.quiz import (Score, first_node_question, norm_question, question_for,
                                shape_question, width_question)


def test_shape_question_has_the_right_answer_and_the_seeds_distractors():
    cfg = preset("gpt2-small")
    q = shape_question("trf_blocks.0.ff.layers.0", cfg, batch=2, tokens=3, seed=1)
    assert q.options[q.answer] == "(2, 3, 3072)" and len(set(q.options)) == 4
    assert {"(2, 3, 768)", "(2, 3, 192)", "(6, 3072)"} <= set(q.options)
    assert q.check(q.answer) and not q.check((q.answer + 1) % 4)
    pattern = shape_question("trf_blocks.0.att.attn_weights", cfg, 2, 3)
    assert pattern.options[pattern.answer] == "(2, 12, 3, 3)"


def test_first_node_depends_on_the_norm_position():
    pre = first_node_question(preset("tiny"))
    post = first_node_question(preset("tiny", norm_position="post"))
    assert pre.options[pre.answer] == "LayerNorm 1"
    assert post.options[post.answer] == "Multi-head attention"


def test_width_and_norm_questions():
    cfg = preset("gpt2-small")
    assert width_question("trf_blocks.0.ff.layers.0", cfg).answer == 0  # yes: 768 -> 3072
    assert width_question("trf_blocks.0.norm1", cfg).answer == 1  # no
    q = norm_question(preset("tiny", norm_position="post"))
    assert q.options[q.answer].startswith("Post-LN")
    kinds = {question_for("trf_blocks.0.norm1", cfg, 1, 4, seed).text.split()[0] for seed in range(4)}
    assert len(kinds) >= 3


def test_score_counts():
    s = Score()
    s.record(True)
    s.record(False)
    assert (s.asked, s.right) == (2, 1)
