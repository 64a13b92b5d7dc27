"""The desktop app, driven as a user would: keys, clicks, and what each shows."""

import numpy as np
import pytest
import torch
from PySide6.QtCore import QPointF, Qt
from PySide6.QtTest import QTest

from explorer.core.run.capture import Capture
from explorer.core.gpt.config import preset
from explorer.core.gpt.model import build_model
from explorer.core.gpt.nodes import (MODEL_NODES_AFTER, MODEL_NODES_BEFORE, block_hook_name,
                                     block_input, block_nodes)
from explorer.core.gpt.tokenizer import encode, token_piece
from explorer.ui.views.inspector_view import STAT_ROWS
from explorer.ui.widgets.values_table import ValuesModel
from tests.ui.conftest import run_and_wait


def expected_graph_names(cfg, layer, expand=True, caps=False):
    """What the graph draws: the block's nodes and its input; the embeddings before it
    and the final norm and head after it once their caps are unfolded."""
    names = {block_hook_name(layer, n.key) for n in block_nodes(cfg.norm_position)
             if expand or not n.in_ffn}
    names.add(block_input(layer, cfg.norm_position))
    if caps:
        names |= {n.key for n in MODEL_NODES_BEFORE + MODEL_NODES_AFTER}
    return names


def chain(graph, start):
    """The nodes the arrows lead through from ``start`` (the pattern's chip aside)."""
    out, name = [], start
    while True:
        nxt = [e.target for e in graph.edges.get(name, []) if e.target and not e.dashed]
        if not nxt:
            return out
        name = nxt[0]
        out.append(name)


def test_graph_is_built_from_the_node_table(make_window):
    window = make_window()
    cfg = window.session.model.config
    assert set(window.graph.items) == expected_graph_names(cfg, 0)
    window.graph.expand_ff.setChecked(False)
    assert set(window.graph.items) == expected_graph_names(cfg, 0, expand=False)
    window.graph.toggle_cap("before")
    window.graph.toggle_cap("after")
    assert set(window.graph.items) == expected_graph_names(cfg, 0, expand=False, caps=True)
    assert "UNTRAINED" in window.model_label.text()


def test_post_ln_model_is_drawn_in_post_ln_order(make_window, tmp_path):
    from explorer.core.weights.checkpoints import save_checkpoint
    path = save_checkpoint(build_model(preset("tiny", norm_position="post")),
                           tmp_path / "post.safetensors")
    window = make_window(preset=None, checkpoint=str(path))
    assert window.session.model.config.norm_position == "post"
    for layer in (0, 1):
        window.session.set_layer(layer)
        steps = chain(window.graph, block_input(layer, "post"))
        assert [name.split(".", 2)[2] for name in steps] == [
            n.key for n in block_nodes("post") if n.kind not in ("pattern", "ffn")]


def test_the_feed_forward_frames_its_layers_and_the_block_is_one_of_n(qtbot, make_window):
    window = make_window()
    graph = window.graph
    frame = graph.items["trf_blocks.0.ff"]
    for key in ("ff.layers.0", "ff.layers.1", "ff.layers.2"):
        assert frame.sceneBoundingRect().contains(graph.items[f"trf_blocks.0.{key}"].sceneBoundingRect())
    assert frame.zValue() < graph.items["trf_blocks.0.ff.layers.1"].zValue()
    assert "trf_blocks.0.ff" not in graph.edge_labels  # no arrow into or out of it as a step
    n = window.session.model.config.n_layers
    assert graph.block_count.text() == f"× {n}"
    assert graph.texts["title"].text() == f"Block 1 of {n} · trf_blocks.0 · Pre-LN"
    assert graph.texts["cap-after"].text() == "▸ block 2, final norm, output head"
    assert graph.texts["cap-before"].text() == "▸ Token + position embeddings"
    assert graph.strip.caption.text().startswith(f"All {n} blocks")
    window.session.set_layer(1)
    assert graph.texts["cap-before"].text() == "▸ Token + position embeddings, block 1"
    assert graph.texts["cap-after"].text() == "▸ final norm, output head"
    frame = graph.items["trf_blocks.1.ff"]  # a click on its title selects the feed-forward
    QTest.mouseClick(graph.view.viewport(), Qt.LeftButton, Qt.NoModifier,
                     graph.view.mapFromScene(frame.mapToScene(frame.text.pos() + QPointF(4, 6))))
    assert window.session.node == "trf_blocks.1.ff"
    graph.expand_ff.setChecked(False)  # folded, the feed-forward is one step again
    assert "trf_blocks.1.ff" in graph.edge_labels
    pre = make_window()
    assert [name.split(".", 2)[2] for name in chain(pre.graph, "drop_emb")] == [
        n.key for n in block_nodes("pre") if n.kind not in ("pattern", "ffn")]


