"""Workspaces: the views grouped by what the user does, one switcher (Ctrl+1…5), the
View menu as a submenu each; a workspace's views built the first time it is shown; its
layout kept when the user leaves it and across launches; Reset layout for the shown one;
any view opened as a dock in any workspace; the graph and the prompt in every one."""

import pytest
from PySide6.QtCore import QSettings
from PySide6.QtWidgets import QApplication

from explorer.core.sources import ModelSpec
from explorer.ui.views.registry import VIEWS, WORKSPACES, in_workspace
from explorer.ui.window.main_window import MainWindow

LOOK = {s.key for s in in_workspace("look")}


def shown_docks(window) -> set[str]:
    return {k for k, d in window.docks.items() if d.isVisible()}


def test_a_view_is_built_when_it_is_first_shown(qtbot, make_window):
    """At start the graph, the prompt and the first workspace's front tab; every other
    view when its tab first comes to the front (or something asks for it)."""
    window = make_window()
    assert set(window.views) == {"graph", "prompt", "inspector"}
    assert shown_docks(window) == {"prompt"} | LOOK and window.graph.isVisible()
    window.docks["gelu"].raise_()  # a click on its tab
    qtbot.waitUntil(lambda: "gelu" in window.views, timeout=60_000)
    assert window.view("gelu").isVisible() and "attention" not in window.views
    for ws in WORKSPACES[1:]:
        before = set(window.views)
        window.workspaces.show(ws.key)
        own = [s.key for s in in_workspace(ws.key)]
        qtbot.waitUntil(lambda: own[0] in window.views, timeout=60_000)
        assert set(window.views) == before | {own[0]}  # its front tab only
        assert shown_docks(window) == {"prompt"} | set(own) and window.graph.isVisible()
        assert window.workspaces.bar.tabText(window.workspaces.bar.currentIndex()) == ws.title
    for spec in VIEWS:  # the rest as they are asked for, each in its own dock
        view = window.view(spec.key)
        if spec.key not in ("graph", "prompt"):
            assert window.docks[spec.key].widget().content.widget() is view
    assert set(window.views) == {s.key for s in VIEWS}


def test_a_tab_shown_while_the_thread_still_imports_is_built_when_it_ends(qtbot, make_window,
                                                                        monkeypatch):
    """A tab that comes to the front while the start-up thread is importing waits for it
    (the window answers meanwhile), then is built, once."""
    from explorer.ui.base import preload
    window = make_window()
    importing = [True]
    monkeypatch.setattr(preload, "busy", lambda: importing[0])
    window.docks["gelu"].raise_()  # a click on its tab
    qtbot.wait(200)  # some ten polls
    assert "gelu" not in window.views and window._unbuilt == ["gelu"]
    importing[0] = False
    qtbot.waitUntil(lambda: "gelu" in window.views, timeout=60_000)
    assert window._unbuilt == [] and window.view("gelu").isVisible()


def test_a_window_deleted_before_a_shown_tab_is_built_builds_nothing_after(
        qtbot, tmp_path, warnings, monkeypatch):
    """A tab shown is built a loop turn later, or when the start-up thread's imports
    end; the window deleted before then, nothing is built on what is gone (it raised in
    the event loop of whatever ran next)."""
    from PySide6.QtCore import QCoreApplication, QEvent
    from explorer.ui.base import preload
    for importing in (False, True):
        settings = QSettings(str(tmp_path / f"settings{importing}.ini"), QSettings.IniFormat)
        window = MainWindow(ModelSpec(preset="tiny"), settings)
        window.show()
        qtbot.waitUntil(lambda: window.session.model is not None and window._painted,
                        timeout=60_000)
        monkeypatch.setattr(preload, "busy", lambda: importing)
        window._build_soon("gelu")  # as its dock's tab coming to the front does
        window.close()
        window.deleteLater()
        QCoreApplication.sendPostedEvents(None, QEvent.Type.DeferredDelete)
        monkeypatch.setattr(preload, "busy", lambda: False)
        qtbot.wait(100)  # the turns that would build it: an error would be raised in one


