"""Learn mode in the window: while a question is open nothing on screen shows its
answer (the graph's shapes and order, the inspector, the explanation, the plots); the
answer reveals the node with the live numbers, and the score counts."""

import pytest
from PySide6.QtGui import QTextDocument

from explorer.core.gpt.nodes import all_hook_names, block_hook_name
from explorer.core.lessons.facts import KINDS
from explorer.core.lessons.quiz import ORDER
from tests.ui.conftest import run_and_wait


def rendered(label):
    document = QTextDocument()
    document.setHtml(label.text())
    return document.toPlainText()


def test_an_answer_reveals_the_live_tensor_and_says_why_each_option_is_wrong(qtbot, make_window):
    window = make_window()
    run_and_wait(qtbot, window, max_tokens=1)
    window.session.show_step(None)
    learn = window.view("learn")
    learn.enabled.setChecked(True)
    window.session.set_node(block_hook_name(0, "norm1"))
    q = learn.question
    wrong = (q.answer + 1) % len(q.options)
    assert window.session.covered and learn.answer(wrong) is False
    shown = rendered(learn.feedback)  # as the label draws it
    assert shown.startswith("Not quite") and "&#" not in shown and "&amp;" not in shown
    assert ("token's" in shown) == ("token's" in q.feedback(wrong))
    assert not window.session.covered
    # revealed with the live numbers: the inspector shows the shape the question asked
    window.session.set_node(block_hook_name(0, "ff.layers.0"))
    while not learn.question.text.startswith("What shape"):
        learn.answer(learn.question.answer)
        learn.next_button.click()
    q = learn.question
    assert window.front_dock() is window.docks["learn"]  # the question came to the front
    # the feed-forward's frame says its widening; under a question about its width it says
    # it masked
    title = window.graph.items[block_hook_name(0, "ff")].text.text()
    assert title.startswith("Feed-forward · ") and "4×" not in title and "▒" in title
    assert learn.answer(q.answer) is True
    window.show_view("inspector")  # the user looks at the revealed tensor
    qtbot.waitUntil(lambda: f"shape <b>{q.options[q.answer]}</b>" in window.view("inspector").title.text(),
                    timeout=60_000)
    # the graph keeps its shapes off while Learn mode is on: the next question may ask one
    assert window.graph.edge_labels[block_hook_name(0, "ff.layers.0")].text() == ""
    asked = learn.score.asked
    assert learn.score_label.text() == f"Score since the window opened: {learn.score.right} of {asked}"
    learn.enabled.setChecked(False)
    assert not window.session.covered


def test_learn_mode_asks_nothing_before_a_pass(qtbot, make_window):
    window = make_window()
    window.view("learn").enabled.setChecked(True)
    window.session.set_node(block_hook_name(0, "norm1"))
    assert window.view("learn").question is None and "Run a prompt first" in window.view("learn").prompt.text()
    assert not window.session.covered


def test_a_pattern_that_cannot_come_says_why_and_covers_nothing(qtbot, make_window):
    """Another block's pattern is made from the input the pass kept; when that input is
    not there (over the memory budget), Learn says so instead of waiting, covered, for a
    question that will not come."""
    window = make_window()
    run_and_wait(qtbot, window, max_tokens=1)
    session = window.session
    session.show_step(None)
    del session.prompt.views[block_hook_name(1, "norm1")]  # as if over the budget
    learn = window.view("learn")
    learn.enabled.setChecked(True)
    session.set_node(block_hook_name(1, "att.attn_weights"))
    assert learn.question is None
    assert "trf_blocks.1.norm1 was not kept in full" in learn.prompt.text()
    assert not session.covered


@pytest.mark.slow
@pytest.mark.parametrize("position", ["pre", "post"])
def test_every_nodes_shape_answer_is_the_inspectors_shape(qtbot, make_window, tmp_path, position):
    """For every node of a Pre-LN and a Post-LN model: the shape question's answer is
    the shape the inspector shows once it is revealed."""
    from explorer.core.weights.checkpoints import save_checkpoint
    from explorer.core.gpt.config import preset
    from explorer.core.gpt.build import build_model

    path = save_checkpoint(build_model(preset("tiny", norm_position=position)),
                           tmp_path / f"{position}.safetensors")
    window = make_window(preset=None, checkpoint=str(path))
    run_and_wait(qtbot, window, max_tokens=1)
    window.session.show_step(None)
    window.workspaces.show("learn")
    window.workspaces.open_here("inspector")  # the inspector beside the questions
    learn = window.view("learn")
    learn.enabled.setChecked(True)
    for name in all_hook_names(window.session.model.config):
        window.session.set_node(name)
        assert window.workspaces.current == "learn"
        # another block's pattern is made when its block is shown: everything covered till then
        assert learn.question is not None or window.session.covered.kinds == frozenset(KINDS)
        qtbot.waitUntil(lambda: learn.question is not None, timeout=60_000)
        for _ in range(4):  # the shape question comes round within a node's questions
            if learn.question.text.startswith("What shape"):
                break
            learn.answer(learn.question.answer)
            learn.next_button.click()
        q = learn.question
        assert q.text.startswith("What shape"), name
        assert learn.answer(q.answer)
        window.show_view("inspector")  # the user looks at the revealed tensor
        qtbot.waitUntil(lambda: f"shape <b>{q.options[q.answer]}</b>" in
                        window.view("inspector").title.text(), timeout=60_000)


