"""The block graph as a user meets it: the whole block on a laptop screen, every shape on
its arrow, nothing drawn over anything else, the right shortcuts for every block and
order, right-clicks and keys that act on what is under them, interventions drawn, and a
window that never grows past the screen."""

import numpy as np
import pytest
import torch
from PySide6.QtCore import QRectF, Qt
from PySide6.QtGui import QContextMenuEvent, QPainterPathStroker
from PySide6.QtTest import QTest
from PySide6.QtWidgets import QApplication, QGraphicsSimpleTextItem

from explorer.core.weights.checkpoints import save_checkpoint
from explorer.core.gpt.config import preset
from explorer.core.experiments.interventions import Intervention
from explorer.core.gpt.build import build_model
from explorer.core.gpt.families.gpt2 import MODEL_NODES_AFTER, MODEL_NODES_BEFORE
from explorer.core.gpt.nodes import (all_hook_names,
                                     block_hook_name, block_input, block_title, layer_of,
                                     node_for_hook,
                                     order_of, parse_hook)
from explorer.core.run.passes import Pass
from explorer.core.run.capture import NodeView
from explorer.core.sources import ModelInfo, ModelSpec
from explorer.core.run.stats import tensor_stats
from explorer.ui.views.shared.graph_view import BlockGraphView
from explorer.ui.graph.graph_items import FrameItem
from explorer.ui.base.session import Session
from tests.ui.alone import InlineEngine
from tests.ui.conftest import run_and_wait, wait_rerun


def laptop(window, width, height, banner):
    """The window as on a screen of that size: the first window's default docks."""
    window.resize(width, height)
    window._default_dock_sizes()
    window.banner.setVisible(banner)  # as for a first run on random weights
    for _ in range(3):
        QApplication.processEvents()
    assert window.banner.isVisible() == banner


def texts_of(graph):
    """Every text the graph draws, as scene rectangles with their text (node labels,
    edge labels, titles, notes, caps, the shortcuts' words, the intervention marks)."""
    out = []
    for item in graph.scene.items():
        if isinstance(item, QGraphicsSimpleTextItem) and item.text() and item.isVisible():
            out.append((item.text(), item.sceneBoundingRect(), item))
    return out


def boxes_of(graph):
    return {name: item.sceneBoundingRect() for name, item in graph.items.items()
            if not isinstance(item, FrameItem)}


def assert_all_in_view(graph):
    view = graph.view
    visible = view.mapToScene(view.viewport().rect()).boundingRect()
    for name, rect in boxes_of(graph).items():
        assert visible.contains(rect), f"{name} is outside the view"
    for text, rect, _ in texts_of(graph):
        assert visible.contains(rect), f"'{text}' is outside the view"
    assert view.transform().m11() >= 1.0  # node text at the window's font size at least
    assert graph.font().pointSizeF() * view.transform().m11() >= 9


def assert_nothing_overlaps(graph):
    """No text over another text or a node box (a node's own label and a frame's title
    aside), no text across a frame's border, no arrow through a text."""
    texts = texts_of(graph)
    boxes = boxes_of(graph)
    frames = [item.sceneBoundingRect() for item in graph.items.values() if isinstance(item, FrameItem)]
    x, y, w, h = graph.layout_frame
    frames.append(QRectF(x, y, w, h))
    # a node's own label and its intervention tab lie on it (found through the graph's
    # own items: PySide's parentItem() on these items corrupts the scene)
    owners = {}
    for name, node in graph.items.items():
        for own in (node.text, node.badge, node.shape_text):  # its name, marks and shape line
            if own is not None:
                owners[id(own)] = name
    for i, (text, rect, item) in enumerate(texts):
        inner = rect.adjusted(1, 1, -1, -1)
        own = owners.get(id(item))
        for other, rect2, item2 in texts[i + 1:]:
            if own is not None and owners.get(id(item2)) == own:
                continue
            assert not inner.intersects(rect2.adjusted(1, 1, -1, -1)), f"'{text}' overlaps '{other}'"
        for name, box in boxes.items():
            if name != own:
                assert not inner.intersects(box), f"'{text}' overlaps node {name}"
        for frame in frames:
            if own is None or not isinstance(graph.items[own], FrameItem):
                assert frame.contains(inner) or not frame.intersects(inner), f"'{text}' crosses a frame"
        for source, edges in graph.edges.items():
            for edge in edges:
                if _crosses(edge, inner):
                    raise AssertionError(f"the arrow of {source} runs through '{text}'")
        for add, (_, edge, word) in graph.shortcuts.items():
            if item is not word:
                assert not _crosses(edge, inner), f"the shortcut into {add} runs through '{text}'"
    names = list(boxes)
    for i, a in enumerate(names):
        for b in names[i + 1:]:
            assert not boxes[a].intersects(boxes[b]), f"{a} overlaps {b}"


