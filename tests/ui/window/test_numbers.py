"""No stale or impossible figure: a generation rate only once it is measured, a Range box
that says what the histogram shows, results cleared with the prompt or the list they
came from, and honest words where numbers look meaningful and are not."""

from dataclasses import replace

import pytest

from explorer.core.weights.checkpoints import save_checkpoint
from explorer.core.gpt.config import preset
from explorer.core.experiments.interventions import Intervention
from explorer.core.gpt.build import build_model
from explorer.ui.plots.histogram import FIXED_RANGE
from explorer.ui.views.learn.ln_compare_view import twin_words
from explorer.ui.base.runs import RATE_SECONDS, Runs
from explorer.ui.base.session import Session
from tests.ui.alone import Alone
from tests.ui.conftest import run_and_wait, wait_rerun


@pytest.mark.parametrize("times,shown", [
    ([0.10, 0.1003, 0.1006, 0.1009, 0.1012, 0.1015, 0.1018], None),  # 6 tokens in 1.8 ms
    ([0.1, 0.4, 0.7, 1.0], "4 tokens, 3.3 tok/s"),
    ([0.1, 0.5, 1.2], None),  # two intervals: not yet
])
def test_a_rate_is_shown_only_once_it_is_measured(times, shown):
    runs = Runs(Session(), None)
    runs._step_times = list(times)
    text = runs._rate()
    assert text == (shown or f"{len(times)} tokens")
    assert ("tok/s" in text) == (len(times) - 1 >= 3 and times[-1] - times[0] >= RATE_SECONDS)


def test_the_range_box_always_says_what_the_histogram_shows(qtbot):
    alone = Alone(qtbot)
    alone.run()
    inspector = alone.inspector
    box = inspector.range_box
    assert box.isEnabled() and box.currentText() == "this tensor's range"
    # a node of this pass that kept only its statistics: the histogram can only be fixed
    name = "trf_blocks.1.norm2"
    current = alone.session.current
    current.views[name] = replace(current.views[name], array=None)
    alone.session.set_node(name)
    alone.settle()
    assert box.currentText() == FIXED_RANGE and not box.isEnabled()
    assert "fixed" in inspector.histogram.plot.titleLabel.text
    alone.session.set_node("trf_blocks.0.norm1")  # a kept tensor: the user's choice is back
    alone.settle()
    assert box.isEnabled() and box.currentText() == "this tensor's range"


def test_clear_and_a_new_prompt_clear_every_result_of_the_old_one(qtbot, make_window):
    window = make_window()
    session, whatif, divergence = window.session, window.view("whatif"), window.view("divergence")
    run_and_wait(qtbot, window, max_tokens=2)
    session.set_interventions([Intervention("zero", "trf_blocks.1.att")], on=True)
    wait_rerun(qtbot, window)
    whatif.request_comparison()
    qtbot.waitUntil(lambda: whatif.comparison is not None, timeout=60_000)
    assert "clean:" in whatif.message.text() and whatif.table.rowCount() > 0
    whatif.clear()  # Clear: the list, and what was computed with it
    assert whatif.comparison is None and whatif.table.rowCount() == 0
    assert "clean:" not in whatif.message.text()
    wait_rerun(qtbot, window)
    # the divergence table and the comparison belong to their prompt
    session.set_interventions([Intervention("zero", "trf_blocks.1.att")], on=True)
    wait_rerun(qtbot, window)
    whatif.request_comparison()
    divergence.kind.setCurrentIndex(divergence.kind.findData("relu"))
    divergence.request()
    qtbot.waitUntil(lambda: whatif.comparison is not None and divergence.result is not None,
                    timeout=60_000)
    assert divergence.table.rowCount() > 0 and session.mark
    window.prompt.prompt.setPlainText("A different prompt altogether")
    run_and_wait(qtbot, window, max_tokens=1)
    assert whatif.comparison is None and whatif.table.rowCount() == 0
    assert "clean:" not in whatif.message.text()
    assert divergence.result is None and divergence.table.rowCount() == 0 and session.mark == ""
    assert "Run a prompt, choose a change" in divergence.summary.text()


