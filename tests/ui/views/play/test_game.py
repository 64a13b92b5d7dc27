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
    # the lens takes the screen: the verdict stays on it, on the status line and the score
    assert alone.session.status.startswith(f"Guess the layer — You: block {right}; the lens "
                                           f"first has it at block {right} (exactly!)")
    assert game.score_label.text() == "Layer rounds: 1 of 1 exact"
    rows = alone.lens.rows  # the lens tab's own answer agrees
    final = rows[-1].top_ids[0]
    first = next(i for i, r in enumerate(rows) if r.top_ids[0] == final)
    assert first // 2 == right


def test_another_run_ends_the_round_and_says_so(qtbot):
    """The rounds are the run's shown at Start: a new run underneath (a training
    snapshot's samples, a new generation) ends them instead of counting on in it."""
    alone = Alone(qtbot)
    alone.run(max_tokens=3)
    game = alone.game
    game.start()
    game.guess_id(game.buttons[0].property("token"))
    game.start()
    assert game.round == 1 and game.result.text() == "Round 2 of 3: what comes next?"
    alone.run(max_tokens=5)  # another run while round 2 is open
    assert game.round is None and not alone.session.covered
    assert game.result.text().startswith("A new run replaced the one being played")
    assert "1 round:" in game.result.text()  # the score stays
    game.start()
    assert game.result.text() == "Round 1 of 5: what comes next?"


def test_a_round_fits_a_laptop_window(qtbot, make_window):
    """Mid-round at 1366×768: every option, the guess box and button, the score and the
    result inside the Game's column, nothing scrolled sideways."""
    from tests.ui.conftest import run_and_wait
    from tests.ui.views.shared.test_graph import laptop
    from tests.ui.window.test_room import lacking_room, seen

    window = make_window()
    laptop(window, 1366, 768, banner=False)
    run_and_wait(qtbot, window, max_tokens=4)
    window.show_view("game")
    game = window.view("game")
    game.start()
    for b in game.buttons:  # as long as tokens get
        b.setText(repr(" internationalization") * 2)
    game.score.rounds, game.score.bits, game.score.model_first = 12, -30.5, 4
    game.score_label.setText(game.score.words)
    game.result.setText("Round 1 of 12: what comes next? " * 4)
    laptop(window, 1366, 768, banner=False)
    qtbot.waitUntil(lambda: seen(game).width() > 0, timeout=60_000)
    assert window.width() <= 1366  # no widget's minimum pushed the window past the screen
    room = seen(game)
    for w in (*game.buttons, game.guess_edit, game.guess_button, game.score_label, game.result,
              game.start_button):
        assert w.isVisible()
        assert seen(w).width() == w.width() and room.contains(seen(w)), w
    assert not [f for f in lacking_room(window) if "game" in f]