def _crosses(edge, rect) -> bool:
    outline = QPainterPathStroker()
    outline.setWidth(1)
    return edge.mapToScene(outline.createStroke(edge.path())).intersects(rect)


# ------------------------------------------------------------------ synthetic passes
def synthetic(cfg, tokens: int, spec=None):
    """A model description and a pass with the shapes a real pass of ``tokens`` tokens
    gives for ``cfg`` (the node table's shapes), for models too large to build here."""
    info = ModelInfo(label="synthetic", size="", config=cfg, trained=False, device="cpu",
                     dtype="float32", notices=(), spec=spec or ModelSpec(preset="tiny"))
    gen = torch.Generator().manual_seed(0)
    views = {}
    for name in all_hook_names(cfg, inside=True):  # attention's steps too: it can open
        node = node_for_hook(name, order_of(cfg))
        shape = node.shape(cfg, 1, tokens)
        sample = torch.randn(4, 8, generator=gen) * (1 + len(views) % 7)
        views[name] = NodeView(name, node, shape, "float32", "cpu", tensor_stats(sample, node.hist), None)
    return info, Pass(ids=[0] * tokens, pieces=["x"] * tokens, views=views)


def graph_for(qtbot, cfg, tokens, size, layer=0, expand=True, attention=False):
    session = Session()
    info, result = synthetic(cfg, tokens)
    session.set_model(info)
    graph = BlockGraphView(session, InlineEngine(None))
    qtbot.addWidget(graph)
    graph.resize(*size)
    graph.show()
    qtbot.waitExposed(graph)
    graph.expand_ff.setChecked(expand)
    graph.open_att.setChecked(attention)
    session.set_layer(layer)
    session.set_prompt(result)
    qtbot.waitUntil(lambda: session.pending() == 0, timeout=60_000)
    return graph


# ------------------------------------------------------------------ the tests
@pytest.mark.parametrize("width,height,banner", [(1366, 768, True), (1150, 700, True),
                                                 (1150, 700, False)])
