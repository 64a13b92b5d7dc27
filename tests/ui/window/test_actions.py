"""The one list of actions: every shortcut of the window, the workspaces and the views
is unique, and the menu bar is what the list says."""

from PySide6.QtGui import QKeySequence

from explorer.ui.views.registry import VIEWS, WORKSPACES
from explorer.ui.window.actions import all_actions
from explorer.ui.window.help import EXTRA_KEYS


def keys(text: str) -> str:
    if text.startswith("std:"):
        return QKeySequence(getattr(QKeySequence.StandardKey, text[4:])).toString()
    return QKeySequence(text).toString()


def test_every_shortcut_is_unique_across_the_window_the_workspaces_and_the_views(qapp):
    actions = all_actions()
    ids = [a.id for a in actions]
    assert len(ids) == len(set(ids))
    taken: dict[str, str] = {}
    for action in actions:
        for text in action.shortcuts:
            key = keys(text)
            if not key and text.startswith("std:"):
                continue  # a standard key this platform leaves without one (Quit offscreen)
            assert key, f"{action.id}: {text!r} is no key"
            assert key not in taken, f"{key} is both {taken[key]} and {action.id}"
            taken[key] = action.id
    # the workspaces' and the views' own keys are in the list (one list, not two)
    assert {keys(w.shortcut) for w in WORKSPACES} <= set(taken)
    assert {keys(v.shortcut) for v in VIEWS if v.shortcut} <= set(taken)
    assert taken["Ctrl+Shift+G"] == "get_gpt2" and taken["F11"] == "large"
    assert taken[keys("std:Open")] == "open_checkpoint" and taken["Esc"] == "stop"
    assert not {k for k, _ in EXTRA_KEYS} & set(taken)  # the graph's own keys apart


def test_the_menu_bar_is_built_from_the_list(make_window):
    window = make_window()
    actions = all_actions()
    assert set(window.actions_by_id) == {a.id for a in actions}
    menus = [a.text() for a in window.menuBar().actions()]
    assert menus == ["&File", "&Run", "&View", "&Help"]
    for spec in actions:
        made = window.actions_by_id[spec.id]
        assert made.text() == spec.title
        assert [k.toString() for k in made.shortcuts()] == [
            keys(t) for t in spec.shortcuts if keys(t)]