def test_ctrl_enter_generates_token_by_token_and_steps_are_clickable(qtbot, make_window):
    window = make_window()
    window.generation.max_tokens.setValue(6)
    QTest.keyClick(window.generation.prompt, Qt.Key_Return, Qt.ControlModifier)
    qtbot.waitUntil(lambda: not window.running and bool(window.session.steps), timeout=60_000)
    steps = window.session.steps
    assert len(steps) == 6 and [s.step for s in steps] == list(range(6))
    assert window.generation.output_count() == 7  # the prompt pass + 6 tokens
    shown = window.generation.output.toPlainText()
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
    window.generation.output.anchorClicked.emit(QUrl("3"))  # a click on the 4th token
    assert window.session.current is steps[3] and window.generation.selected == 3
    window.session.set_node("trf_blocks.1.add2")
    assert "(1, 1, 32)" in window.inspector.title.text()
    assert "generation step 3" in window.inspector.title.text()


def test_clicking_a_node_shows_its_real_statistics(qtbot, make_window):
    window = make_window()
    run_and_wait(qtbot, window, max_tokens=1)
    window.session.show_step(None)  # the prompt pass
    item = window.graph.items["trf_blocks.0.norm2"]
    view = window.graph.view
    pos = view.mapFromScene(item.scenePos())
    view.ensureVisible(item)
    pos = view.mapFromScene(item.scenePos())
    QTest.mouseClick(view.viewport(), Qt.LeftButton, Qt.NoModifier, pos)
    assert window.session.node == "trf_blocks.0.norm2"
    assert "trf_blocks.0.norm2" in window.inspector.title.text()
    assert "(1, 4, 32)" in window.inspector.title.text()
    # the same model, run directly through the core, gives the same numbers
    model = build_model(preset("tiny"), seed=0)
    with torch.inference_mode(), Capture(model, "trf_blocks.0.norm2") as cap:
        model(torch.tensor([encode("Every effort moves you")]))
    shown = {window.inspector.stats_table.item(r, 0).text(): window.inspector.stats_table.item(r, 1).text()
             for r in range(len(STAT_ROWS))}
    assert float(shown["std"]) == pytest.approx(cap["trf_blocks.0.norm2"].stats.std, rel=1e-4)
    assert float(shown["mean"]) == pytest.approx(cap["trf_blocks.0.norm2"].stats.mean, abs=1e-5)
    assert window.graph.items["trf_blocks.0.norm2"].pen().width() == 4  # highlighted


def test_stop_ends_generation_before_the_next_token(qtbot, make_window):
    window = make_window()
    window.generation.max_tokens.setValue(1000)
    window.generation.request_run()
    qtbot.waitUntil(lambda: len(window.session.steps) >= 2, timeout=60_000)
    QTest.keyClick(window, Qt.Key_Escape)
    qtbot.waitUntil(lambda: not window.running, timeout=60_000)
    assert len(window.session.steps) < 1000
    assert "stopped by you" in window.status_text.text()
    assert window.generation.generate_button.isEnabled()


def test_layer_keys_and_strip_change_the_block(qtbot, make_window):
    window = make_window()
    window.graph.view.setFocus()
    QTest.keyClick(window.graph, Qt.Key_Down)
    assert window.session.layer == 1
    assert "trf_blocks.1.add2" in window.graph.items and "trf_blocks.0.norm1" not in window.graph.items
    assert "trf_blocks.0.add2" in window.graph.items  # block 1's output, the input drawn
    QTest.keyClick(window.graph, Qt.Key_Up)
    assert window.session.layer == 0
    strip = window.graph.strip
    QTest.mouseClick(strip, Qt.LeftButton, Qt.NoModifier, strip.rect().topRight() + type(strip.rect().topRight())(-2, 5))
    assert window.session.layer == 1


