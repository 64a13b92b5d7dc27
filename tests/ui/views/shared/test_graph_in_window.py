"""The block graph in the window, driven as a user would: built from the node table in
either order, the feed-forward framed, keys and the strip, clicks that inspect."""

import pytest
import torch
from PySide6.QtCore import QPointF, Qt
from PySide6.QtTest import QTest
from explorer.core.gpt.node_types import Kind
from explorer.core.run.capture import Capture
from explorer.core.gpt.config import preset
from explorer.core.gpt.build import build_model
from explorer.core.gpt.families.gpt2 import MODEL_NODES_AFTER, MODEL_NODES_BEFORE
from explorer.core.gpt.nodes import (FEED_FORWARD, PATTERN,
                                     block_hook_name,
                                     block_input, block_nodes)
from explorer.core.gpt.tokenizer import encode
from tests.ui.conftest import run_and_wait


def expected_graph_names(cfg, layer, expand=True, caps=False):
    """What the graph draws: the block's nodes and its input; the embeddings before it
    and the final norm and head after it once their caps are unfolded."""
    names = {block_hook_name(layer, n.key) for n in block_nodes(cfg.norm_position)
             if expand or n.parent != FEED_FORWARD}
    names.add(block_input(layer, cfg.norm_position))
    if caps:
        names |= {n.key for n in MODEL_NODES_BEFORE + MODEL_NODES_AFTER}
    return names


def chain(graph, start):
    """The nodes the arrows lead through from ``start`` (the pattern's chip aside)."""
    out, name = [], start
    while True:
        nxt = [e.target for e in graph.edges.get(name, []) if e.target and not e.dashed]
        if not nxt:
            return out
        name = nxt[0]
        out.append(name)


def test_graph_is_built_from_the_node_table(make_window):
    window = make_window()
    cfg = window.session.model.config
    assert set(window.graph.items) == expected_graph_names(cfg, 0)
    window.graph.expand_ff.setChecked(False)
    assert set(window.graph.items) == expected_graph_names(cfg, 0, expand=False)
    window.graph.toggle_cap("before")
    window.graph.toggle_cap("after")
    assert set(window.graph.items) == expected_graph_names(cfg, 0, expand=False, caps=True)
    assert "UNTRAINED" in window.model_label.text()


def test_post_ln_model_is_drawn_in_post_ln_order(make_window, tmp_path):
    from explorer.core.weights.checkpoints import save_checkpoint
    path = save_checkpoint(build_model(preset("tiny", norm_position="post")),
                           tmp_path / "post.safetensors")
    window = make_window(preset=None, checkpoint=str(path))
    assert window.session.model.config.norm_position == "post"
    for layer in (0, 1):
        window.session.set_layer(layer)
        steps = chain(window.graph, block_input(layer, "post"))
        assert [name.split(".", 2)[2] for name in steps] == [
            n.key for n in block_nodes("post") if n.kind not in (Kind.PATTERN, Kind.FFN)]


def test_the_feed_forward_frames_its_layers_and_the_block_is_one_of_n(qtbot, make_window):
    window = make_window()
    graph = window.graph
    frame = graph.items["trf_blocks.0.ff"]
    for key in ("ff.layers.0", "ff.layers.1", "ff.layers.2"):
        assert frame.sceneBoundingRect().contains(graph.items[f"trf_blocks.0.{key}"].sceneBoundingRect())
    assert frame.zValue() < graph.items["trf_blocks.0.ff.layers.1"].zValue()
    assert "trf_blocks.0.ff" not in graph.edge_labels  # no arrow into or out of it as a step
    n = window.session.model.config.n_layers
    assert graph.block_count.text() == f"× {n}"
    assert graph.texts["title"].text() == f"Block 0 of {n} · trf_blocks.0 · Pre-LN"
    assert graph.texts["cap-after"].text() == "▸ block 1, final norm, output head"
    assert graph.texts["cap-before"].text() == "▸ Token + position embeddings"
    assert graph.strip.caption.text().startswith(f"All {n} blocks")
    window.session.set_layer(1)
    assert graph.texts["cap-before"].text() == "▸ Token + position embeddings, block 0"
    assert graph.texts["cap-after"].text() == "▸ final norm, output head"
    frame = graph.items["trf_blocks.1.ff"]  # a click on its title selects the feed-forward
    QTest.mouseClick(graph.view.viewport(), Qt.LeftButton, Qt.NoModifier,
                     graph.view.mapFromScene(frame.mapToScene(frame.text.pos() + QPointF(4, 6))))
    assert window.session.node == "trf_blocks.1.ff"
    graph.expand_ff.setChecked(False)  # folded, the feed-forward is one step again
    assert "trf_blocks.1.ff" in graph.edge_labels
    pre = make_window()
    assert [name.split(".", 2)[2] for name in chain(pre.graph, "drop_emb")] == [
        n.key for n in block_nodes("pre") if n.kind not in (Kind.PATTERN, Kind.FFN)]


