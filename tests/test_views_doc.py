"""docs/VIEWS.md says what each view shows: every view of the registry has its bullet in
its own workspace's section, named as the window names it (its title or its tab) with
its shortcut, and no section lists a view of another workspace — the page cannot drift
from the window again."""

import re
from pathlib import Path

from explorer.ui.views.registry import VIEWS, WORKSPACES

DOC = (Path(__file__).resolve().parents[1] / "docs" / "VIEWS.md").read_text(encoding="utf-8")


def sections() -> dict[str, str]:
    """Each '## Heading' with its text, keyed by the heading up to its colon."""
    parts = re.split(r"^## ", DOC, flags=re.M)[1:]
    return {part.split("\n", 1)[0].split(":")[0].strip(): part for part in parts}


def bullets(text: str) -> dict[str, str]:
    """'- **Name** …' lines: the name, and the line."""
    return {m[1]: m[0] for m in re.finditer(r"^- \*\*(.+?)\*\*.*$", text, flags=re.M)}


def test_every_view_is_described_in_its_own_workspace_with_its_shortcut():
    found = sections()
    titles = {ws.key: ws.title for ws in WORKSPACES} | {"shared": "In every workspace"}
    for view in VIEWS:
        listed = bullets(found[titles[view.group]])
        names = [n for n in (view.title, view.tab) if n and n in listed]
        assert names, f"{view.title} has no bullet under '{titles[view.group]}'"
        if view.shortcut:
            assert view.shortcut in listed[names[0]], f"{view.title}: {view.shortcut} not said"


def test_no_section_lists_a_view_of_another_workspace():
    found = sections()
    titles = {ws.key: ws.title for ws in WORKSPACES} | {"shared": "In every workspace"}
    for view in VIEWS:
        for key, title in titles.items():
            if key == view.group:
                continue
            listed = bullets(found[title])
            assert view.title not in listed and (view.tab is None or view.tab not in listed), \
                f"{view.title} listed under '{title}'"
