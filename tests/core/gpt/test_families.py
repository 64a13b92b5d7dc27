"""Every registered block family is one record that describes its model, and every model a
family builds is a ``BlockModel``: the forward with a cache, the last position only or no
head, its cache, its tied head, its tokenizer, its parameter count, the classes the Code
view shows. Outside a family's own files nothing asks which family a model is."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest
import torch

from explorer.core.gpt.block_model import BlockModel
from explorer.core.gpt.build import build_model
from explorer.core.gpt.config import PRESETS, GPTConfig
from explorer.core.gpt.families import FAMILIES, default, for_config, for_model_type, named
from explorer.core.gpt.family import BlockOrder, NormPosition, Role
from explorer.core.gpt.nodes import all_hook_names, order_of
from explorer.core.gpt.sizes import count_parameters

ROOT = Path(__file__).resolve().parents[3] / "explorer"
FAMILY_FOLDER = ROOT / "core" / "gpt" / "families"
# the Llama / Qwen family's own files: its record, its model, its key maps, its lessons
LLAMA_FILES = {FAMILY_FOLDER / "llama.py", ROOT / "core" / "gpt" / "llama.py",
               ROOT / "core" / "weights" / "llama_keys.py",
               ROOT / "core" / "lessons" / "formulas_llama.py",
               ROOT / "core" / "lessons" / "quiz_llama.py"}


def smallest_preset(family) -> GPTConfig:
    """The family's preset with the fewest parameters."""
    return min((cfg for cfg in PRESETS.values() if cfg.family is family),
               key=lambda cfg: count_parameters(cfg).total)


@pytest.mark.parametrize("family", list(FAMILIES.values()), ids=list(FAMILIES))
@pytest.mark.parametrize("tied", [True, False])
def test_every_familys_model_is_a_block_model(family, tied):
    cfg = smallest_preset(family).replace(tie_weights=tied)
    model = build_model(cfg, seed=0)
    assert isinstance(model, BlockModel) and model.cfg is cfg
    assert len(model.trf_blocks) == cfg.n_layers and model.tokenizer.vocab_size <= cfg.vocab_size
    assert (model.out_head.weight is model.tok_emb.weight) == tied
    ids = torch.tensor([[464, 1049, 11, 290, 262]])
    with torch.no_grad():
        logits = model(ids)
        assert logits.shape == (1, 5, cfg.vocab_size)
        assert model(ids, head=False).shape == (1, 5, cfg.emb_dim)
        torch.testing.assert_close(model(ids, last_only=True), logits[:, -1:])
        cache = model.new_cache()
        model(ids[:, :4], cache=cache)
        assert cache.length == 4
        torch.testing.assert_close(model(ids[:, 4:], cache=cache)[0, -1], logits[0, -1],
                                   atol=1e-5, rtol=1e-5)
    unique = {id(p): p.numel() for p in model.parameters()}
    assert count_parameters(cfg).total == sum(unique.values())
    classes = family.model.classes()
    assert isinstance(model, classes.model) and isinstance(model.trf_blocks[0], classes.block)
    for position, method in classes.block_forwards.items():
        assert position in family.orders and callable(getattr(classes.block, method))


@pytest.mark.parametrize("family", list(FAMILIES.values()), ids=list(FAMILIES))
def test_every_familys_record_is_whole(family):
    """Its roles are Roles and name nodes it has; its grids, its formats' module, its
    presets and its words for every job of a block are there."""
    keys = family.block_keys() | family.model_keys()
    for role, key in family.roles.items():
        assert isinstance(role, Role) and key in keys, (family, role, key)
    for grid in family.attention_grids:
        assert all(k in keys for row in grid for k in row if k)
    assert family.attention_grid(frozenset({"qk_norm"})) in family.attention_grids
    assert set(family.words.ways) == {"normalisation", "positions", "feed-forward",
                                      "non-linearity", "dropout"}
    assert all(for_model_type(t) is family for t in family.files.model_types)
    cfg = smallest_preset(family)
    assert cfg.to_dict().get("family", default().name) == family.name
    assert GPTConfig.from_dict(cfg.to_dict()) == cfg
    assert all(isinstance(p, NormPosition) for p in family.orders)