def test_a_bad_checkpoint_keeps_the_previous_model(qtbot, make_window, warnings, tmp_path):
    window = make_window()
    before = window.session.model
    bad = tmp_path / "page.bin"
    bad.write_text("<!DOCTYPE html><html>Sign in</html>")
    from explorer.core.sources import ModelSpec
    window.load_model(ModelSpec(checkpoint=str(bad)))
    qtbot.waitUntil(lambda: bool(warnings), timeout=30_000)
    assert "HTML" in warnings[0][1] and str(bad) in warnings[0][1]
    assert window.session.model is before and "(kept)" in window.model_label.text()
    run_and_wait(qtbot, window, max_tokens=2)  # still usable
    assert len(window.session.steps) == 2


def test_empty_prompt_is_refused_in_the_panel(make_window):
    window = make_window()
    window.generation.prompt.setPlainText("   ")
    window.generation.request_run()
    assert not window.running and "empty" in window.generation.token_count.text()


def test_prompt_tokens_show_live_as_chips(qtbot, make_window):
    window = make_window()
    window.generation.prompt.setPlainText("Hello world")
    qtbot.waitUntil(lambda: window.generation.token_ids == [15496, 995], timeout=5_000)
    shown = window.generation.chips.toPlainText()
    assert "Hello" in shown and "15496" in shown and "·world" in shown and "995" in shown
    assert window.generation.token_count.text().startswith("2 tokens")


def test_settings_are_remembered(qtbot, make_window, tmp_path):
    window = make_window()
    window.generation.prompt.setPlainText("Remember me")
    run_and_wait(qtbot, window, max_tokens=3)
    window.close()
    from PySide6.QtCore import QSettings
    settings = QSettings(str(tmp_path / "settings0.ini"), QSettings.IniFormat)
    assert settings.value("generation/prompt") == "Remember me"
    assert int(settings.value("generation/max_new_tokens")) == 3
    assert settings.value("model/spec")["preset"] == "tiny"


def test_values_table_is_lazy_for_large_tensors():
    model = ValuesModel()
    matrix = np.arange(1024 * 3072, dtype=np.float32).reshape(1024, 3072)
    model.set_matrix(matrix, [str(i) for i in range(1024)])
    assert (model.rowCount(), model.columnCount()) == (1024, 3072)
    assert model.data(model.index(1023, 3071)) == f"{1024 * 3072 - 1:.4g}"


def test_many_qt_calls_do_not_crash_this_pyside():
    # PySide6 6.12.0 aborts Python 3.11 ("none_dealloc") after a few thousand calls.
    from PySide6.QtCore import QObject
    obj = QObject()
    for i in range(30_000):
        obj.setObjectName(f"n{i % 7}")
    assert obj.objectName() == f"n{29_999 % 7}"


def test_clicking_every_node_shows_its_hook_name_and_shape(qtbot, make_window):
    window = make_window()
    run_and_wait(qtbot, window, max_tokens=1)
    window.session.show_step(None)
    view = window.graph.view
    for layer in (0, 1):
        window.session.set_layer(layer)
        window.graph.toggle_cap("before")  # the embeddings, the final norm and the head too
        window.graph.toggle_cap("after")
        for name in list(window.graph.items):
            window.session.set_layer(layer)  # the input (the block before's output) moves on
            item = window.graph.items[name]
            view.ensureVisible(item, 5, 5)
            where = item.mapToScene(item.text.pos() + QPointF(4, 6))  # a frame by its title
            QTest.mouseClick(view.viewport(), Qt.LeftButton, Qt.NoModifier, view.mapFromScene(where))
            assert window.session.node == name
            shape = str(window.session.prompt.views[name].shape)
            title = window.inspector.title.text()
            assert f"<b>{name}</b>" in title and shape in title, (name, title)
        window.graph.toggle_cap("before")
        window.graph.toggle_cap("after")
    assert window.session.layer == 1