def test_a_twin_of_trained_weights_says_which_order_they_were_trained_for(qtbot, make_window, tmp_path):
    class Run:
        top_pieces, top_probs = (" you",), (0.686,)

    class Info:
        trained, config = True, preset("tiny")

    words = twin_words({"pre": Run(), "post": Run()}, Info())
    pre, post = words.split("<br>")
    assert "trained for" not in pre
    assert "trained for Pre-LN, run in Post-LN order" in post and "' you' 0.686" in post
    Info.trained = False  # random weights: neither order was trained, nothing to say
    assert "trained for" not in twin_words({"pre": Run(), "post": Run()}, Info())
    # in the window, with a checkpoint (a trained model as far as the window knows)
    path = save_checkpoint(build_model(preset("tiny")), tmp_path / "m.safetensors")
    window = make_window(preset=None, checkpoint=str(path))
    assert window.session.model.trained
    run_and_wait(qtbot, window, max_tokens=1)
    window.view("ln_compare")._compare()
    qtbot.waitUntil(lambda: bool(window.view("ln_compare").runs), timeout=60_000)
    assert "trained for Pre-LN, run in Post-LN order" in window.view("ln_compare").top_label.text()


def test_learn_mode_brings_its_question_to_the_front(qtbot, make_window):
    window = make_window()
    run_and_wait(qtbot, window, max_tokens=1)
    window.show_view("inspector")
    window.view("learn").enabled.setChecked(True)
    window.session.set_node("trf_blocks.0.ff.layers.1")
    qtbot.waitUntil(lambda: window.front_dock() is window.docks["learn"], timeout=60_000)
    assert window.view("learn").question is not None


def test_explain_shows_the_nodes_formula_worked_with_the_last_tokens_numbers(qtbot):
    alone = Alone(qtbot)
    alone.run()
    view = alone.explain
    for name, formula in (("trf_blocks.0.norm1", "y = (x − mean) / √(var + eps) · scale + shift"),
                          ("trf_blocks.1.ff.layers.1", "GELU(x) = 0.5·x·(1 + tanh("),
                          ("trf_blocks.0.att", "softmax(queries·keysᵀ / √head_dim + mask)")):
        alone.session.set_node(name)
        alone.settle()
        qtbot.waitUntil(lambda: "equal to the captured output" in view.text.text(), timeout=60_000)
        text = view.text.text()
        assert formula.replace("·", "·") in text.replace("&amp;", "&"), name
        assert "token &#x27; you&#x27; at position 3" in text or "token ' you' at position 3" in text
    alone.session.show_step(1)  # a step from the KV cache: one position only
    alone.settle()
    assert "needs the whole pass" in view.text.text()


def test_words_come_from_the_models_own_order(qtbot, make_window, tmp_path):
    """A Post-LN model's inspector and Explain say where its norms really are, the
    embedding sum is not called a residual connection, the head names its token, and a
    generated step says which token went in and which came out."""
    path = save_checkpoint(build_model(preset("tiny", norm_position="post")), tmp_path / "p.safetensors")
    window = make_window(preset=None, checkpoint=str(path))
    run_and_wait(qtbot, window, max_tokens=2)
    window.session.show_step(None)
    window.show_view("inspector")
    window.session.set_node("trf_blocks.0.norm1")
    qtbot.waitUntil(lambda: "first add's output" in window.view("inspector").title.text(), timeout=60_000)
    assert "before attention" not in window.view("inspector").title.text()
    window.session.set_node("trf_blocks.1.add2")
    qtbot.waitUntil(lambda: "LayerNorm 1's output (norm1)" in window.view("inspector").title.text(), timeout=60_000)
    window.show_view("explain")
    for name, said, unsaid in (("emb_add", "no branch and no shortcut", "residual connection"),
                               ("trf_blocks.0.att", "block's input (Post-LN", "LayerNorm 1's output"),
                               ("trf_blocks.0.drop2", "second of its two uses", "first of its")):
        window.session.set_node(name)
        qtbot.waitUntil(lambda: said in shown(window), timeout=60_000)
        assert unsaid not in shown(window), name
    window.session.set_node("out_head")
    qtbot.waitUntil(lambda: "highest score is for" in shown(window), timeout=60_000)
    assert "(id " in shown(window)
    window.session.show_step(1)
    steps = window.session.steps
    qtbot.waitUntil(lambda: "Step 1. Input" in shown(window), timeout=60_000)
    from explorer.core.gpt.tokenizer import token_piece
    assert f"Input {token_piece(steps[0].token_id)!r} → chose {token_piece(steps[1].token_id)!r}" \
        in shown(window)


def shown(window) -> str:
    """The Explain tab's text as read (tags and escapes gone)."""
    import html
    import re
    return html.unescape(re.sub(r"<[^>]+>", "", window.view("explain").text.text()))
