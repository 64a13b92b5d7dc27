"""The prediction game's rules: a guess as a token, its score and rank, the five
choices, the layer where the lens first finds the answer."""

import math

import numpy as np
import pytest

from explorer.core.gpt.tokenizer import encode
from explorer.core.lessons.game import Score, answer, choices, first_layer, guess_token


def test_a_typed_word_becomes_the_token_the_model_would_write():
    assert guess_token(" know") == (encode(" know")[0], "")
    assert guess_token("know") == (encode("know")[0], "")  # a token of its own as typed
    token, note = guess_token("xylophonist")
    assert token == encode(" xylophonist")[0] and "tokens: its first" in note
    with pytest.raises(ValueError, match="type a word"):
        guess_token("   ")


def test_the_score_is_the_models_log_probability_and_the_rank_follows():
    logits = np.array([2.0, 1.0, 0.0, -1.0, 3.0])
    a = answer(logits, guess=0, chosen=4)
    z = np.exp(logits - logits.max())
    assert a.log_prob == pytest.approx(math.log(z[0] / z.sum()))
    assert a.rank == 2 and answer(logits, 4, 4).rank == 1 and answer(logits, 3, 4).rank == 5
    assert a.points == pytest.approx(a.log_prob / math.log(2))
    score = Score()
    score.add(a)
    score.add(answer(logits, 4, 4))
    assert score.rounds == 2 and score.model_first == 1
    assert score.bits == pytest.approx(a.points + answer(logits, 4, 4).points)


def test_five_choices_hold_the_top_three_and_two_plausible_others():
    rng = np.random.default_rng(0)
    logits = rng.normal(size=50257)
    order = list(np.argsort(-logits))
    for r in range(5):
        picked = choices(logits, r)
        assert len(set(picked)) == 5 and set(order[:3]) <= set(picked)
        assert all(order.index(t) < 50 for t in picked)
        assert choices(logits, r) == picked  # the same round, the same choices
    assert [choices(logits, r).index(order[0]) for r in range(8)] != [0] * 8  # not always first


def test_the_layer_is_the_first_read_that_ranks_the_answer_first():
    assert first_layer([5, 7, 9, 9, 9], 9) == 2
    assert first_layer([5, 7], 9) is None


def test_the_score_line_is_true_during_the_first_round():
    """Before any answer the line says no round has been answered (it said "No rounds
    yet" while round 1 was open)."""
    from explorer.core.lessons.game import Score
    assert Score().words == "No round answered yet"
