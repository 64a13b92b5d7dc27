"""The prediction game's view alone: rounds over a real generation, covers over the views
that would answer, the score; the layer round against the lens."""

import numpy as np

from explorer.core.lessons.game import PREDICTION, answer
from explorer.core.gpt.tokenizer import token_piece
from tests.ui.alone import Alone


def test_each_round_covers_the_answers_and_scores_the_guess(qtbot):
    alone = Alone(qtbot)
    game = alone.game
    game.start()
    assert "Generate some tokens" in game.result.text() and not alone.session.covered
    alone.run(max_tokens=2)
    game.start()
    assert alone.session.covered.kinds == {PREDICTION} and game.round == 0
    step = alone.session.steps[0]
    top3 = set(np.argsort(-step.next_logits)[:3].tolist())
    assert top3 <= {b.property("token") for b in game.buttons}
    assert "Every effort moves you" in game.context.toPlainText()
    assert token_piece(step.token_id) not in game.context.toPlainText().split("you")[-1]
    pick = game.buttons[0].property("token")
    got = game.guess_id(pick)
    assert got == answer(step.next_logits, pick, step.token_id)
    assert not alone.session.covered and game.score.rounds == 1
    assert f"The generation took {token_piece(step.token_id)!r}" in game.result.text()
    game.start()  # the second round: the first token is now in the text
    assert game.round == 1 and alone.session.covered.kinds == {PREDICTION}
    game.guess_text(token_piece(alone.session.steps[1].token_id))
    assert game.score.rounds == 2
    game.start()
    assert "That was every generated token" in game.result.text() and not alone.session.covered


def test_a_new_model_ends_the_round_and_lifts_the_covers(qtbot):
    alone = Alone(qtbot)
    alone.run(max_tokens=1)
    game = alone.game
    game.start()
    assert alone.session.covered
    alone.session.set_model(alone.session.model)
    assert not alone.session.covered and game.round is None


def test_the_layer_round_asks_where_the_lens_first_finds_the_answer(qtbot):
    alone = Alone(qtbot)
    alone.run(max_tokens=1)
    game = alone.game
    game.mode.setCurrentIndex(1)
    shown = alone.shown
    game.start()
    alone.settle()
    assert alone.session.covered.kinds == {PREDICTION} and game.lens_answer is not None
    right = game.lens_answer
    assert 0 <= right < alone.session.model.config.n_layers
    game.guess_layer(right)
    assert "exactly!" in game.result.text() and game.layer_score == [1, 1]
    assert shown == ["lens"] and not alone.session.covered
    rows = alone.lens.rows  # the lens tab's own answer agrees
    final = rows[-1].top_ids[0]
    first = next(i for i, r in enumerate(rows) if r.top_ids[0] == final)
    assert first // 2 == right
