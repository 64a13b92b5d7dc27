"""The Weight matrices view follows the selected node: its matrix as a heatmap, to scale
beside the block's other matrices, its numbers, and what it did to the last token."""

import numpy as np
import torch
from PySide6.QtWidgets import QApplication, QGraphicsRectItem

from explorer.ui.views.look.weights_view import WeightsView
from tests.ui.alone import Alone


def test_the_selected_linear_shows_its_matrix_to_scale_and_what_it_did(qtbot):
    alone = Alone(qtbot)
    alone.run("Every effort moves you", max_tokens=1)
    alone.session.show_step(None)
    view = alone.view(WeightsView, height=520)
    alone.session.set_node("trf_blocks.1.ff.layers.0")
    assert view.choice.currentData() == "trf_blocks.1.ff.layers.0"  # it follows the selection
    qtbot.waitUntil(lambda: view.matrix is not None and view.matrix.node == "trf_blocks.1.ff.layers.0",
                    timeout=60_000)
    w = alone.loaded.model.get_submodule("trf_blocks.1.ff.layers.0").weight.detach()
    assert view.image.image.shape == (128, 32)
    np.testing.assert_allclose(view.image.image, w.numpy(), atol=1e-6)
    text = view.note.text()
    assert "stored as (128, 32)" in text and "4,224 parameters (4,096 + bias 128)" in text
    top = float(torch.linalg.svdvals(w)[0])
    assert f"{top:.3g}" in text
    rects = [i for i in view.scale_plot.getPlotItem().items if isinstance(i, QGraphicsRectItem)]
    assert len(rects) == 6  # the block's six matrices, one filled
    sizes = sorted((r.rect().width(), r.rect().height()) for r in rects)
    assert sizes == sorted([(32, 32)] * 4 + [(32, 128), (128, 32)])
    filled = [r for r in rects if r.brush().color().name() == "#ff8c00"]
    assert [(r.rect().width(), r.rect().height()) for r in filled] == [(32, 128)]
    x, y = view.x_curve.getData()[1], view.y_curve.getData()[1]
    views = alone.session.current.views
    np.testing.assert_allclose(y, views["trf_blocks.1.ff.layers.0"].array[0, -1], atol=1e-6)
    np.testing.assert_allclose(x, views["trf_blocks.1.norm2"].array[0, -1], atol=1e-6)
    alone.session.set_node("tok_emb")
    qtbot.waitUntil(lambda: view.matrix.node == "tok_emb", timeout=60_000)
    assert view.image.image.shape[0] <= 256 and "(tied)" in view.note.text()


def test_the_matrices_to_scale_fit_their_tab_with_no_label_on_a_box(qtbot):
    """In a laptop's dock and a wide one, every box and label lies inside the plot, and
    no label touches a box or another label (as drawn, in the scene's pixels)."""
    alone = Alone(qtbot)
    alone.run("Every effort moves you", max_tokens=1)
    view = alone.view(WeightsView, width=470, height=560)
    view.tabs.setCurrentIndex(1)
    alone.session.set_node("trf_blocks.0.ff.layers.0")
    qtbot.waitUntil(lambda: view.matrix is not None and view.matrix.node == "trf_blocks.0.ff.layers.0",
                    timeout=60_000)
    for width, height in ((470, 560), (900, 700), (360, 420)):
        view.resize(width, height)
        qtbot.waitUntil(lambda: view.width() == width, timeout=60_000)
        QApplication.processEvents()
        box = view.scale_plot.getPlotItem().getViewBox()
        inside = box.sceneBoundingRect().adjusted(-1, -1, 1, 1)
        rects = [r.sceneBoundingRect() for r, _ in view._scale_items]
        words = [t.sceneBoundingRect() for _, t in view._scale_items]
        assert len(rects) == 6
        for i, word in enumerate(words):
            assert inside.contains(word) and not any(word.intersects(r) for r in rects), \
                (width, i, word, rects)
            assert not any(word.intersects(w) for j, w in enumerate(words) if j != i)
        assert all(inside.contains(r) for r in rects)


def test_a_step_of_attention_not_kept_says_how_to_see_it(qtbot):
    """W_query after a prompt ran without attention's steps: not "Run a prompt" (one
    ran) but the box that keeps them."""
    from explorer.ui.plots.plot_text import empty_message
    alone = Alone(qtbot)
    alone.run("Every effort moves you", max_tokens=1)
    alone.session.show_step(None)
    view = alone.view(WeightsView, height=520)
    alone.session.set_node("trf_blocks.0.att.W_query")
    qtbot.waitUntil(lambda: view.matrix is not None and view.matrix.node == "trf_blocks.0.att.W_query",
                    timeout=60_000)
    said = empty_message(view.token_plot.getPlotItem())
    assert said.startswith("trf_blocks.0.att.W_query is one of attention's steps, not kept in "
                           "this pass: tick Attention steps")


def test_the_tabs_behind_the_matrix_come_a_turn_later_saying_what_fills_them(qtbot):
    from explorer.ui.plots.plot_text import empty_message
    alone = Alone(qtbot)
    view = WeightsView(alone.session, alone.engine)  # one turn: the matrix's tab alone
    qtbot.addWidget(view)
    assert [view.tabs.tabText(i) for i in range(view.tabs.count())] == ["Matrix"]
    qtbot.waitUntil(view.built, timeout=10_000)
    assert [view.tabs.tabText(i) for i in range(view.tabs.count())] == \
        ["Matrix", "To scale", "This token"]
    assert empty_message(view.token_plot.getPlotItem()).startswith("Run a prompt (Ctrl+Enter)")
    assert empty_message(view.scale_plot.getPlotItem()) == \
        empty_message(view.heat.getPlotItem())  # as the matrix's tab says
