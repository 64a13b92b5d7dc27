"""The prompt panel: Ctrl+Enter generates token by token, Stop, the prompt's tokens as
chips, remembered settings, one forward per run, the context's limits."""

from PySide6.QtCore import Qt
from PySide6.QtTest import QTest
from explorer.core.gpt.tokenizer import encode, token_piece
from tests.ui.conftest import run_and_wait


def test_ctrl_enter_generates_token_by_token_and_steps_are_clickable(qtbot, make_window):
    window = make_window()
    window.prompt.max_tokens.setValue(6)
    QTest.keyClick(window.prompt.prompt, Qt.Key_Return, Qt.ControlModifier)
    qtbot.waitUntil(lambda: not window.running and bool(window.session.steps), timeout=60_000)
    steps = window.session.steps
    assert len(steps) == 6 and [s.step for s in steps] == list(range(6))
    assert window.prompt.output_count() == 7  # the prompt pass + 6 tokens
    shown = window.prompt.output.toPlainText()
    assert "prompt (4 tokens)" in shown
    assert all(token_piece(s.token_id).replace(" ", "·") in shown for s in steps)
    status = window.status_text.text()  # a rate only when measured long enough
    times = [s.seconds for s in steps]
    assert ("tok/s" in status) == (times[-1] - times[0] >= 0.5)
    # the prompt pass: every node of the prompt, full tensors
    prompt = window.session.prompt
    assert prompt.ids == encode("Every effort moves you")
    assert prompt.views["trf_blocks.1.ff.layers.1"].array.shape == (1, 4, 128)
    # click step 3: the views show that position's vectors
    from PySide6.QtCore import QUrl
    window.prompt.output.anchorClicked.emit(QUrl("3"))  # a click on the 4th token
    assert window.session.current is steps[3] and window.prompt.selected == 3
    window.session.set_node("trf_blocks.1.add2")
    assert "(1, 1, 32)" in window.view("inspector").title.text()
    assert "generation step 3" in window.view("inspector").title.text()


def test_stop_ends_generation_before_the_next_token(qtbot, make_window):
    window = make_window()
    window.prompt.max_tokens.setValue(1000)
    window.prompt.request_run()
    qtbot.waitUntil(lambda: len(window.session.steps) >= 2, timeout=60_000)
    QTest.keyClick(window, Qt.Key_Escape)
    qtbot.waitUntil(lambda: not window.running, timeout=60_000)
    assert len(window.session.steps) < 1000
    assert "stopped by you" in window.status_text.text()
    assert window.prompt.generate_button.isEnabled()


def test_empty_prompt_is_refused_in_the_panel(make_window):
    window = make_window()
    window.prompt.prompt.setPlainText("   ")
    window.prompt.request_run()
    assert not window.running and "empty" in window.prompt.token_count.text()


def test_prompt_tokens_show_live_as_chips(qtbot, make_window):
    window = make_window()
    window.prompt.prompt.setPlainText("Hello world")
    qtbot.waitUntil(lambda: window.prompt.token_ids == [15496, 995], timeout=60_000)
    shown = window.prompt.chips.toPlainText()
    assert "Hello" in shown and "15496" in shown and "·world" in shown and "995" in shown
    assert window.prompt.token_count.text().startswith("2 tokens")


def test_settings_are_remembered(qtbot, make_window, tmp_path):
    window = make_window()
    window.prompt.prompt.setPlainText("Remember me")
    run_and_wait(qtbot, window, max_tokens=3)
    window.close()
    from PySide6.QtCore import QSettings
    settings = QSettings(str(tmp_path / "settings0.ini"), QSettings.IniFormat)
    assert settings.value("generation/prompt") == "Remember me"
    assert int(settings.value("generation/max_new_tokens")) == 3
    assert settings.value("model/spec")["preset"] == "tiny"


def test_invisible_token_pieces_are_shown_by_their_code():
    from explorer.ui.widgets.token_chips import visible as _visible
    assert _visible(" you") == "·you" and _visible("\n") == "⏎" and _visible("é") == "é"
    assert _visible("\u200b") == "\\u200b" and _visible("\x0c") == "\\u000c"