def test_the_switcher_the_shortcuts_and_the_view_menu_follow_the_one_list(qtbot, make_window):
    window = make_window()
    bar = window.workspaces.bar
    assert [bar.tabText(i) for i in range(bar.count())] == [ws.title for ws in WORKSPACES]
    bar.setCurrentIndex(2)  # a click on "Why"
    assert window.workspaces.current == "why" and "why" in shown_docks(window)
    view_menu = next(a.menu() for a in window.menuBar().actions() if a.text() == "&View")
    subs = {a.text(): a.menu() for a in view_menu.actions() if a.menu() is not None}
    for ws in WORKSPACES:
        entries = [a for a in subs[ws.title].actions() if not a.isSeparator()]
        assert entries[0].shortcut().toString() == ws.shortcut
        assert [a.text() for a in entries[1:]] == [s.title for s in in_workspace(ws.key)]
        entries[0].trigger()  # Show <workspace>, as its Ctrl+N does
        assert window.workspaces.current == ws.key
    learn_menu = [a for a in subs["Learn"].actions() if a.text() == "Model and its parameters"]
    window.workspaces.show("look")
    learn_menu[0].trigger()  # a view of another workspace: its workspace comes
    assert window.workspaces.current == "learn" and window.front_dock() is window.docks["model"]
    window.show_view("prompt")  # in every workspace: nothing changes
    assert window.workspaces.current == "learn"


def test_a_layout_is_kept_per_workspace_and_across_launches_and_reset_puts_it_back(qtbot, tmp_path):
    path = str(tmp_path / "s.ini")

    def launch():
        window = MainWindow(ModelSpec(preset="tiny"), QSettings(path, QSettings.IniFormat))
        qtbot.addWidget(window)
        window.show()
        qtbot.waitUntil(lambda: window.session.model is not None, timeout=60_000)
        return window

    window = launch()
    window.docks["gelu"].raise_()  # Look: GELU in front
    window.workspaces.show("why")
    window.docks["heads"].raise_()  # Why: Heads in front
    window.workspaces.show("look")
    qtbot.waitUntil(lambda: window.front_dock() is window.docks["gelu"], timeout=60_000)
    window.workspaces.show("why")
    qtbot.waitUntil(lambda: window.front_dock() is window.docks["heads"], timeout=60_000)
    window.close()
    again = launch()  # the last workspace, as it was left
    assert again.workspaces.current == "why"
    qtbot.waitUntil(lambda: again.front_dock() is again.docks["heads"], timeout=60_000)
    again.workspaces.show("look")
    qtbot.waitUntil(lambda: again.front_dock() is again.docks["gelu"], timeout=60_000)
    again.reset_layout()  # Look as it first was; Why keeps its own
    qtbot.waitUntil(lambda: again.front_dock() is again.docks["inspector"], timeout=60_000)
    again.workspaces.show("why")
    qtbot.waitUntil(lambda: again.front_dock() is again.docks["heads"], timeout=60_000)
    again.close()


def test_any_view_opens_as_a_dock_in_any_workspace(qtbot, make_window):
    window = make_window()
    window.workspaces.open_here("sampling")  # a Play view in Look
    assert window.workspaces.current == "look" and window.front_dock() is window.docks["sampling"]
    assert window.docks["sampling"].isVisible() and "sampling" in window.workspaces.members("look")
    window.workspaces.show("why")
    assert not window.docks["sampling"].isVisible()
    window.workspaces.show("look")
    assert window.docks["sampling"].isVisible()
    window.reset_layout()
    assert not window.docks["sampling"].isVisible() and shown_docks(window) == {"prompt"} | LOOK
    window.workspaces.show("play")  # its own workspace still has it
    assert window.docks["sampling"].isVisible()
    QApplication.processEvents()


