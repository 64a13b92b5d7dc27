"""The window as a whole: it fits the screen, any tab can be shown large, the keyboard
shortcuts and a tour are one click away."""

from PySide6.QtCore import QSettings
from PySide6.QtGui import QGuiApplication
from PySide6.QtWidgets import QApplication

from explorer.core.sources import ModelSpec
from explorer.ui.window.main_window import MainWindow
from explorer.ui.base.jobs import join_all
from tests.ui.conftest import run_and_wait, settle


def test_a_first_window_and_a_restored_one_fit_the_screen(qtbot, tmp_path, warnings):
    area = QGuiApplication.primaryScreen().availableGeometry()  # 800 x 800 offscreen
    path = str(tmp_path / "s.ini")
    first = MainWindow(ModelSpec(preset="tiny"), QSettings(path, QSettings.IniFormat))
    qtbot.addWidget(first)
    first.show()
    qtbot.waitUntil(lambda: first.session.model is not None, timeout=60_000)
    # placed once its frame is known: 800 px, the screen's width, frame and all
    qtbot.waitUntil(lambda: area.width() - 8 <= first.frameGeometry().width() <= area.width(),
                    timeout=60_000)
    assert first.frameGeometry().height() <= area.height()
    first.resize(3000, 2000)  # as if saved on a far larger monitor
    first.move(2500, 1800)
    first.close()
    again = MainWindow(ModelSpec(preset="tiny"), QSettings(path, QSettings.IniFormat))
    qtbot.addWidget(again)
    again.show()
    # placed once its frame is known
    qtbot.waitUntil(lambda: again.height() <= area.height() and again.y() >= area.top()
                    and again.x() <= area.right()
                    and again.frameGeometry().bottom() <= area.bottom(), timeout=60_000)
    again.close()
    assert join_all(60) == [] and not again.stuck
    QApplication.processEvents()  # whatever the stopped load sends back
    assert warnings == []  # closed while it may still be loading: nothing to say


def test_closing_a_window_while_its_model_loads_shows_no_dialog(qtbot, tmp_path, warnings):
    path = str(tmp_path / "s.ini")
    first = MainWindow(ModelSpec(preset="tiny"), QSettings(path, QSettings.IniFormat))
    qtbot.addWidget(first)
    qtbot.waitUntil(lambda: first.session.model is not None, timeout=60_000)
    first.close()  # remembered: the next window's first load is the last launch's model
    window = MainWindow(None, QSettings(path, QSettings.IniFormat))
    qtbot.addWidget(window)
    window.show()
    assert window.models.loading and window.models.remembered
    window.close()  # its load is stopped by the close
    qtbot.waitUntil(lambda: not window.models.loading, timeout=60_000)
    assert join_all(60) == [] and not window.stuck
    QApplication.processEvents()  # whatever the stopped load sends back
    assert warnings == [] and window.session.model is None and not window.models.loading


def test_the_front_tab_can_take_the_centre_and_go_back(qtbot, make_window):
    window = make_window()
    run_and_wait(qtbot, window, max_tokens=1)
    dock = window.docks["attention"]
    dock.raise_()
    qtbot.waitUntil(lambda: window.front_dock() is dock, timeout=60_000)
    view, frame = window.view("attention"), dock.widget()
    small = view.width() * view.height()
    window.large_action.trigger()
    qtbot.waitUntil(lambda: view.isVisible() and view.width() * view.height() > 1.5 * small,
                    timeout=60_000)
    assert window.central.large is frame and not window.graph.isVisible()
    assert "Attention</b>, shown large" in window.central.note.text()
    assert "shown large in the centre" in dock.widget().text()
    assert not any(d.isVisible() for d in window.docks.values())  # the whole window is its
    window.large_action.trigger()  # F11 again
    qtbot.waitUntil(lambda: window.docks["inspector"].isVisible(), timeout=60_000)
    assert dock.widget() is frame and window.central.large is None and window.graph.isVisible()
    window.large_action.trigger()  # shown large, then another workspace: it goes home first
    window.workspaces.show("why")
    assert dock.widget() is frame and window.central.large is None and not dock.isVisible()


def test_the_keyboard_shortcuts_come_from_the_menus(qtbot, make_window):
    window = make_window()
    dialog = window.show_shortcuts()
    qtbot.addWidget(dialog)
    cells = {dialog.table.item(r, 1).text(): dialog.table.item(r, 0).text()
             for r in range(dialog.table.rowCount())}
    assert cells["Generate  (Run)"] == "Ctrl+Return, Ctrl+Enter"
    assert cells["Stop  (Run)"] == "Esc"
    assert cells["Get GPT-2…  (File)"] == "Ctrl+Shift+G"
    assert cells["Attention  (View ▸ Look)"] == "Ctrl+Shift+A"
    assert cells["Show Look  (View ▸ Look)"] == "Ctrl+1"
    assert cells["Show Play  (View ▸ Play)"] == "Ctrl+5"
    assert cells["Show the front tab large  (View)"] == "F11"
    keys = [dialog.table.item(r, 0).text() for r in range(dialog.table.rowCount())]
    assert len(keys) == len(set(keys))  # no two actions share a shortcut