@pytest.mark.slow
def test_the_whole_block_fits_a_laptop_window(qtbot, make_window, tmp_path, width, height, banner):
    """In the real window (default docks, the first-run banner showing), then on the
    same area with the shapes of gpt2-small and gpt2-xl at a full 1024-token context."""
    post = save_checkpoint(build_model(preset("tiny", norm_position="post")), tmp_path / "post.safetensors")
    for window in (make_window(), make_window(preset=None, checkpoint=str(post))):
        laptop(window, width, height, banner)
        run_and_wait(qtbot, window, max_tokens=1)
        graph = window.graph
        for expand, attention in ((True, False), (False, False), (False, True)):
            graph.expand_ff.setChecked(expand)
            graph.open_att.setChecked(attention)  # its steps come from the engine
            qtbot.waitUntil(lambda: all(label.text() for label in graph.edge_labels.values()),
                            timeout=60_000)  # every shape
            QApplication.processEvents()
            assert window.width() <= width and window.height() <= height
            assert_all_in_view(graph)
            assert_nothing_overlaps(graph)
        graph.open_att.setChecked(False)
    size = graph.size().toTuple()
    for name in ("gpt2-small", "gpt2-xl"):
        for order in ("pre", "post"):
            cfg = preset(name, norm_position=order)
            for expand in (True, False):
                alone = graph_for(qtbot, cfg, cfg.context_length, size, layer=cfg.n_layers // 2,
                                  expand=expand)
                ff = block_hook_name(cfg.n_layers // 2, "ff.layers.1" if expand else "ff")
                width = cfg.hidden_dim if expand else cfg.emb_dim
                assert alone.edge_labels[ff].text() == f"(1, 1024, {width})"
                assert_all_in_view(alone)
                assert_nothing_overlaps(alone)


@pytest.fixture(scope="module")
def graph_sizes():
    """The graph's size in the real window at each laptop size (default docks, banner)."""
    return {}


@pytest.mark.parametrize("screen", [(1366, 768), (1150, 700)])
@pytest.mark.parametrize("name", ["smollm2-135m", "llama3.2-1b", "qwen3-0.6b"])
@pytest.mark.parametrize("attention", [False, True])
def test_a_llama_block_fits_a_laptop_window_with_its_feed_forward_or_attention_open(
        qtbot, make_window, graph_sizes, screen, name, attention):
    """The Llama / Qwen block drawn as its own: RMSNorms, no dropout, no position
    embedding, SwiGLU as a fork (fc1 ∥ fc2) and a join (the product), attention with
    RoPE and the keys and values its query heads share; whole and unoverlapped in the
    graph of a 1366 × 768 or 1150 × 700 window (the graph's size there, default docks),
    at 1,024 tokens."""
    if screen not in graph_sizes:
        window = make_window()
        laptop(window, *screen, True)
        graph_sizes[screen] = window.graph.size().toTuple()
    cfg = preset(name)
    graph = graph_for(qtbot, cfg, 1024, graph_sizes[screen], layer=cfg.n_layers // 2,
                      attention=attention)
    layer = cfg.n_layers // 2
    drawn = {parse_hook(n)[1] for n in graph.items if layer_of(n) == layer}
    assert not any(k.startswith(("drop", "ff.layers")) for k in drawn)
    if attention:
        assert {"att.queries_rope", "att.keys_rope", "att.keys_repeated",
                "att.values_repeated"} <= drawn
        assert ("att.q_norm" in drawn) == cfg.qk_norm
        assert graph.edge_labels[block_hook_name(layer, "att.keys")].text() == \
            f"(1, {cfg.kv_heads}, 1024, {cfg.head_dim})"
    else:
        assert {"ff.fc1", "ff.fc2", "ff.silu", "ff.product", "ff.fc3", "norm1", "norm2"} <= drawn
        fc1, fc2 = (graph.items[block_hook_name(layer, k)].sceneBoundingRect()
                    for k in ("ff.fc1", "ff.fc2"))
        assert abs(fc1.center().y() - fc2.center().y()) < 1 and fc1.right() < fc2.left()
        assert graph.edge_labels[block_hook_name(layer, "ff.product")].text() == \
            f"(1, 1024, {cfg.hidden_dim})"
    assert f"{block_title(layer, cfg.n_layers)} · Llama / Qwen" in [t for t, _, _ in texts_of(graph)] \
        or f"{block_title(layer, cfg.n_layers)} · trf_blocks.{layer} · Llama / Qwen" in [
            t for t, _, _ in texts_of(graph)]
    assert_all_in_view(graph)
    assert_nothing_overlaps(graph)


def test_every_edge_carries_its_live_shape_and_the_expansion_comes_from_the_config(qtbot):
    cfg = preset("tiny")
    graph = graph_for(qtbot, cfg, 7, (900, 600))
    labels = {name: label.text() for name, label in graph.edge_labels.items()}
    assert labels[block_hook_name(0, "ff.layers.0")] == "(1, 7, 128)"
    assert labels[block_hook_name(0, "ff.layers.1")] == "(1, 7, 128)"
    assert labels[block_hook_name(0, "ff.layers.2")] == "(1, 7, 32)"
    assert labels[block_hook_name(0, "norm2")] == "(1, 7, 32)"  # into the feed-forward
    assert labels[block_hook_name(0, "att.attn_weights")] == "(1, 4, 7, 7)"
    assert labels["drop_emb"] == "(1, 7, 32)"  # the block's input
    assert graph.items[block_hook_name(0, "ff")].text.text() == \
        f"Feed-forward · {cfg.hidden_dim // cfg.emb_dim}× wider inside"
    # hovering an arrow tells its tensor
    tip = graph.edges[block_hook_name(0, "ff.layers.1")][0].toolTip()
    assert "(1, 7, 128)" in tip and "std" in tip


@pytest.mark.parametrize("order", ["pre", "post"])
def test_shortcuts_leave_the_right_node_in_every_block(qtbot, order):
    cfg = preset("tiny", n_layers=4, norm_position=order)
    graph = graph_for(qtbot, cfg, 4, (900, 600))
    for layer in range(4):
        graph.session.set_layer(layer)
        expected = {block_hook_name(layer, "add1"): block_input(layer, order),
                    block_hook_name(layer, "add2"): block_hook_name(layer, "add1" if order == "pre" else "norm1")}
        assert {add: s[0] for add, s in graph.shortcuts.items()} == expected
        for add, (source, edge, _) in graph.shortcuts.items():
            path = edge.path()
            fork = path.elementAt(0)
            end = next(path.elementAt(i) for i in range(1, path.elementCount())
                       if path.elementAt(i).isMoveTo())  # the arrowhead starts at the tip
            # it forks from the arrow that leaves its source ...
            assert any(_on_path(e, fork.x, fork.y) for e in graph.edges[source])
            # ... and enters its add from the left, at the middle
            box = graph.items[add].sceneBoundingRect()
            assert abs(end.x - box.left()) < 1.5 and abs(end.y - box.center().y()) < 1.5
        # the input is drawn, named as a block of the same scheme
        assert block_input(layer, order) in graph.items
        title = graph.texts["title"].text()
        assert title.startswith(f"Block {layer} of 4 · trf_blocks.{layer} · ")
        assert ("Pre-LN" if order == "pre" else "Post-LN") in title
        assert graph.layer_box.text() == f"Block {layer} of 4"
        cap, after = graph.texts["cap-before"].text(), graph.texts["cap-after"].text()
        assert (f"blocks 0–{layer - 1}" in cap if layer > 1 else "block 0" in cap) if layer \
            else "block" not in cap
        assert (f"block {layer + 1}" in after if layer == 2 else f"blocks {layer + 1}–3" in after) \
            if layer < 3 \
            else "block" not in after
        assert_nothing_overlaps(graph)


def _on_path(edge, x, y) -> bool:
    path = edge.path()
    points = [path.elementAt(i) for i in range(path.elementCount())]
    for a, b in zip(points, points[1:]):
        if b.isMoveTo():
            continue
        ax, ay, bx, by = a.x, a.y, b.x, b.y
        length = ((bx - ax) ** 2 + (by - ay) ** 2) ** 0.5
        if length == 0:
            continue
        t = max(0, min(1, ((x - ax) * (bx - ax) + (y - ay) * (by - ay)) / length ** 2))
        if ((ax + t * (bx - ax) - x) ** 2 + (ay + t * (by - ay) - y) ** 2) ** 0.5 < 0.6:
            return True
    return False


def test_caps_unfold_on_a_click_and_for_a_selected_node(qtbot):
    cfg = preset("tiny", n_layers=4)
    graph = graph_for(qtbot, cfg, 4, (900, 700), layer=2)
    assert "tok_emb" not in graph.items and "out_head" not in graph.items
    cap = graph.texts["cap-before"]
    view = graph.view
    QTest.mouseClick(view.viewport(), Qt.LeftButton, Qt.NoModifier,
                     view.mapFromScene(cap.sceneBoundingRect().center()))
    assert {"tok_emb", "pos_emb", "emb_add", "drop_emb"} <= set(graph.items)
    assert any("blocks 0–1 run here" in t for t, _, _ in texts_of(graph))
    graph.session.set_node("out_head")  # e.g. the forward trace reaches the head
    assert {"final_norm", "out_head"} <= set(graph.items)
    assert graph.items["out_head"].pen().width() == 4
    assert_nothing_overlaps(graph)
    assert set(MODEL_NODES_BEFORE[i].key for i in range(4)) | set(n.key for n in MODEL_NODES_AFTER) <= set(graph.items)


@pytest.mark.parametrize("layer", [0, 2])
def test_a_gemma_blocks_cap_unfolds_to_the_scaled_embedding_and_every_label_fits(qtbot, layer):
    """Gemma 3's stream starts at the token embedding times √emb_dim: block 0's input is
    the scaled embedding, its cap the token embedding above it; a later block's cap
    unfolds to both and the blocks between. The GeGLU gate's narrowed nodes hold their
    labels ("GELU (tanh)")."""
    cfg = preset("gemma3-tiny")
    graph = graph_for(qtbot, cfg, 4, (900, 700), layer=layer)
    assert "tok_emb" not in graph.items
    assert (layer == 0) == ("emb_scaled" in graph.items)  # block 0's input box
    cap = graph.texts["cap-before"]
    assert cap.text() == "▸ Token embedding × √emb_dim" + (", blocks 0–1" if layer else "")
    view = graph.view
    QTest.mouseClick(view.viewport(), Qt.LeftButton, Qt.NoModifier,
                     view.mapFromScene(cap.sceneBoundingRect().center()))
    assert {"tok_emb", "emb_scaled"} <= set(graph.items)
    tok, scaled = (graph.items[k].sceneBoundingRect() for k in ("tok_emb", "emb_scaled"))
    assert tok.bottom() < scaled.top()  # the lookup above its scale, the stream upward
    assert "tok_emb" in graph.edges and "emb_scaled" in graph.edges  # each arrow carries its own
    assert any("blocks 0–1 run here" in t for t, _, _ in texts_of(graph)) == bool(layer)
    for name, node in graph.items.items():
        if isinstance(node, FrameItem):
            continue
        box, label = node.sceneBoundingRect(), node.text.sceneBoundingRect()
        assert box.left() <= label.left() and label.right() <= box.right(), name
    assert_nothing_overlaps(graph)


def test_a_mixture_of_experts_draws_its_router_and_weights_in_the_feed_forward(qtbot):
    """Qwen3-MoE's feed-forward frame: the router, then the top-k weights, titled by its
    experts; every label in its box, nothing over anything."""
    cfg = preset("qwen3moe-tiny")
    graph = graph_for(qtbot, cfg, 4, (900, 700), layer=1)
    gate, routing = (graph.items[block_hook_name(1, k)].sceneBoundingRect()
                     for k in ("ff.gate", "ff.routing"))
    assert gate.top() > routing.bottom()  # the feed-forward half runs upward
    assert "Mixture of experts · 2 of 8 a token" in [t for t, _, _ in texts_of(graph)]
    assert graph.edge_labels[block_hook_name(1, "ff.routing")].text() == "(1, 4, 8)"
    assert_nothing_overlaps(graph)


def test_the_embeddings_dropout_has_one_name_in_every_block(qtbot):
    """Block 1's input and the unfolded embeddings above block 3 are the same node, under
    the node table's one label."""
    cfg = preset("tiny", n_layers=4)
    graph = graph_for(qtbot, cfg, 4, (900, 700), layer=0)
    assert graph.items["drop_emb"].text.text() == "Embedding dropout"
    graph.session.set_layer(2)
    graph.session.set_node("drop_emb")  # unfolds the embeddings above block 3
    qtbot.waitUntil(lambda: "drop_emb" in graph.items, timeout=60_000)
    assert graph.items["drop_emb"].text.text() == "Embedding dropout"


def test_a_right_click_opens_the_menu_of_the_node_under_the_pointer(qtbot, make_window):
    window = make_window()
    laptop(window, 1366, 768, True)
    graph, view = window.graph, window.graph.view
    opened = []
    for name, item in list(graph.items.items()):
        if isinstance(item, FrameItem):
            centre = item.mapToScene(item.text.pos() + item.text.boundingRect().center())
        else:
            centre = item.sceneBoundingRect().center()
        pos = view.mapFromScene(centre)
        QTest.mousePress(view.viewport(), Qt.RightButton, Qt.NoModifier, pos)
        QApplication.sendEvent(view.viewport(), QContextMenuEvent(
            QContextMenuEvent.Mouse, pos, view.viewport().mapToGlobal(pos)))
        QTest.mouseRelease(view.viewport(), Qt.RightButton, Qt.NoModifier, pos)
        menu = graph.menu
        opened.append((menu.title(), [act.text() for act in menu.actions()]))
        assert menu.isVisible() and opened[-1][0] == name
        menu.close()
        if name.endswith(("add1", "add2")):
            assert "Remove its shortcut" in opened[-1][1]
    assert len(opened) == len(graph.items)
    assert window.session.node == "trf_blocks.0.norm1"  # a right-click selects nothing


def test_up_and_down_in_the_graph_change_the_block(qtbot, make_window):
    window = make_window()
    graph = window.graph
    graph.view.setFocus()
    before = graph.view.horizontalScrollBar().value(), graph.view.verticalScrollBar().value()
    QTest.keyClick(graph.view, Qt.Key_Down)
    assert window.session.layer == 1 and graph.layer_box.text() == "Block 1 of 2"
    QTest.keyClick(graph.view, Qt.Key_Up)
    assert window.session.layer == 0
    assert (graph.view.horizontalScrollBar().value(), graph.view.verticalScrollBar().value()) == before


def test_interventions_are_drawn_on_the_graph(qtbot, make_window):
    window = make_window()
    session, graph = window.session, window.graph
    run_and_wait(qtbot, window, max_tokens=1)
    session.set_interventions([Intervention("no-shortcut", "trf_blocks.0.add2"),
                               Intervention("scale", "trf_blocks.0.norm2", k=2.0),
                               Intervention("zero", "trf_blocks.0.ff.layers.1"),
                               Intervention("heads", "trf_blocks.0.att", heads=(1,))], on=True)
    wait_rerun(qtbot, window)  # the change runs the prompt again
    _, edge, word = graph.shortcuts["trf_blocks.0.add2"]
    assert edge.pen().style() == Qt.DashLine and word.text() == "✕ removed"
    assert graph.shortcuts["trf_blocks.0.add1"][1].pen().style() == Qt.SolidLine
    assert graph.items["trf_blocks.0.norm2"].badge.text() == "× 2"
    assert graph.items["trf_blocks.0.ff.layers.1"].badge.text() == "× 0"
    assert graph.items["trf_blocks.0.ff.layers.1"].hatched
    assert graph.items["trf_blocks.0.att"].badge.text() == "heads 1 off"
    assert graph.items["trf_blocks.0.add2"].badge.text() == "no shortcut"
    assert not graph.items["trf_blocks.0.norm1"].hatched
    # a zeroed node has no place on the log colour scale: the scale says so (with zero
    # biases the GELU's zeros run on through Linear 2, dropout and the add without shortcut)
    zeros = [n for n in graph.items if session.current.views[n].stats.std == 0]
    assert "trf_blocks.0.ff.layers.1" in zeros and "trf_blocks.0.add2" in zeros
    assert graph.scale.zero_note.text() == f"· {len(zeros)} nodes exactly 0 (white)"
    assert float(graph.scale.lo.text()) > 0
    session.set_interventions([])
    assert graph.shortcuts["trf_blocks.0.add2"][2].text() == "shortcut"
    assert not graph.items["trf_blocks.0.norm2"].hatched


def test_the_selected_node_and_the_edge_it_feeds_are_highlighted(qtbot, make_window):
    window = make_window()
    graph = window.graph
    window.session.set_node("trf_blocks.1.ff.layers.1")
    assert window.session.layer == 1  # the graph follows the trace to another block
    assert graph.items["trf_blocks.1.ff.layers.1"].pen().width() == 4
    assert [e.pen().widthF() for e in graph.edges["trf_blocks.1.ff.layers.1"]] == [3]
    assert all(e.pen().widthF() < 3 for e in graph.edges["trf_blocks.1.ff.layers.0"])


def test_wheel_zooms_and_fit_brings_the_whole_block_back(qtbot, make_window):
    window = make_window()
    laptop(window, 1366, 768, True)
    graph = window.graph
    fitted = graph.view.transform().m11()
    graph.view.zoom(2.0)
    assert graph.view.transform().m11() == pytest.approx(2 * fitted)
    graph.view.setFocus()
    QTest.keyClick(graph.view, Qt.Key_F)
    assert graph.view.transform().m11() == pytest.approx(fitted)
    assert_all_in_view(graph)


def test_the_window_never_grows_past_the_screen(qtbot, make_window):
    window = make_window()
    laptop(window, 1366, 768, True)

    def within():
        QApplication.processEvents()
        assert window.width() <= 1366 and window.height() <= 768
        assert window.minimumSizeHint().width() <= 1366 and window.minimumSizeHint().height() <= 768

    run_and_wait(qtbot, window, max_tokens=6)
    within()
    from PySide6.QtCore import QUrl
    for step in ("3", "prompt", "5"):  # clicking generated tokens
        window.prompt.output.anchorClicked.emit(QUrl(step))
        within()
    for name in ("trf_blocks.1.att.attn_weights", "out_head", "trf_blocks.0.ff.layers.1"):
        window.session.set_node(name)
        within()
    for key in window.docks:  # every tab in front
        window.show_view(key)
        within()
    window.session.set_status("A very long status message " * 20)
    within()
    window.models.load(ModelSpec(preset="tiny", norm_position="post"))
    qtbot.waitUntil(lambda: not window.models.loading, timeout=60_000)
    within()


def test_numbers_of_a_constant_or_zero_node_never_read_0_on_a_log_scale(qtbot):
    cfg = preset("tiny")
    graph = graph_for(qtbot, cfg, 4, (900, 600))
    current = graph.session.current
    zero = block_hook_name(0, "drop1")
    stats = tensor_stats(torch.zeros(4, 8), node_for_hook(zero).hist)
    current.views[zero] = NodeView(zero, node_for_hook(zero), (1, 4, 32), "float32", "cpu", stats, None)
    graph.refresh()
    assert graph.items[zero].brush().color().name() == "#ffffff"
    assert graph.scale.zero_note.text() == "· 1 node exactly 0 (white)"
    lo = float(graph.scale.lo.text())
    whole = set(all_hook_names(cfg)) | set(graph.items)  # one scale: the whole model's nodes
    positive = [v.stats.std for n, v in current.views.items() if n in whole and v.stats.std > 0]
    assert lo == pytest.approx(min(positive), rel=1e-2) and lo > 0
    assert np.isfinite(float(graph.scale.hi.text()))


def test_fitting_never_feeds_back_through_the_scroll_bars(qtbot):
    """Scroll bars that appear shrink the view, which would change the fit, which would
    hide them again: at some sizes a real window stayed busy for good. The fit is taken
    on the room without bars, and bars exist only where the drawing cannot fit at the
    smallest scale — so the bars never change what the fit sees."""
    from PySide6.QtCore import Qt as QtNS
    cfg = preset("gpt2-small", n_layers=4, norm_position="post")
    graph = graph_for(qtbot, cfg, 4, (700, 420))
    view = graph.view
    for width, height in ((900, 600), (700, 420), (420, 260), (300, 200)):
        graph.resize(width, height)
        QApplication.processEvents()
        room = view.contentsRect().size()
        s = view.transform().m11()
        fits = view.drawing.width() * s <= room.width() + 0.5 and view.drawing.height() * s <= room.height() + 0.5
        assert view.horizontalScrollBarPolicy() == (QtNS.ScrollBarAlwaysOff if fits else QtNS.ScrollBarAsNeeded)
        assert s == pytest.approx(view.fit_scale())  # the same, with or without bars
        if not fits:
            assert s == pytest.approx(1.0)  # the smallest scale: scrolled, never shrunk below
    assert view.horizontalScrollBarPolicy() == QtNS.ScrollBarAsNeeded  # 300x200: it scrolls


def test_every_node_colour_gets_the_label_colour_that_reads_on_it(qtbot):
    """Black or white, whichever contrasts more: at least WCAG's 4.5 : 1 on every colour
    of both colour maps (white on viridis's yellow and lime did not)."""
    from explorer.ui.graph.graph_colours import colour, text_colour

    def luminance(c):
        f = lambda v: v / 12.92 if v <= 0.04045 else ((v + 0.055) / 1.055) ** 2.4  # noqa: E731
        return 0.2126 * f(c.redF()) + 0.7152 * f(c.greenF()) + 0.0722 * f(c.blueF())

    from explorer.ui.graph.contribution_colours import diverging
    fills = [colour(i / 100) for i in range(101)]  # the statistics' scale (viridis)
    fills += [diverging(v / 50, 1.0) for v in range(-50, 51)]  # a logit's parts (Why)
    for fill in fills:
        a, b = sorted((luminance(fill), luminance(text_colour(fill))))
        assert (b + 0.05) / (a + 0.05) >= 4.5, fill.name()
    assert text_colour(colour(1.0)).name() == "#000000"  # yellow: black
    assert text_colour(colour(0.0)).name() == "#ffffff"  # dark purple: white