def test_screenshot_command_renders_the_window(tmp_path, monkeypatch):
    from PySide6.QtGui import QImage
    from explorer.ui.window import app
    from explorer.core.sources import ModelSpec
    out = tmp_path / "shot.png"
    code = app.screenshot(str(out), ModelSpec(preset="tiny"), prompt="Hello world",
                          node="trf_blocks.1.ff.layers.1", max_new_tokens=3)
    assert code == 0
    image = QImage(str(out))
    assert image.width() == 1600 and image.height() == 1000
    assert app.screenshot(str(tmp_path / "x.png"), ModelSpec(preset="tiny"), node="nope") == 2


def test_model_dialog_returns_the_chosen_spec(qtbot, tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "empty-cache"))
    from explorer.ui.window.model_dialog import ModelDialog
    dialog = ModelDialog()
    qtbot.addWidget(dialog)
    assert not dialog.use_cache.isEnabled() and dialog.use_preset.isChecked()
    assert [dialog.device_box.itemText(i) for i in range(dialog.device_box.count())][0] == "cpu"
    dialog.preset_box.setCurrentText("gpt2-medium")
    dialog.norm_box.setCurrentIndex(1)
    dialog.seed.setValue(7)
    dialog.dtype_box.setCurrentText("bfloat16")
    spec = dialog.spec()
    assert (spec.preset, spec.norm_position, spec.seed, spec.dtype, spec.device) == (
        "gpt2-medium", "post", 7, "bfloat16", "cpu")
    dialog.use_file.setChecked(True)
    dialog.path.setText(" /models/mine.safetensors ")
    assert dialog.spec().checkpoint == "/models/mine.safetensors"


def test_window_title_says_which_model_and_whether_trained(make_window):
    window = make_window(norm_position="post")
    assert "tiny" in window.windowTitle() and "Post-LN" in window.windowTitle()
    assert "UNTRAINED" in window.windowTitle()


def test_invisible_token_pieces_are_shown_by_their_code():
    from explorer.ui.widgets.token_chips import visible as _visible
    assert _visible(" you") == "·you" and _visible("\n") == "⏎" and _visible("é") == "é"
    assert _visible("\u200b") == "\\u200b" and _visible("\x0c") == "\\u000c"


def test_replaced_passes_are_freed_by_the_engine_not_the_gui(qtbot, make_window):
    """A new pass retires the old one to the engine, which empties it once the views
    have drawn the new one (freeing a big pass on the GUI thread blocks it ~60 ms)."""
    window = make_window()
    run_and_wait(qtbot, window, max_tokens=2)
    old = window.session.prompt
    old_steps = list(window.session.steps)
    assert old.views and old_steps[0].views
    run_and_wait(qtbot, window, max_tokens=1)
    assert window.session.prompt is not old
    qtbot.waitUntil(lambda: not old.views and not window.engine._retired, timeout=10_000)
    assert all(not s.views for s in old_steps)
    assert window.session.prompt.views  # the shown pass is untouched


def test_the_engine_waits_for_the_gui_only_a_bounded_time(qtbot, make_window):
    import time

    from explorer.ui.base.engine import GUI_CATCH_UP_S
    window = make_window()
    engine = window.engine
    done = []

    def waits(ctx):
        start = time.monotonic()
        engine.catch_up()
        return time.monotonic() - start

    qtbot.waitUntil(lambda: window.session.pending() == 0, timeout=10_000)
    qtbot.wait(100)  # the window has caught up with the model's empty pass
    engine.gui_idle.clear()  # as if the GUI never finished drawing
    engine.submit(waits, "wait", finished=done.append)
    qtbot.waitUntil(lambda: bool(done), timeout=10_000)
    assert GUI_CATCH_UP_S * 0.9 <= done[0] < 5
    engine.gui_idle.clear()
    run_and_wait(qtbot, window, max_tokens=2)  # a run still completes
    assert len(window.session.steps) == 2