def test_a_prompt_runs_through_the_model_once_per_run(qtbot, make_window):
    """The prompt pass the views show is generation's prefill: one forward of the
    prompt, then one token a step."""
    window = make_window()
    qtbot.waitUntil(lambda: window.engine.loaded is not None, timeout=60_000)
    calls = []
    model = window.engine.loaded.model
    handle = model.register_forward_pre_hook(lambda m, inputs: calls.append(inputs[0].shape[1]))
    try:
        run_and_wait(qtbot, window, max_tokens=3)
    finally:
        handle.remove()
    assert calls == [len(window.session.prompt.ids), 1, 1]
    assert len(window.session.steps) == 3


def test_a_prompt_that_fills_the_context_leaves_room_or_says_it_will_be_slow(qtbot, make_window):
    """tiny's context is 64: 70 tokens and 10 new ones."""
    window = make_window()
    panel = window.prompt
    panel.prompt.setPlainText(" a" * 70)
    panel.max_tokens.setValue(10)
    assert panel.leave_room.isChecked()  # the default: the KV cache keeps working
    qtbot.waitUntil(lambda: "the last 54 run<" in panel.token_count.text(), timeout=60_000)
    assert panel.token_count.text().startswith("70 tokens — ")
    assert panel.token_count.toolTip() == ("The first 16 were dropped to leave room for 10 "
                                           "new tokens (context 64)")
    assert len(panel.token_ids) == 70
    run_and_wait(qtbot, window, max_tokens=10)
    assert len(window.session.prompt.ids) == 54 and len(window.session.steps) == 10
    assert "the first 16 were dropped" in window.status_text.text()
    assert window.status_text.toolTip() == window.status_text.text()  # whole, when cut
    panel.leave_room.setChecked(False)
    qtbot.waitUntil(lambda: "the last 64 run; slow after 0 new<" in panel.token_count.text(),
                    timeout=60_000)
    assert "the context is full after 0 new tokens" in panel.token_count.toolTip()
    run_and_wait(qtbot, window, max_tokens=10)
    assert len(window.session.prompt.ids) == 64 and len(window.session.steps) == 10
    assert window.prompt.settings().leave_room is False


def test_recompute_the_whole_context_shows_the_growing_t(qtbot, make_window):
    window = make_window()
    window.prompt.prompt.setPlainText("Every effort moves you")
    run_and_wait(qtbot, window, max_tokens=3)
    session = window.session
    session.show_step(1)  # from the KV cache: one position; its pattern comes on opening
    session.set_node("trf_blocks.0.att.attn_weights")
    assert "computed when attention is opened" in window.view("inspector").title.text()
    window.graph.open_att.setChecked(True)  # step 1's query against the prompt's 4 keys and its own
    qtbot.waitUntil(lambda: "trf_blocks.0.att.attn_weights" in session.current.views, timeout=60_000)
    assert session.current.views["trf_blocks.0.att.attn_weights"].shape == (1, 4, 1, 5)
    window.graph.open_att.setChecked(False)
    session.set_node("trf_blocks.0.ff")
    window.view("explain").redraw()
    assert "the KV cache keeps every earlier position's keys and values" in window.view("explain").text.text()
    qtbot.waitUntil(lambda: window.graph.edge_labels["trf_blocks.0.ff.layers.2"].text() == "(1, 1, 32)",
                    timeout=60_000)
    window.prompt.settings_box.recompute.setChecked(True)
    run_and_wait(qtbot, window, max_tokens=3)
    assert "each step keeps at most" in session.status  # the run's memory bound, said
    session.show_step(2)  # the book's generate_text_simple: (1, 4 + 2, C)
    qtbot.waitUntil(lambda: window.graph.edge_labels["trf_blocks.0.ff.layers.2"].text() == "(1, 6, 32)",
                    timeout=60_000)
    session.set_node("trf_blocks.0.att.attn_weights")
    assert "shape <b>(1, 4, 6, 6)</b>" in window.view("inspector").title.text()
    window.view("explain").redraw()
    assert "The whole context ran again, 6 positions" in window.view("explain").text.text()