def test_layer_keys_and_strip_change_the_block(qtbot, make_window):
    window = make_window()
    window.graph.view.setFocus()
    QTest.keyClick(window.graph, Qt.Key_Down)
    assert window.session.layer == 1
    assert "trf_blocks.1.add2" in window.graph.items and "trf_blocks.0.norm1" not in window.graph.items
    assert "trf_blocks.0.add2" in window.graph.items  # block 1's output, the input drawn
    QTest.keyClick(window.graph, Qt.Key_Up)
    assert window.session.layer == 0
    strip = window.graph.strip
    QTest.mouseClick(strip, Qt.LeftButton, Qt.NoModifier, strip.rect().topRight() + type(strip.rect().topRight())(-2, 5))
    assert window.session.layer == 1


def test_clicking_a_node_shows_its_real_statistics(qtbot, make_window):
    window = make_window()
    run_and_wait(qtbot, window, max_tokens=1)
    window.session.show_step(None)  # the prompt pass
    item = window.graph.items["trf_blocks.0.norm2"]
    view = window.graph.view
    pos = view.mapFromScene(item.scenePos())
    view.ensureVisible(item)
    pos = view.mapFromScene(item.scenePos())
    QTest.mouseClick(view.viewport(), Qt.LeftButton, Qt.NoModifier, pos)
    assert window.session.node == "trf_blocks.0.norm2"
    assert "trf_blocks.0.norm2" in window.view("inspector").title.text()
    assert "(1, 4, 32)" in window.view("inspector").title.text()
    # the same model, run directly through the core, gives the same numbers
    model = build_model(preset("tiny"), seed=0)
    with torch.inference_mode(), Capture(model, "trf_blocks.0.norm2") as cap:
        model(torch.tensor([encode("Every effort moves you")]))
    shown = window.view("inspector").statistics()
    assert float(shown["std"]) == pytest.approx(cap["trf_blocks.0.norm2"].stats.std, rel=1e-4)
    assert float(shown["mean"]) == pytest.approx(cap["trf_blocks.0.norm2"].stats.mean, abs=1e-5)
    assert window.graph.items["trf_blocks.0.norm2"].pen().width() == 4  # highlighted


def test_clicking_every_node_shows_its_hook_name_and_shape(qtbot, make_window):
    window = make_window()
    run_and_wait(qtbot, window, max_tokens=1)
    window.session.show_step(None)
    # the views redraw one per event-loop turn: the first node clicked is the one
    # already selected, which asks the inspector nothing more
    qtbot.waitUntil(lambda: window.session.pending() == 0, timeout=60_000)
    view = window.graph.view
    for layer in (0, 1):
        window.session.set_layer(layer)
        pattern = block_hook_name(layer, PATTERN)  # the pass made block 1's; block 2's now
        qtbot.waitUntil(lambda: pattern in window.session.prompt.views, timeout=60_000)
        window.graph.toggle_cap("before")  # the embeddings, the final norm and the head too
        window.graph.toggle_cap("after")
        for name in list(window.graph.items):
            window.session.set_layer(layer)  # the input (the block before's output) moves on
            item = window.graph.items[name]
            view.ensureVisible(item, 5, 5)
            where = item.mapToScene(item.text.pos() + QPointF(4, 6))  # a frame by its title
            QTest.mouseClick(view.viewport(), Qt.LeftButton, Qt.NoModifier, view.mapFromScene(where))
            assert window.session.node == name
            shape = str(window.session.prompt.views[name].shape)
            title = window.view("inspector").title.text()
            assert f"<b>{name}</b>" in title and shape in title, (name, title)
        window.graph.toggle_cap("before")
        window.graph.toggle_cap("after")
    assert window.session.layer == 1
