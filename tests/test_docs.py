"""The documents that name code name what is there: every test docs/RELIABILITY.md names
exists (the file, and the test in it), and docs/ARCHITECTURE.md's module map lists every
module of the core."""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _tests_in(path: Path) -> set[str]:
    return {node.name for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))}


def test_every_test_reliability_names_exists():
    text = (ROOT / "docs" / "RELIABILITY.md").read_text(encoding="utf-8")
    named, current = [], None
    # `tests/x.py`, `tests/x.py::test_y`, and `::test_z` after them: a test of the file before
    for span in re.findall(r"`([^`]+)`", text):
        m = re.fullmatch(r"(tests/[\w/]+\.py)?(?:::(\w+)(?:\[[^\]]*\])?)?", span)
        if not m or not any(m.groups()):
            continue
        current = m.group(1) or current
        named.append((current, m.group(2)))
    assert len(named) > 100
    missing = []
    for path, test in named:
        if not (ROOT / path).is_file():
            missing.append(path)
        elif test and test not in _tests_in(ROOT / path):
            missing.append(f"{path}::{test}")
    assert not missing, missing


def test_the_module_map_lists_every_module_of_the_core():
    text = (ROOT / "docs" / "ARCHITECTURE.md").read_text(encoding="utf-8")
    start = text.index("## Module map")
    table = text[start:text.index("\n## ", start + 5)]
    listed = set()
    for row in table.splitlines():
        if not row.startswith("| `"):
            continue
        folder = None
        for name in re.findall(r"`([^`]+)`", row.split("|")[1]):  # a path, then names beside it
            if "/" in name:
                folder = name.rsplit("/", 1)[0]
                listed.add(name)
            elif folder:
                listed.add(f"{folder}/{name}")
    modules = {str(p.relative_to(ROOT / "explorer")) for p in (ROOT / "explorer" / "core").rglob("*.py")
               if p.name != "__init__.py"}
    assert not sorted(modules - listed)
    assert "core/gpt/families/__init__.py" in listed  # the registry, by its own name


def test_views_md_names_every_view_by_its_window_title_and_shortcut():
    """docs/VIEWS.md describes each view under the title the window gives it (the
    registry's), with its shortcut beside it."""
    from explorer.ui.views.registry import VIEWS
    text = (ROOT / "docs" / "VIEWS.md").read_text(encoding="utf-8")
    missing = [v.title for v in VIEWS if f"**{v.title}**" not in text]
    assert not missing, missing
    for v in VIEWS:
        if v.shortcut:
            entry = text[text.index(f"**{v.title}**"):][:400]
            assert v.shortcut in entry, (v.title, v.shortcut)
