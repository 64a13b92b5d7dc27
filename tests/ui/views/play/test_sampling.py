"""The live sampling view alone: the shown step's distribution reshaped from its own
logits as the settings move (no job, no model run), the draws, the axis, the hand-over
to the prompt panel."""

import numpy as np
import pytest

from explorer.core.run.generation import GenerationSettings
from explorer.core.run.sampling import reshape
from explorer.core.gpt.tokenizer import token_piece
from explorer.ui.plots.plot_text import empty_message
from tests.ui.alone import Alone


def settled(qtbot, view) -> None:
    qtbot.waitUntil(lambda: not view._soon.isActive(), timeout=60_000)


def test_before_a_pass_it_says_what_fills_it(qtbot):
    alone = Alone(qtbot)
    assert "Run a prompt" in empty_message(alone.sampling.plot)


def test_moving_the_settings_reshapes_the_shown_step_without_running_the_model(qtbot):
    alone = Alone(qtbot)
    alone.run(max_tokens=2)
    alone.session.show_step(1)
    view = alone.sampling
    alone.settle()
    step = alone.session.steps[1]
    jobs = list(alone.engine.names)
    view.temperature.setValue(50)
    view.top_k.setValue(3)
    settled(qtbot, view)  # a dragged slider reshapes at most every 30 ms
    assert alone.engine.names == jobs  # reshaped here, from the step's logits
    want = reshape(step.next_logits, GenerationSettings(greedy=False, temperature=0.5, top_k=3))
    np.testing.assert_allclose(view.shaped.after, want.after)
    assert view.shaped.kept == 3 and view.shaped.chosen == step.token_id
    assert f"chosen {token_piece(step.token_id)!r}" in view.note.text()
    assert "3 of 50,257 tokens can be drawn" in view.note.text()
    assert "applied as temperature → top-k → top-p" in view.note.text()  # generation's order
    view.top_k.setValue(0)
    view.top_p.setValue(50)
    settled(qtbot, view)
    p_half = reshape(step.next_logits, GenerationSettings(greedy=False, temperature=0.5, top_p=0.5))
    np.testing.assert_allclose(view.shaped.after, p_half.after)
    view.greedy.setChecked(True)
    settled(qtbot, view)
    top = int(np.argmax(step.next_logits))
    assert view.shaped.kept == 1 and view.shaped.after[top] == 1.0
    assert ("rank 1" if step.token_id == top else "cut by these settings") in view.note.text()


def test_two_hundred_draws_and_the_fixed_axis(qtbot):
    alone = Alone(qtbot)
    alone.run(max_tokens=1)
    alone.session.show_step(None)
    view = alone.sampling
    alone.settle()
    view.top_k.setValue(10)
    settled(qtbot, view)
    view.sample()  # an engine job: generation's own draws
    alone.settle()
    assert "sample the next token" in alone.engine.names
    assert view.counts.sum() == 200 and np.count_nonzero(view.counts) <= 10
    assert "200 seeded draws" in view.note.text()
    view.temperature.setValue(120)  # other settings: the draws no longer apply
    assert view.counts is None
    view.fixed.setChecked(True)
    assert view.plot.vb.viewRange()[1] == pytest.approx([0, 1])


def test_use_for_generation_hands_the_settings_to_the_prompt_panel(qtbot):
    alone = Alone(qtbot)
    view, panel = alone.sampling, alone.prompt
    view.temperature.setValue(70)
    view.top_k.setValue(25)
    view.top_p.setValue(90)
    view.use_button.click()
    s = panel.settings_box.settings()
    assert (s.greedy, s.temperature, s.top_k, s.top_p) == (False, 0.7, 25, pytest.approx(0.9))


def test_the_three_most_likely_are_named_and_any_bar_on_hover(qtbot):
    """On a narrow plot the axis names every k-th bar, and every bar carries its token
    upright inside it; the three most likely are named in the line above the plot, and
    the bar under the mouse says its token and both probabilities."""
    from PySide6.QtCore import QPointF
    from PySide6.QtGui import QImage, QPainter
    alone = Alone(qtbot)
    alone.run(max_tokens=1)
    alone.session.show_step(0)
    view = alone.view(type(alone.sampling), width=420, height=420)  # a narrow column
    alone.settle()
    settled(qtbot, view)
    r, ids = view.shaped, view._ids
    top = np.argsort(-r.after, kind="stable")[:3]
    assert ("most likely " + ", ".join(f"{token_piece(int(t))!r} {r.after[t]:.2g}" for t in top)
            + ";") in view.note.text()
    # the axis draws the first (tallest) bar's name and the last's, inside the widget
    axis = view.plot.getAxis("bottom")
    image = QImage(10, 10, QImage.Format_ARGB32)
    painter = QPainter(image)
    texts = [(rect, text) for rect, _flags, text in axis.generateDrawSpecs(painter)[2]]
    painter.end()
    names = [text for _, text in texts]
    assert names[0] == repr(token_piece(int(ids[0]))) and names[-1] == repr(token_piece(int(ids[-1])))
    # every bar named, upright from its foot inside it, however narrow the plot
    assert [t.toPlainText() for t in view.names] == [repr(token_piece(int(i))) for i in ids]
    assert [t.pos().x() for t in view.names] == list(range(len(ids)))
    widget = view.plot_widget.rect()
    for rect, _ in texts:
        on_screen = view.plot_widget.mapFromScene(axis.mapRectToScene(rect)).boundingRect()
        assert widget.contains(on_screen), (rect, widget)
    where = view.plot.vb.mapViewToScene(QPointF(1, float(r.before[ids[1]]) / 2))
    view._hovered(where)
    assert view.plot_widget.toolTip() == (f"{token_piece(int(ids[1]))!r} (id {ids[1]}): model p "
                                          f"{r.before[ids[1]]:.4g}, with these settings "
                                          f"{r.after[ids[1]]:.4g}")