def test_the_tour_outlines_the_graph_the_prompt_and_every_workspace(qtbot, make_window):
    from explorer.ui.views.registry import WORKSPACES, in_workspace
    window = make_window()
    tour = window.tour()
    qtbot.addWidget(tour)
    seen = []
    for step in range(len(tour.steps)):
        title, words = tour.steps[step][1:]
        widget = tour.widget(step)
        qtbot.waitUntil(lambda: widget.isVisible(), timeout=60_000)
        settle(qtbot, window)  # docks shown settle their sizes: the outline follows
        rect = tour.outlined()
        corner = widget.mapTo(window, widget.rect().topLeft())
        assert abs(rect.x() + 3 - corner.x()) <= 1 and rect.width() == widget.width() + 6
        assert words, title  # every step says what it is for
        seen.append((title.split(" (")[0], words))
        tour.next.click()
    assert [t for t, _ in seen] == ["The block graph", "Prompt and generation", "Workspaces",
                                    *[ws.title for ws in WORKSPACES]]
    for ws, (_title, words) in zip(WORKSPACES, seen[3:]):  # each names its own views
        assert all(f"<b>{spec.tab_text}</b>" in words for spec in in_workspace(ws.key))
    assert window.workspaces.current == WORKSPACES[-1].key  # the tour showed each one
    assert not tour.isVisible()


def test_training_goes_to_the_data_folder_shown_in_full(make_window, tmp_path):
    import os
    window = make_window()
    assert window.view("train").out_dir.text() == os.path.join(os.environ["GPT_EXPLORER_DATA_DIR"],
                                                              "runs", "train")


def test_a_first_window_takes_most_of_a_large_screen_and_no_tabs_scroll(qtbot, make_window):
    """On a 1920x1080 screen the first window is 90% of the free area; in every
    workspace its right-hand column then shows all its tabs, whole, without scroll
    buttons; so does a 1500 px window."""
    from PySide6.QtCore import QRect
    from PySide6.QtWidgets import QTabBar

    from explorer.ui.views.registry import WORKSPACES, in_workspace
    from explorer.ui.window.placement import first_size

    window = make_window()

    class Screen:  # the size a 1920x1080 screen (with a task bar) has free
        def availableGeometry(self):
            return QRect(0, 0, 1920, 1040)

    window.screen = lambda: Screen()
    assert first_size(window) == (1728, 950)  # at least 950 high: the screen has room
    for size in ((1728, 950), (1500, 950)):
        window.resize(*size)
        for ws in WORKSPACES:
            window.workspaces.show(ws.key)
            window._default_dock_sizes()
            settle(qtbot, window)
            titles = [spec.tab_text for spec in in_workspace(ws.key)]
            bars = [b for b in window.findChildren(QTabBar) if b.parent() is window
                    and b.isVisible() and [b.tabText(i) for i in range(b.count())] == titles]
            assert len(bars) == 1, (ws.title, titles)  # the column: its views in order
            bar = bars[0]
            assert bar.sizeHint().width() <= bar.width()  # no scrolling needed
            assert all(bar.rect().contains(bar.tabRect(i)) for i in range(bar.count()))


def test_a_view_that_cannot_be_built_stops_the_engine_and_says_so(qtbot, tmp_path, monkeypatch):
    """The window's threads do not outlive a failed start (Qt would abort the process:
    'QThread: Destroyed while thread is still running')."""
    import pytest

    from explorer.ui.window import main_window
    from explorer.ui.base.engine import Engine

    started = []
    real_init = Engine.__init__

    def spy(self, *args, **kwargs):
        real_init(self, *args, **kwargs)
        started.append(self)

    monkeypatch.setattr(Engine, "__init__", spy)

    class Broken:
        def __init__(self, session, engine):
            raise RuntimeError("this view is broken")

    from types import SimpleNamespace
    spec = main_window.BY_KEY["prompt"]  # built with the window: it is in every workspace
    broken = SimpleNamespace(key=spec.key, tab_text=spec.tab_text, shows=spec.shows, cls=Broken)
    monkeypatch.setattr(main_window, "BY_KEY", {**main_window.BY_KEY, "prompt": broken})
    with pytest.raises(RuntimeError, match="broken"):
        MainWindow(ModelSpec(preset="tiny"), QSettings(str(tmp_path / "s.ini"), QSettings.IniFormat))
    import shiboken6
    thread = started[0].thread  # stopped, or already gone with the window (a running one
    assert not shiboken6.isValid(thread) or not thread.isRunning()  # would abort us here)


def test_the_inspector_draws_only_while_its_tab_is_in_front(qtbot, make_window):
    """~17 ms a 1024-token pass that the window need not spend while another tab is in
    front; it catches up when its tab comes back."""
    window = make_window()
    window.docks["gelu"].raise_()
    qtbot.waitUntil(lambda: window.front_dock() is window.docks["gelu"], timeout=60_000)
    run_and_wait(qtbot, window, max_tokens=1)
    qtbot.waitUntil(lambda: window.session.pending() == 0, timeout=60_000)  # every view told
    inspector = window.view("inspector")
    assert inspector._stale and "shape" not in inspector.title.text()
    window.docks["inspector"].raise_()
    shape = str(window.session.view().shape)
    qtbot.waitUntil(lambda: f"shape <b>{shape}</b>" in inspector.title.text(), timeout=60_000)
    assert not inspector._stale


def test_every_tour_card_shows_its_whole_text_and_esc_closes_it_from_the_window(qtbot, make_window):
    """Each card is as tall as its step's words (the Learn and Experiment cards cut
    theirs at a fixed 220 px); Esc pressed in the window — where a click took the
    keyboard — closes the tour."""
    window = make_window()
    tour = window.tour()
    qtbot.addWidget(tour)
    for step in range(len(tour.steps)):
        tour.show_step(step)
        text = tour.text
        needed = text.heightForWidth(text.width())
        assert text.height() >= needed, (step, text.height(), needed)
    window.actions_by_id["stop"].trigger()  # Esc in the window: nothing runs, so the tour
    assert not tour.isVisible()
