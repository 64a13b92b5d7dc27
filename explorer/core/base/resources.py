"""Where the files in ``resources/`` are, for a source checkout or an installed wheel."""

from __future__ import annotations

from pathlib import Path

_REPO_RESOURCES = Path(__file__).resolve().parents[3] / "resources"
_PACKAGE_RESOURCES = Path(__file__).resolve().parents[2] / "_resources"


def resource_path(name: str) -> Path:
    for folder in (_REPO_RESOURCES, _PACKAGE_RESOURCES):
        candidate = folder / name
        if candidate.is_file():
            return candidate
    raise FileNotFoundError(
        f"resource {name!r} not found in {_REPO_RESOURCES} or {_PACKAGE_RESOURCES}; "
        "is the installation complete?"
    )
