"""RoPE on the model: the score of two tokens moved on together stays the same — the
model's own attention (float32) and the rotation worked in float64 agree."""

import pytest

from explorer.core.gpt.tokenizer import encode
from explorer.core.lessons.rope_shift import rope_shift
from explorer.core.sources import random_model

IDS = encode("Every effort moves you forward")


@pytest.mark.parametrize("name, block, head", [("llama-tiny", 1, 3), ("qwen3-tiny", 0, 2)])
def test_moving_both_tokens_on_leaves_their_score(name, block, head):
    model = random_model(name, seed=0).model
    r = rope_shift(model, IDS, block, head, shifts=(0, 1, 7, 40))
    scale = max(abs(s) for s in r.worked)
    assert r.spread(r.worked) <= 1e-12 * max(scale, 1.0)
    assert r.spread(r.live) <= 1e-5 * max(scale, 1.0)
    assert abs(r.live[0] - r.worked[0]) <= 1e-5 * max(scale, 1.0)
    assert (r.query, r.key) == (len(IDS) - 1, 0)
    # the rotation turns the pair: the same length, another direction
    (a, b), (c, d) = r.pair
    assert abs((a * a + b * b) - (c * c + d * d)) < 1e-9 and abs(a - c) > 1e-6


def test_a_score_without_rope_changes_with_where_the_tokens_stand():
    """Moving only the query (another distance) changes the score: the distance is what
    counts."""
    model = random_model("llama-tiny", seed=0).model
    near = rope_shift(model, IDS[:3], 0, 0, shifts=(0,))
    far = rope_shift(model, IDS[:2] + [IDS[2]] * 3, 0, 0, shifts=(0,))
    assert abs(near.worked[0] - far.worked[0]) > 1e-6


def test_gpt2_and_bad_prompts_are_refused_in_words():
    with pytest.raises(ValueError, match="learned position embedding"):
        rope_shift(random_model("tiny", seed=0).model, IDS)
    llama = random_model("llama-tiny", seed=0).model
    with pytest.raises(ValueError, match="two tokens at least"):
        rope_shift(llama, IDS[:1])
    with pytest.raises(ValueError, match="past the model's 64 positions"):
        rope_shift(llama, IDS, shifts=(0, 60))
