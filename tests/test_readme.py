"""The README is a user's document: its list of workspaces and views is the one the
window is built from, each workspace has a screenshot from a real 1366×768 window, the
documents it links to exist, and it stays under 400 lines."""

import re
import struct
from pathlib import Path

from explorer.ui.views.registry import WORKSPACES, markdown

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text(encoding="utf-8")


def test_the_readmes_list_of_views_is_the_registrys():
    block = re.search(r"<!-- views:[^>]*-->\n(.*?)\n<!-- /views -->", README, re.S)
    assert block, "the generated list of views is missing"
    assert block.group(1) == markdown(), "regenerate it: python -c 'from explorer.ui.views" \
                                         ".registry import markdown; print(markdown())'"


def png_size(path: Path) -> tuple[int, int]:
    with open(path, "rb") as fh:
        head = fh.read(24)
    assert head[:8] == b"\x89PNG\r\n\x1a\n", path
    return struct.unpack(">II", head[16:24])


def test_every_workspace_has_a_laptop_screenshot_and_every_link_resolves():
    for ws in WORKSPACES:
        shot = f"docs/workspace-{ws.key}.png"
        assert f"]({shot})" in README, shot
        assert png_size(ROOT / shot) == (1366, 768), shot
    for target in re.findall(r"\]\(([^)#:]+)\)", README):  # local links and pictures
        assert (ROOT / target).exists(), target
    assert len(README.splitlines()) < 400


def test_every_picture_and_link_in_the_docs_resolves_and_every_picture_is_used():
    used = set()
    for doc in (ROOT / "docs").glob("*.md"):
        text = doc.read_text(encoding="utf-8")
        for target in re.findall(r"\]\(([^)#:]+)\)", text):
            assert (doc.parent / target).exists(), f"{doc.name}: {target}"
            used.add((doc.parent / target).resolve())
    used |= {(ROOT / t).resolve() for t in re.findall(r"\]\(([^)#:]+)\)", README)}
    unused = [p.name for p in (ROOT / "docs").glob("*.png") if p.resolve() not in used]
    assert not unused, f"pictures no document shows: {unused}"
