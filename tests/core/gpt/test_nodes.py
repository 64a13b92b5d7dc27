"""The node table owns names, parsing and roles; the rest of the app asks it."""

import pytest

from explorer.core.gpt import nodes
from explorer.core.run.analysis import lens_nodes
from explorer.core.gpt.config import preset
from explorer.core.gpt.nodes import (all_hook_names, block_module_name, block_output, block_title,
                                     drawn_beside, head_label, layer_of, parse_hook,
                                     residual_nodes, same_node_in_layer, short_label)


def test_parse_hook_splits_every_node_of_both_orders():
    for position in ("pre", "post"):
        cfg = preset("tiny", norm_position=position)
        for name in all_hook_names(cfg):
            layer, key = parse_hook(name)
            if layer is None:
                assert key == name
            else:
                assert nodes.block_hook_name(layer, key) == name
    assert parse_hook("trf_blocks.11.ff.layers.1") == (11, "ff.layers.1")
    assert parse_hook("out_head") == (None, "out_head")
    for bad in ("trf_blocks.x.norm1", "trf_blocks.3.nothing", "head", ""):
        with pytest.raises(KeyError):
            parse_hook(bad)


def test_roles_and_positions():
    assert block_output("pre") == "add2" and block_output("post") == "norm2"
    assert residual_nodes("post") == ("norm1", "norm2")
    assert {k: n.key for k, n in drawn_beside("pre").items()} == {"att": nodes.PATTERN}
    assert same_node_in_layer("trf_blocks.0.ff.layers.1", 5) == "trf_blocks.5.ff.layers.1"
    assert same_node_in_layer("final_norm", 5) == "final_norm"
    assert layer_of("trf_blocks.7.add1") == 7 and layer_of("tok_emb") is None
    assert short_label("trf_blocks.3.add2") == "B3 add2"
    # one numbering: blocks and heads from 0, the number in the module's name
    assert block_title(3, 12) == "Block 3 of 12" and block_module_name(3) == "trf_blocks.3"
    assert head_label(3, 0) == "B3 H0" and head_label(0, 11) == "B0 H11"
    assert lens_nodes(2, "post") == ["trf_blocks.0.norm1", "trf_blocks.0.norm2",
                                     "trf_blocks.1.norm1", "trf_blocks.1.norm2"]
    with pytest.raises(ValueError):
        residual_nodes("middle")


def test_every_nodes_words_name_its_own_orders_neighbours():
    """What a node reads and what its shortcut carries, in each order's words: a Post-LN
    LayerNorm 1 comes after the first add, its attention reads the block's input, its
    second add's shortcut is LayerNorm 1's output."""
    from explorer.core.gpt.nodes import node_for_hook
    said = {
        "pre": {"norm1": "block's input, before attention", "norm2": "first add's output, before",
                "att": "on LayerNorm 1's output", "add1": "the shortcut, the block's input",
                "add2": "first add's output (add1)", "drop1": "first of its two uses",
                "drop2": "second of its two uses"},
        "post": {"norm1": "first add's output, after attention", "norm2": "second add's output",
                 "att": "on the block's input", "add1": "the shortcut, the block's input",
                 "add2": "LayerNorm 1's output (norm1)", "drop1": "first of its two uses",
                 "drop2": "second of its two uses"},
    }
    for order, words in said.items():
        for key, text in words.items():
            assert text in node_for_hook(f"trf_blocks.2.{key}", order).description, (order, key)
    assert "before attention" not in node_for_hook("trf_blocks.0.norm1", "post").description
    assert "(add1)" not in node_for_hook("trf_blocks.0.add2", "post").description


def test_every_kind_of_node_is_one_record_and_a_histogram_range():
    """A new kind of node (nodes.Kind) fails here, naming what it lacks."""
    from explorer.core.gpt import nodes
    from explorer.core.gpt.node_types import _HIST_BY_KIND
    from explorer.core.gpt.nodes import Kind
    from explorer.core.lessons.kinds import KIND_LESSONS

    missing = [f"{kind.value}: its histogram range (core/gpt/node_types.py _HIST_BY_KIND)"
               for kind in Kind if kind not in _HIST_BY_KIND]
    missing += [f"{kind.value}: its record (core/lessons/kinds.py KIND_LESSONS)"
                for kind in Kind if kind not in KIND_LESSONS]
    for kind, lesson in KIND_LESSONS.items():
        lacks = [field for field, there in (("what", lesson.what.strip()),
                                            ("mistake", lesson.mistake.strip()),
                                            ("questions", lesson.questions),
                                            ("formula", callable(lesson.formula))) if not there]
        missing += [f"{kind.value}: the record's {field}" for field in lacks]
        assert all(callable(q) for q in lesson.questions), kind
    assert not missing, "\n".join(missing)
    assert set(_HIST_BY_KIND) == set(KIND_LESSONS) == set(Kind)  # nothing that is no kind
    assert all(type(kind) is Kind for kind in list(_HIST_BY_KIND) + list(KIND_LESSONS))
    used = {n.kind for family in nodes.FAMILIES.values() for order in family.orders.values()
            for n in order}
    used |= {n.kind for family in nodes.FAMILIES.values()
             for n in family.before + family.after + family.attention_inside}
    assert used == set(Kind)  # every kind is some node's, in one family or another
    import pytest
    with pytest.raises(ValueError):
        nodes.Node("x", "X", "a node of no known kind", "convolution", "emb")