START_UP = r"""
import json, sys, tempfile, time
from PySide6.QtCore import QSettings
from PySide6.QtWidgets import QApplication
app = QApplication([])
from explorer.core.sources import ModelSpec
from explorer.ui.base import preload
from explorer.ui.window.main_window import MainWindow
import explorer.core.gpt.tokenizer as tokenizer
seen = {}
class Window(MainWindow):
    def view(self, key):
        if key == "inspector" and key not in self.views:  # its module imported by then
            seen["inspector_module"] = "explorer.ui.views.look.inspector_view" in sys.modules
        return super().view(key)

    def paintEvent(self, event):
        if not seen:  # what was loaded when the window first painted
            seen.update(pyqtgraph="pyqtgraph" in sys.modules, vocabulary=tokenizer.tokenizer_ready(),
                        views=sorted(self.views))
        super().paintEvent(event)
w = Window(ModelSpec(preset="tiny"), QSettings(tempfile.mktemp(suffix=".ini"), QSettings.IniFormat))
w.show()
end = time.monotonic() + 60
while ("inspector" not in w.views or w.session.model is None) and time.monotonic() < end:
    app.processEvents(); time.sleep(0.005)
seen.update(thread=preload._thread is not None and not preload.busy(), built=sorted(w.views),
            chips=w.prompt.token_ids, pyqtgraph_after="pyqtgraph" in sys.modules)
print(json.dumps(seen))
w.close()
"""


@pytest.mark.slow  # a fresh process
def test_the_window_paints_before_plotting_and_the_vocabulary_are_loaded():
    """A fresh process: the graph and the prompt are painted before pyqtgraph is imported
    or GPT-2's vocabulary read; a thread does both, then the inspector is built and the
    prompt's chips show its token ids."""
    import json
    import os
    import subprocess
    import sys
    env = dict(os.environ, QT_QPA_PLATFORM="offscreen")
    out = subprocess.run([sys.executable, "-c", START_UP], capture_output=True, text=True,
                         env=env, timeout=240, check=True).stdout
    seen = json.loads(out.strip().splitlines()[-1])
    assert seen["pyqtgraph"] is False and seen["vocabulary"] is False
    assert seen["views"] == ["graph", "prompt"]
    assert seen["thread"] and seen["pyqtgraph_after"]
    assert seen["built"] == ["graph", "inspector", "prompt"]
    assert seen["inspector_module"]  # by the thread, not in the turn that builds the view
    assert seen["chips"] == [6109, 3626, 6100, 345]  # "Every effort moves you"


CHIPS_EARLY = r"""
import json, threading, time
from PySide6.QtWidgets import QApplication
app = QApplication([])
import explorer.core.gpt.tokenizer as tokenizer
readers = []
_load = tokenizer._load_ranks
def _recorded():
    readers.append(threading.current_thread().name)
    return _load()
tokenizer._load_ranks = _recorded
from explorer.ui.base import preload
from explorer.ui.base.session import Session
from explorer.ui.views.shared.prompt_view import PromptPanel
from tests.ui.alone import InlineEngine
panel = PromptPanel(Session(), InlineEngine(None))  # a window not painted yet: no thread
panel.update_chips()  # its chips' timer, early
seen = dict(started=preload.started(), ready_after_call=tokenizer.tokenizer_ready(),
            said=panel.token_count.text())
end = time.monotonic() + 60
while not panel.token_ids and time.monotonic() < end:
    app.processEvents(); time.sleep(0.005)
seen.update(readers=readers, ids=panel.token_ids)
print(json.dumps(seen))
"""


@pytest.mark.slow  # a fresh process: the vocabulary not read yet
def test_chips_asked_before_the_first_paint_are_read_on_a_thread_not_the_window_s():
    """The prompt's chips asked for before the window's first paint (its timer early, on a
    machine slow to paint) read the vocabulary on a thread of their own: the GUI thread
    never reads it, and the chips come when it is read."""
    import json
    import os
    import subprocess
    import sys
    env = dict(os.environ, QT_QPA_PLATFORM="offscreen")
    out = subprocess.run([sys.executable, "-c", CHIPS_EARLY], capture_output=True, text=True,
                         env=env, timeout=240, check=True).stdout
    seen = json.loads(out.strip().splitlines()[-1])
    assert seen["started"] is False and seen["ready_after_call"] is False
    assert seen["said"] == "Reading GPT-2's vocabulary…"
    assert seen["readers"] == ["tokenizer"]  # once, on its own thread
    assert seen["ids"] == [6109, 3626, 6100, 345]  # "Every effort moves you"
