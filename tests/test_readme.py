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


def test_the_readmes_line_for_the_books_config_dict_runs_as_written(tmp_path, monkeypatch):
    """The README's json.dump line, run as written beside a book Qwen3 state dict (its
    config dict holding a torch dtype, as the book's does), makes a config.json the
    explorer reads: the heads and sizes from the dict."""
    import json  # noqa: F401 (the line uses it)
    import re

    import torch

    from explorer.core.gpt.build import build_model
    from explorer.core.gpt.config import preset
    from explorer.core.weights.checkpoints import load_checkpoint
    line = re.search(r"`(json\.dump\(QWEN_CONFIG_06_B[^`]*)`", README).group(1)
    cfg = preset("qwen3-tiny")
    torch.save(build_model(cfg, seed=0).state_dict(), tmp_path / "model.pth")
    QWEN_CONFIG_06_B = {"vocab_size": cfg.vocab_size, "context_length": 64, "emb_dim": cfg.emb_dim,  # noqa: F841
                        "n_heads": cfg.n_heads, "n_layers": cfg.n_layers, "hidden_dim": cfg.hidden_dim,
                        "head_dim": cfg.head_dim, "qk_norm": True, "n_kv_groups": cfg.kv_heads,
                        "rope_base": 1e6, "dtype": torch.bfloat16}
    monkeypatch.chdir(tmp_path)
    exec(line)
    loaded = load_checkpoint(tmp_path / "model.pth")
    assert (loaded.config.n_heads, loaded.config.kv_heads, loaded.config.context_length) == (
        cfg.n_heads, cfg.kv_heads, 64)