def test_learn_mode_hides_every_shape_and_a_question_hides_the_colours(qtbot, make_window):
    """A shape seen between questions answers the next shape question, and during the
    dropout question a Dropout node coloured like attention tells that it changed
    nothing: Learn mode keeps the shapes off the graph, a question its colours."""
    window = make_window()
    run_and_wait(qtbot, window, max_tokens=1)
    window.session.show_step(None)
    graph = window.graph
    coloured = {n: i.brush().color().name() for n, i in graph.items.items()}
    assert len(set(coloured.values())) > 2 and all(l.text() for l in graph.edge_labels.values())
    window.view("learn").enabled.setChecked(True)
    window.session.set_node(block_hook_name(0, "drop1"))  # the dropout question
    assert window.view("learn").question is not None and window.session.covered
    assert all(l.text() == "" for l in graph.edge_labels.values())
    assert {i.brush().color().name() for i in graph.items.values()} == {"#e8e8e8"}
    assert graph.scale.legend.text() == "Colours hidden until you answer"
    strip = graph.scale.strip  # the blocks' strip says nothing either
    assert strip._values() == [None] * window.session.model.config.n_layers
    window.view("learn").answer(window.view("learn").question.answer)  # answered: colours back, shapes not
    assert len({i.brush().color().name() for i in graph.items.values()}) > 2
    assert all(v is not None for v in strip._values())
    assert all(l.text() == "" for l in graph.edge_labels.values())
    window.view("learn").enabled.setChecked(False)
    assert all(l.text() for l in graph.edge_labels.values())


def test_an_order_question_hides_the_order_from_the_title_and_the_model_line(qtbot, make_window):
    window = make_window(preset="tiny", norm_position="post")
    assert "Post-LN" in window.windowTitle() and "Post-LN" in window.model_label.text()
    run_and_wait(qtbot, window, max_tokens=1)
    window.session.show_step(None)
    window.view("learn").enabled.setChecked(True)
    window.session.set_node("drop_emb")  # a block's input: which operation touches x first?
    q = window.view("learn").question
    assert q.text.startswith("Which operation touches") and ORDER in q.hides
    assert "Post-LN" not in window.windowTitle() and "Post-LN" not in window.model_label.text()
    window.view("learn").answer(q.answer)
    assert "Post-LN" in window.windowTitle() and "Post-LN" in window.model_label.text()


def test_a_new_model_asks_the_open_question_again_with_its_options_and_covers_held(qtbot):
    """A new snapshot (Follow training) loaded while a question is open: the options are
    not wiped with the question left standing; it is covered until the prompt has run on
    the new model, then the same question is asked again on its numbers with every
    option (not the node's next question)."""
    from explorer.core.sources import ModelInfo, ModelSpec, random_model
    from explorer.ui.views.learn.learn_view import LearnView
    from tests.ui.alone import Alone
    alone = Alone(qtbot)
    alone.run(max_tokens=1)
    alone.session.show_step(None)
    learn = alone.view(LearnView)
    learn.enabled.setChecked(True)
    name = block_hook_name(1, "norm2")
    alone.session.set_node(name)
    assert learn.question is not None
    options, text = len(learn.question.options), learn.question.text
    other = random_model("tiny", seed=5)  # the next snapshot, say
    alone.session.set_model(ModelInfo.of(other, ModelSpec(preset="tiny", seed=5)))
    assert learn.question is None and alone.session.covered  # still covered
    assert "the question comes again" in learn.prompt.text()
    alone.loaded = alone.engine.loaded = other
    alone.run(max_tokens=1)
    alone.session.show_step(None)
    alone.settle()
    assert learn.question is not None and alone.session.node == name
    shown = [b for b in learn.buttons if b.isVisible()]
    assert len(shown) == len(learn.question.options) == options and alone.session.covered
    assert learn.question.text == text  # the same question, not the node's next one
    learn.next_button.click()  # the next one is asked for
    assert learn.question.text != text