def test_views_redraw_after_a_pass_one_per_event_loop_turn(qtbot, make_window):
    """Input and paints get in between the views' redraws (one batch took ~40 ms after a
    1024-token pass of gpt2-small)."""
    from PySide6.QtWidgets import QApplication
    window = make_window()
    run_and_wait(qtbot, window, max_tokens=1)
    session = window.session
    qtbot.waitUntil(lambda: session.pending() == 0, timeout=10_000)
    listeners = len(session._pass_listeners)
    assert listeners >= 8  # graph, inspector, top-k and the plot tabs
    session.show_step(None)
    assert session.pending() == listeners
    turns = 0
    while session.pending() and turns < 10 * listeners:
        QApplication.processEvents()
        turns += 1
    assert session.pending() == 0 and turns >= listeners


def test_dock_tabs_show_whole_titles_and_scroll(qtbot, make_window):
    """Ten docks share the right-hand area and thirteen the bottom one: their tabs keep
    whole titles (eliding cut them to 'GE…'), and the bar scrolls instead."""
    from PySide6.QtCore import Qt
    from PySide6.QtWidgets import QTabBar

    window = make_window()
    bars = [b for b in window.findChildren(QTabBar) if b.parent() is window and b.count() > 1]
    assert bars
    titles = {d.windowTitle() for key, d in window.docks.items()}
    assert len(titles) == 23  # the right-hand docks, Train included, and the bottom ones
    shown = {bar.tabText(i) for bar in bars for i in range(bar.count())}
    assert titles <= shown
    for bar in bars:
        assert bar.elideMode() == Qt.ElideNone and bar.usesScrollButtons()
    window.reset_layout()  # a restored layout may bring new tab bars: the same for them
    for bar in window.findChildren(QTabBar):
        if bar.parent() is window and bar.count() > 1:
            assert bar.elideMode() == Qt.ElideNone


def test_a_prompt_runs_through_the_model_once_per_run(qtbot, make_window):
    """The prompt pass the views show is generation's prefill: one forward of the
    prompt, then one token a step."""
    window = make_window()
    qtbot.waitUntil(lambda: window.engine.loaded is not None, timeout=10_000)
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
    panel = window.generation
    panel.prompt.setPlainText(" a" * 70)
    panel.max_tokens.setValue(10)
    assert panel.leave_room.isChecked()  # the default: the KV cache keeps working
    qtbot.waitUntil(lambda: "the last 54 run<" in panel.token_count.text(), timeout=5_000)
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
                    timeout=5_000)
    assert "the context is full after 0 new tokens" in panel.token_count.toolTip()
    run_and_wait(qtbot, window, max_tokens=10)
    assert len(window.session.prompt.ids) == 64 and len(window.session.steps) == 10
    assert window.generation.settings().leave_room is False


def test_recompute_the_whole_context_shows_the_growing_t(qtbot, make_window):
    window = make_window()
    window.generation.prompt.setPlainText("Every effort moves you")
    run_and_wait(qtbot, window, max_tokens=3)
    session = window.session
    session.show_step(1)  # from the KV cache: one position, and no pattern to show
    session.set_node("trf_blocks.0.att.attn_weights")
    assert "no attention pattern" in window.inspector.title.text()
    session.set_node("trf_blocks.0.ff")
    window.explanation.redraw()
    assert "the KV cache keeps every earlier position's keys and values" in window.explanation.text.text()
    qtbot.waitUntil(lambda: window.graph.edge_labels["trf_blocks.0.ff.layers.2"].text() == "(1, 1, 32)",
                    timeout=5_000)
    window.generation.settings_box.recompute.setChecked(True)
    run_and_wait(qtbot, window, max_tokens=3)
    session.show_step(2)  # the book's generate_text_simple: (1, 4 + 2, C)
    qtbot.waitUntil(lambda: window.graph.edge_labels["trf_blocks.0.ff.layers.2"].text() == "(1, 6, 32)",
                    timeout=5_000)
    session.set_node("trf_blocks.0.att.attn_weights")
    assert "shape <b>(1, 4, 6, 6)</b>" in window.inspector.title.text()
    window.explanation.redraw()
    assert "The whole context ran again, 6 positions" in window.explanation.text.text()
