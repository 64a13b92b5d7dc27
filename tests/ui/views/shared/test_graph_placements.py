"""Every norm position drawn as its own block: each node of its table a box, an arrow
into it from the node its table says it reads, the shortcuts from their sources, the
placement named in the title, nothing over anything, all in view at a laptop's size."""

from __future__ import annotations

import pytest

from explorer.core.gpt.config import preset
from explorer.core.gpt.family import NormPosition
from explorer.core.gpt.nodes import (BLOCK_INPUT, Kind, block_hook_name, block_input, block_nodes,
                                     eval_source, input_node, order_of, shortcut_sources)
from tests.ui.views.shared.test_graph import (assert_all_in_view, assert_nothing_overlaps,
                                              graph_for, laptop)

LAYER = 1


@pytest.fixture(scope="module")
def laptop_graph():
    """The graph's size in a real 1366 × 768 window (default docks, the banner shown)."""
    return {}


@pytest.mark.parametrize("position", list(NormPosition))
@pytest.mark.parametrize("name", ["tiny", "llama-tiny"])
def test_each_placement_is_drawn_as_its_table_says(qtbot, make_window, laptop_graph, name,
                                                   position):
    if not laptop_graph:
        window = make_window()
        laptop(window, 1366, 768, True)
        laptop_graph["size"] = window.graph.size().toTuple()
    cfg = preset(name, norm_position=position)
    order = order_of(cfg)
    graph = graph_for(qtbot, cfg, 64, laptop_graph["size"], layer=LAYER)
    drawn = [n for n in block_nodes(order) if n.kind != Kind.PATTERN and n.key != "ff"]
    for node in drawn:
        name_ = block_hook_name(LAYER, node.key)
        assert name_ in graph.items, name_
        source = input_node(name_, order)
        if source == block_hook_name(LAYER, "ff"):  # drawn open: its last layer's tensor
            source = eval_source(source, order)
        if source in graph.items and not (node.parent and source == block_hook_name(LAYER, node.parent)):
            # an arrow from what it reads ends at it (the one the table names, not the add)
            into = [e for e in graph.edges.get(source, []) if e.target == name_]
            assert into, (name_, "reads", source)
    for add, source in shortcut_sources(order).items():
        src = block_input(LAYER, order) if source == BLOCK_INPUT else block_hook_name(LAYER, source)
        assert graph.shortcuts[block_hook_name(LAYER, add)][0] == src
    assert order.title in graph.texts["title"].text()
    assert_all_in_view(graph)
    assert_nothing_overlaps(graph)
