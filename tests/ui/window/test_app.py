"""The desktop app as a whole: a bad checkpoint keeps the model, the screenshot command,
the model dialog, the title, the engine's pace and the views' turns."""

from PySide6.QtCore import Qt
from tests.ui.conftest import run_and_wait, settle


def test_a_bad_checkpoint_keeps_the_previous_model(qtbot, make_window, warnings, tmp_path):
    window = make_window()
    before = window.session.model
    bad = tmp_path / "page.bin"
    bad.write_text("<!DOCTYPE html><html>Sign in</html>")
    from explorer.core.sources import ModelSpec
    window.models.load(ModelSpec(checkpoint=str(bad)))
    qtbot.waitUntil(lambda: bool(warnings), timeout=60_000)
    assert "HTML" in warnings[0][1] and str(bad) in warnings[0][1]
    assert window.session.model is before and "(kept)" in window.model_label.text()
    run_and_wait(qtbot, window, max_tokens=2)  # still usable
    assert len(window.session.steps) == 2


def test_many_qt_calls_do_not_crash_this_pyside():
    # PySide6 6.12.0 aborts Python 3.11 ("none_dealloc") after a few thousand calls.
    from PySide6.QtCore import QObject
    obj = QObject()
    for i in range(30_000):
        obj.setObjectName(f"n{i % 7}")
    assert obj.objectName() == f"n{29_999 % 7}"


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
    # the pattern of a block not shown first: a real node, opened as the graph would
    assert app.screenshot(str(tmp_path / "p.png"), ModelSpec(preset="tiny"),
                          node="trf_blocks.1.att.attn_weights", max_new_tokens=1) == 0
    assert app.screenshot(str(tmp_path / "q.png"), ModelSpec(preset="tiny"),
                          node="trf_blocks.7.att.attn_weights", max_new_tokens=1) == 2


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


def test_model_dialog_offers_a_presets_own_placements(qtbot, tmp_path, monkeypatch):
    """An OLMo preset's block has its norms in the branch only: the dialog offers that
    one; a GPT-2 preset all six, Pre-LN chosen; the spec says what was chosen."""
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "empty-cache"))
    from explorer.ui.window.model_dialog import ModelDialog
    dialog = ModelDialog()
    qtbot.addWidget(dialog)
    dialog.preset_box.setCurrentText("olmo3-tiny")
    assert [dialog.norm_box.itemData(i) for i in range(dialog.norm_box.count())] == ["branch"]
    assert dialog.spec().norm_position == "branch"
    dialog.preset_box.setCurrentText("tiny")
    assert dialog.norm_box.count() == 6 and dialog.norm_box.currentData() == "pre"


def test_window_title_says_which_model_and_whether_trained(make_window):
    window = make_window(norm_position="post")
    assert "tiny" in window.windowTitle() and "Post-LN" in window.windowTitle()
    assert "UNTRAINED" in window.windowTitle()


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
    qtbot.waitUntil(lambda: not old.views and not window.engine._retired, timeout=60_000)
    assert all(not s.views for s in old_steps)
    assert window.session.prompt.views  # the shown pass is untouched


def test_the_window_computes_a_passs_statistics_ahead_on_the_core_torch_leaves_it(
        qtbot, make_window):
    """The window gives torch every core but one, and its passes compute their
    statistics ahead on that core (the side thread: tests/core/base/test_cpu_work.py); the pass
    the views get has every moment, and every detail once it is reported complete."""
    import torch

    from explorer.core.base.cpu_work import spare_core
    from explorer.core.base.devices import usable_cores
    window = make_window()
    runs = window.prompt.runs
    assert torch.get_num_threads() == max(1, usable_cores() - 1)
    assert runs.keep().ahead is spare_core() is (usable_cores() > 1)
    assert runs.keep().later  # the details when something shows them
    run_and_wait(qtbot, window, max_tokens=1)
    prompt = window.session.prompt
    assert all(v.stats.moments_ready for v in prompt.views.values())
    assert prompt.ready  # completed before the token was generated


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

    settle(qtbot, window)  # caught up with the model's empty pass
    engine.gui_idle.clear()  # as if the GUI never finished drawing
    engine.submit(waits, "wait", finished=done.append)
    qtbot.waitUntil(lambda: bool(done), timeout=120_000)  # it did not wait for ever
    assert done[0] >= GUI_CATCH_UP_S * 0.9 and not engine.gui_idle.is_set()
    engine.gui_idle.clear()
    run_and_wait(qtbot, window, max_tokens=2)  # a run still completes
    assert len(window.session.steps) == 2


def test_views_redraw_after_a_pass_one_per_event_loop_turn(qtbot, make_window):
    from explorer.ui.views.registry import in_workspace
    """Input and paints get in between the views' redraws (one batch took ~40 ms after a
    1024-token pass of gpt2-small)."""
    from PySide6.QtWidgets import QApplication
    window = make_window()
    for spec in in_workspace("look"):  # Look's views built, as its tabs are visited
        window.view(spec.key)
    run_and_wait(qtbot, window, max_tokens=1)
    session = window.session
    qtbot.waitUntil(lambda: session.pending() == 0, timeout=60_000)
    listeners = len(session._pass_listeners)
    assert listeners >= 6  # the graph and Look's views
    session.show_step(None)
    assert session.pending() == listeners
    turns = 0
    while session.pending() and turns < 10 * listeners:
        QApplication.processEvents()
        turns += 1
    assert session.pending() == 0 and turns >= listeners


def test_dock_tabs_show_whole_titles_in_every_workspace(qtbot, make_window):
    """A workspace's docks share the right-hand column: their tabs keep whole titles
    (eliding cut them to 'GE…'), after a switch and after Reset layout too."""
    from PySide6.QtWidgets import QTabBar

    from explorer.ui.views.registry import WORKSPACES, in_workspace

    window = make_window()
    for ws in WORKSPACES:
        window.workspaces.show(ws.key)
        bars = [b for b in window.findChildren(QTabBar) if b.parent() is window
                and b.isVisible() and b.count() > 1]
        shown = {bar.tabText(i) for bar in bars for i in range(bar.count())}
        assert {spec.tab_text for spec in in_workspace(ws.key)} <= shown
        for bar in bars:
            assert bar.elideMode() == Qt.ElideNone and bar.usesScrollButtons()
    window.reset_layout()  # a restored layout may bring new tab bars: the same for them
    for bar in window.findChildren(QTabBar):
        if bar.parent() is window and bar.count() > 1:
            assert bar.elideMode() == Qt.ElideNone