def test_a_family_is_found_by_its_name_and_its_model_type_and_a_wrong_one_is_refused():
    assert named("llama") is FAMILIES["llama"] and for_model_type("qwen3") is FAMILIES["llama"]
    assert for_model_type("bert") is None and for_config({"model_type": "bert"}) is None
    assert for_config({"n_head": 12}) is default()  # an old GPT-2 config.json names no type
    assert for_config({"model_type": "gpt2"}) is None  # GPT-2's always says its heads
    with pytest.raises(ValueError, match=f"family must be one of {', '.join(FAMILIES)}, got 'rwkv'"):
        GPTConfig(family="rwkv")
    with pytest.raises(ValueError, match="family must be a name"):
        GPTConfig.from_dict({"family": ["llama"]})
    with pytest.raises(ValueError, match="n_kv_groups belong to another family, not GPT-2's"):
        GPTConfig(n_kv_groups=2)
    with pytest.raises(ValueError, match="a Llama / Qwen block has no dropout"):
        GPTConfig(family="llama", drop_rate=0.1, qkv_bias=False)
    with pytest.raises(ValueError, match="norm_position must be one of 'pre', .* for a Llama / Qwen"):
        GPTConfig(family="llama", drop_rate=0.0, norm_position="sandwich")


def test_a_misspelt_role_and_an_order_compared_with_a_word_fail_loudly():
    family = default()
    with pytest.raises(ValueError):
        Role("activaton")
    with pytest.raises(TypeError, match="a role is a Role"):
        family.role("activation")
    with pytest.raises(ValueError):
        from dataclasses import replace
        replace(family, roles={"activaton": "ff.layers.1"})
    order = order_of(PRESETS["tiny"])
    assert isinstance(order, BlockOrder) and not isinstance(order, str)
    with pytest.raises(TypeError, match="compare its position"):
        order == "pre"  # noqa: B015 (GPT-2's "pre" and Llama's "pre" are not one order)
    assert order.position == NormPosition.PRE and order != order_of(PRESETS["llama-tiny"])
    assert order_of(PRESETS["tiny"]) == order and order.title == "Pre-LN"


def _python_files():
    return sorted(ROOT.rglob("*.py"))


def test_no_module_outside_the_llama_familys_files_reads_a_llama_flag():
    pattern = re.compile(r"\.llama\b")
    hits = [f"{p.relative_to(ROOT)}:{i}: {line.strip()}" for p in _python_files()
            if p not in LLAMA_FILES
            for i, line in enumerate(p.read_text().splitlines(), 1) if pattern.search(line)]
    assert not hits


def _family_words(node: ast.AST, names: set[str]) -> list[str]:
    """The family names among a node's string constants (in a tuple, list or set too)."""
    items = node.elts if isinstance(node, (ast.Tuple, ast.List, ast.Set)) else [node]
    return [n.value for n in items if isinstance(n, ast.Constant) and n.value in names]


def test_no_module_compares_anything_with_a_familys_name():
    """Nowhere outside the families' own folder is a value compared with "gpt2", "llama"
    (or a Hugging Face model_type a family opens), nor a table keyed by them: the code
    asks the family's record instead. (Hub names such as ``hf:gpt2`` are not compared.)"""
    names = set(FAMILIES) | {t for f in FAMILIES.values() for t in f.files.model_types}
    hits = []
    for path in _python_files():
        if path.parent == FAMILY_FOLDER or path in LLAMA_FILES:
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            found = []
            if isinstance(node, ast.Compare):
                for side in [node.left, *node.comparators]:
                    found += _family_words(side, names)
            elif isinstance(node, ast.Dict):
                for key in node.keys:
                    if key is not None:
                        found += _family_words(key, names)
                        if isinstance(key, ast.Tuple):
                            found += [w for e in key.elts for w in _family_words(e, names)]
            if found:
                hits.append(f"{path.relative_to(ROOT)}:{node.lineno}: {found}")
    assert not hits


def test_the_list_of_families_is_written_once():
    """Only the registry imports the family files; every other module asks it."""
    importers = []
    for path in _python_files():
        if path.parent == FAMILY_FOLDER:
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module and re.search(
                    r"(^|\.)families\.(?!__init__)\w+$", node.module):
                importers.append(str(path.relative_to(ROOT)))
    own = LLAMA_FILES | {ROOT.parent / (f.files.key_maps.replace(".", "/") + ".py")
                         for f in FAMILIES.values()}  # a family's key maps read its record
    assert set(importers) <= {str(p.relative_to(ROOT)) for p in own}, importers


def test_every_node_of_a_familys_model_is_a_hook_point_of_its_model():
    for family in FAMILIES.values():
        cfg = smallest_preset(family)
        model = build_model(cfg, seed=0, device="meta")
        modules = dict(model.named_modules())
        missing = [n for n in all_hook_names(cfg, inside=True) if n not in modules]
        assert not missing, (family, missing)
