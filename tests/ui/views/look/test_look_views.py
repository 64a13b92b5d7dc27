"""Look's views with real passes: GELU over its real inputs, every node's distribution,
every head's attention pattern, the logit lens."""

import numpy as np
import pytest
from PySide6.QtCore import QPointF
from explorer.core.gpt.node_types import Kind
from explorer.core.run.analysis import gelu_input_shares
from explorer.core.gpt.nodes import block_nodes
from explorer.ui.views.look.distributions_view import write_table_csv
from tests.ui.conftest import run_and_wait, settle, show


def test_gelu_view_overlays_the_real_inputs(qtbot, ran):
    view = show(qtbot, ran, "Activation")
    inputs = ran.session.prompt.views["trf_blocks.0.ff.layers.0"]
    shares = gelu_input_shares(inputs.array)
    assert f"{100 * shares.negative:.1f}% are negative" in view.info.text()
    assert f"{100 * shares.dip:.1f}% lie in the dip" in view.info.text()
    # counted by the engine with the pass, for every layer, not by the GUI thread
    assert ran.session.prompt.gelu_shares["trf_blocks.0.ff.layers.0"] == shares
    assert len(ran.session.prompt.gelu_shares) == ran.session.model.config.n_layers
    assert "Largest |tanh approximation − exact|" in view.info.text()
    heights = view.hist_bars.opts["height"]
    assert np.sum(heights) == pytest.approx(1 - (inputs.stats.under + inputs.stats.over) / inputs.stats.count)
    ran.session.set_layer(1)
    settle(qtbot, ran)
    assert "Block 1 of 2" in view.info.text()


def test_distributions_small_multiples_and_clickable_table(qtbot, ran):
    view = show(qtbot, ran, "Distributions")
    keys = [n.key for n in block_nodes("pre") if n.kind != Kind.PATTERN]
    assert list(view.small_hists) == keys
    add2 = ran.session.prompt.views["trf_blocks.0.add2"]
    values = add2.array.reshape(-1)
    shown = view.small_hists["add2"]
    # by default the range of the node's own values: 99.5% of them inside, all counted
    counts = shown.curve.yData
    assert counts.sum() + shown.shown.below + shown.shown.above == values.size
    assert counts.sum() >= 0.995 * values.size - 2  # the 0.25% tails either side
    lo, hi = shown.shown.lo, shown.shown.hi
    assert values.min() <= lo and hi <= values.max() * 1.0001 + 1e-6
    assert shown.note.toPlainText() == f"below {shown.shown.below:,} · above {shown.shown.above:,}"
    assert "range of its own values" in view.header.text and "Block 0 of 2" in view.header.text
    # the fixed range, one click away: the node kind's bins, as the capture counted them
    view.range_box.setCurrentIndex(1)
    qtbot.waitUntil(lambda: not view.busy(), timeout=60_000)
    np.testing.assert_array_equal(shown.curve.yData, add2.stats.hist)
    assert shown.shown.lo == add2.stats.hist_range.lo and "fixed range" in view.header.text
    view.range_box.setCurrentIndex(0)
    qtbot.waitUntil(lambda: not view.busy(), timeout=60_000)
    # the heatmap's colour bar spans the shown values and names them
    finite = np.log10(np.abs(view.table[np.isfinite(view.table)]) + 1e-12)
    assert view.color_bar.levels() == pytest.approx((finite.min(), finite.max()), rel=1e-5)
    assert view.color_bar.getAxis("left").labelText == "log10 |std|"
    assert view.table.shape == (len(keys), 2) and view.table_keys == keys

    class Click:
        def __init__(self, x, y):
            self._p = QPointF(x, y)
            self.accepted = False

        def pos(self):
            return self._p

        def accept(self):
            self.accepted = True

    click = Click(1.5, keys.index("ff.layers.1") + 0.5)
    view._table_click(click)
    assert click.accepted and ran.session.node == "trf_blocks.1.ff.layers.1" and ran.session.layer == 1
    qtbot.waitUntil(lambda: not view.busy(), timeout=60_000)  # its three plots take three turns
    names, values = view.resid_curve.getData()
    assert len(values) == 4


def test_redrawing_unchanged_titles_and_ticks_relayouts_nothing(qtbot, ran, monkeypatch):
    """A title or tick labels set again to the same text would relayout the plot and
    repaint it once more; after a pass the views set only what changed."""
    import pyqtgraph as pg

    view = show(qtbot, ran, "Distributions")
    inspector = ran.inspector  # built (and drawn) before the counting starts
    ran.session.set_layer(1)
    qtbot.waitUntil(lambda: not view.busy(), timeout=60_000)
    assert view.small_plots["add2"].titleLabel.text.startswith("B1 ")  # block 1 of 2
    calls = []
    monkeypatch.setattr(pg.PlotItem, "setTitle", lambda self, *a, **k: calls.append(("title", a)))
    monkeypatch.setattr(pg.AxisItem, "setTicks", lambda self, *a, **k: calls.append(("ticks", a)))
    monkeypatch.setattr(pg.AxisItem, "setLabel", lambda self, *a, **k: calls.append(("label", a)))
    view.redraw()
    inspector.refresh()
    qtbot.waitUntil(lambda: not view.busy(), timeout=60_000)  # drawn in loop turns
    assert calls == []
    ran.session.set_layer(0)  # new titles: set, once per plot
    qtbot.waitUntil(lambda: not view.busy(), timeout=60_000)
    titles = [a[0] for kind, a in calls if kind == "title"]
    assert len(titles) == len(view.small_plots) and all(t.startswith("B0 ") for t in titles)


def test_distributions_row_labels_never_overlap(qtbot, ran):
    """Eleven node rows in a short table: every k-th label, so that the shown labels
    fit one text line each; all of them once the table is tall enough."""
    from PySide6.QtGui import QFontMetrics

    view = show(qtbot, ran, "Distributions")
    view.tabs.setCurrentIndex(1)  # Across blocks
    axis = view.table_plot.getAxis("left")
    line = QFontMetrics(axis.font()).height()
    rows = len(view.table_keys)
    steps = []
    for height in (120, 260, 600):
        view.table_plot.setFixedHeight(height)
        qtbot.waitUntil(lambda: view.table_plot.height() == height, timeout=60_000)
        settle(qtbot, ran)
        shown = axis._tickLevels[0]
        box = view.table_plot.getViewBox().height()
        assert len(shown) * line <= box + line  # one line per shown label, at most
        assert [k for _, k in shown] == view.table_keys[::view.row_label_step()]
        if box / rows >= line:
            assert len(shown) == rows
        steps.append(view.row_label_step())
    assert steps[0] > 1 and steps[-1] == 1


@pytest.mark.parametrize("size", [(1366, 768), (1920, 1080)])
def test_the_default_layout_fits_the_screen_and_gives_histograms_room(qtbot, make_window, size):
    """A laptop's 1366x768 and a 1920x1080 monitor: the window fits, and the first six
    per-node histograms of the Distributions tab are each at least 120 px tall, visible
    without scrolling; the rest of the tab scrolls instead of squashing its plots."""
    from PySide6.QtCore import QPoint
    from PySide6.QtWidgets import QScrollArea

    window = make_window()
    hint = window.minimumSizeHint()
    assert hint.width() <= size[0] and hint.height() <= size[1] - 60  # room for a task bar
    window.resize(*size)
    window._default_dock_sizes()
    run_and_wait(qtbot, window, max_tokens=1)
    view = show(qtbot, window, "Distributions")
    # its small plots are made a loop turn each, then drawn
    qtbot.waitUntil(lambda: len(view.small_plots) >= 6 and not view.busy(), timeout=60_000)
    settle(qtbot, window)
    assert view.tabs.tabText(view.tabs.currentIndex()) == "Histograms"
    area = view.tabs.currentWidget().findChild(QScrollArea)
    assert area.verticalScrollBar().value() == 0
    viewport = area.viewport()
    first_six = list(view.small_plots.values())[:6]
    for plot in first_six:
        rect = plot.sceneBoundingRect()
        assert rect.height() >= 120, rect
        top = view.small.mapTo(viewport, QPoint(0, int(rect.bottom())))
        assert 0 <= top.y() <= viewport.height()  # its bottom edge is on screen
    assert view.small.height() >= 4 * 120
    # the nodes x layers heatmap's default height has room for every row's label
    assert view.row_label_step() == 1
    assert len(view.table_plot.getAxis("left")._tickLevels[0]) == len(view.table_keys)


def test_distributions_table_csv(tmp_path):
    path = tmp_path / "t.csv"
    write_table_csv(str(path), ["norm1", "att"], np.array([[1.0, 2.0], [3.0, np.nan]]), "std")
    lines = path.read_text().splitlines()
    assert lines[0].endswith(",0,1") and lines[1] == "norm1,1,2" and lines[2] == "att,3,nan"


def test_attention_view_shows_every_head_and_one_large(qtbot, ran):
    view = show(qtbot, ran, "Attention")
    heads = ran.session.model.config.n_heads
    assert view.shown_heads == list(range(heads))
    pattern = ran.session.prompt.views["trf_blocks.0.att.attn_weights"].array[0]
    for h in range(heads):  # every head is a tile of the one mosaic image
        np.testing.assert_array_equal(view.tile(h), pattern[h])
    assert np.all(np.triu(pattern[2], 1) == 0)  # the causal mask: nothing above the diagonal
    assert np.isnan(view.image.image).any()  # the gaps between tiles are empty
    # each head's label sits inside its tile's top-right corner: over the masked future
    columns, n, _, gap = view._grid
    shown = [lab for lab in view.labels if lab.isVisible()]
    assert [lab.toPlainText() for lab in shown] == [f"head {h}" for h in range(heads)]
    for h, lab in enumerate(shown):
        assert (lab.pos().x(), lab.pos().y()) == ((h % columns) * (n + gap) + n, (h // columns) * (n + gap))
        assert tuple(lab.anchor) == (1, 0)
    # token labels on both axes, for every tile row and column, never closer than a label
    from PySide6.QtGui import QFontMetrics

    from explorer.ui.views.look.attention_view import token_label
    pieces = ran.session.prompt.pieces
    rows = -(-heads // columns)
    box = view.plot.getViewBox()
    cell = box.height() / box.viewRect().height()
    named = {f"{i} {token_label(p)}" for i, p in enumerate(pieces)}  # queries: position, token
    for side, tiles in (("left", rows), ("bottom", columns)):
        ticks = view.plot.getAxis(side)._tickLevels[0]
        # keys: their tokens where each column has room, else their positions, every one
        assert {t for _, t in ticks} <= (named if side == "left" else
                                         named | {str(i) for i in range(len(pieces))})
        assert len({round(pos // (n + gap)) for pos, _ in ticks}) == tiles  # each tile row/column
        spacing = min(b - a for (a, _), (b, _) in zip(ticks, ticks[1:]) if b - a < n)
        need = QFontMetrics(view.plot.getAxis(side).font()).height()
        assert spacing * cell >= need
    keys = [t for _, t in view.plot.getAxis("bottom")._tickLevels[0]]
    assert view.plot.getAxis("left").labelText.startswith("query token")
    assert view.plot.getAxis("bottom").labelText.startswith(
        "key position (= the query row of that number)" if keys[0].isdigit() else "key token")
    assert view.color_bar.isVisible() and view.color_bar.levels() == (0.0, 1.0)
    view.head_box.setCurrentIndex(2)  # head 1
    assert view.shown_heads == [1]
    np.testing.assert_array_equal(view.image.image, pattern[1])
    assert view.plot.titleLabel.text == "head 1"
    left = view.plot.getAxis("left")._tickLevels[0]
    k = round(left[1][0] - left[0][0]) if len(left) > 1 else 1
    assert [t for _, t in left] == [f"{i} {token_label(p)}" for i, p in enumerate(pieces)][::k]
    assert [pos for pos, _ in left] == [i + 0.5 for i in range(0, len(pieces), k)]  # cell centres


def test_attention_image_is_reused_and_big_patterns_shrink_by_block_max(qtbot, ran):
    from explorer.ui.views.look.attention_view import block_max
    view = show(qtbot, ran, "Attention")
    view.head_box.setCurrentIndex(0)
    view.redraw()
    image = view.image
    ran.session.set_layer(1)
    view.redraw()
    assert view.image is image  # a new layer replaces the pixels, not the plot
    np.testing.assert_array_equal(view.tile(0),
                                  ran.session.prompt.views["trf_blocks.1.att.attn_weights"].array[0][0])
    ran.session.set_layer(0)
    w = np.zeros((10, 10), np.float32)
    w[9, 3], w[0, 0] = 0.9, 0.2
    small = block_max(w, 4)  # 10 tokens in blocks of 4: 3 x 3 cells, the peak kept
    assert small.shape == (3, 3) and small[2, 0] == pytest.approx(0.9) and small[0, 0] == pytest.approx(0.2)
    assert small.sum() == pytest.approx(1.1)


def test_hovering_a_mosaic_cell_reads_that_head_and_weight(qtbot, ran):
    from PySide6.QtCore import QPointF

    from explorer.ui.views.look.attention_view import mosaic
    view = show(qtbot, ran, "Attention")
    view.head_box.setCurrentIndex(0)
    view.redraw()
    columns, n, factor, gap = view._grid
    assert factor == 1  # a short prompt: full resolution
    q, k = n - 1, 1
    x, y = (1 % columns) * (n + gap) + k + 0.5, (1 // columns) * (n + gap) + q + 0.5  # head 1
    view._moved(view.plot.getViewBox().mapViewToScene(QPointF(x, y)))
    assert view.hover.text().startswith(f"head 1: query {q} ")
    assert f"weight {view.pattern[1, q, k]:.4f}" in view.hover.text()
    tiles = [np.full((2, 2), float(i), np.float32) for i in range(3)]
    m = mosaic(tiles, columns=2, gap=1)  # 2 x 2 tiles, one empty, NaN gaps
    assert m.shape == (5, 5) and m[3, 0] == 2 and np.isnan(m[2]).all() and np.isnan(m[3, 3])


def test_logit_lens_ends_at_the_model_prediction(qtbot, ran):
    view = show(qtbot, ran, "Logit lens")
    n_layers = ran.session.model.config.n_layers
    qtbot.waitUntil(lambda: view.table.rowCount() == 2 * n_layers, timeout=60_000)
    top = ran.session.prompt.top_pieces[0]
    assert view.table.item(2 * n_layers - 1, 0).text().startswith(repr(top))
    assert view.position_box.currentIndex() == len(ran.session.prompt.pieces) - 1


def test_attention_view_draws_the_scores_and_the_masked_scores_as_well(qtbot, ran):
    """The scores Q·Kᵀ and the masked scores, opened on demand: per head, the −inf of the
    mask drawn grey (no colour of the scale), a diverging scale around 0, and the picked
    query's row below — for the weights with their sum of 1."""
    view = show(qtbot, ran, "Attention")
    view.head_box.setCurrentIndex(2)  # head 1, large
    t = len(ran.session.prompt.ids)
    last = ran.session.prompt.pieces[-1]
    assert view.row_plot.titleLabel.text == f"head 1, query {t - 1} {last!r}: sum 1.0000"
    assert view.row_bars.opts["height"].sum() == pytest.approx(1, abs=1e-5)  # every key's bar
    view.matrix_box.setCurrentIndex(2)  # masked scores: the pass did not keep them
    name = "trf_blocks.0.att.masked_scores"
    qtbot.waitUntil(lambda: view.key == name.removeprefix("trf_blocks.0."), timeout=60_000)
    masked = ran.session.prompt.views[name].array[0, 1]
    assert np.isneginf(masked).sum() == t * (t - 1) // 2
    shown = view.image.image
    assert np.isnan(shown).sum() == t * (t - 1) // 2  # no colour where the mask is …
    assert np.all(view.ground.image[np.isnan(shown)] > 0)  # … the grey ground instead
    np.testing.assert_allclose(shown[np.isfinite(masked)], masked[np.isfinite(masked)])
    low, high = view.color_bar.levels()
    assert low == -high and high == pytest.approx(np.abs(masked[np.isfinite(masked)]).max())
    view.query = 1
    view._row(1)
    assert view.row_plot.titleLabel.text.endswith(f": 2 kept, {t - 2} masked")
    assert len(view.row_bars.opts["x"]) == 2  # a masked key has no bar
    view.matrix_box.setCurrentIndex(1)  # the scores before the mask: every key has a colour
    assert not np.isnan(view.image.image).any() and view.row_plot.titleLabel.text.endswith("q·k per key")


def test_the_attention_view_follows_the_clicked_step(qtbot, ran):
    """A click on the scores, the masked scores or the pattern in the graph shows that
    matrix (it stayed on the weights); another node leaves the choice as it is."""
    view = show(qtbot, ran, "Attention")
    for node, shown in (("trf_blocks.0.att.attn_scores", "scores Q·Kᵀ"),
                        ("trf_blocks.0.att.masked_scores", "masked scores"),
                        ("trf_blocks.0.att.attn_weights", "weights (softmax)")):
        ran.session.set_node(node)
        assert view.matrix_box.currentText() == shown
        key = node.removeprefix("trf_blocks.0.")
        qtbot.waitUntil(lambda: view.key == key, timeout=60_000)
    ran.session.set_node("trf_blocks.0.ff")
    assert view.matrix_box.currentText() == "weights (softmax)"


def test_a_querys_row_names_every_key_that_has_room_and_always_the_last(qtbot):
    """16 keys: the row's axis names as many as stand apart, evenly, and the last key
    always (every 16 // 8-th key dropped the last one, and long labels overlapped)."""
    from PySide6.QtGui import QFontMetrics

    from explorer.ui.views.look.attention_view import token_label
    from tests.ui.alone import Alone

    alone = Alone(qtbot)
    text = "One two three four five six seven eight nine ten eleven twelve thirteen fourteen X Y"
    alone.run(text, max_tokens=1)
    view = alone.attention
    pieces = alone.session.prompt.pieces
    assert len(pieces) == 16
    view._row(len(pieces) - 1)
    ticks = view.row_plot.getAxis("bottom")._tickLevels[0]
    assert ticks[-1] == (len(pieces) - 1, token_label(pieces[-1]))
    assert all(label == token_label(pieces[i]) for i, label in ticks)
    room = view.row_plot.vb.width() / len(pieces)  # pixels a key
    widest = max(QFontMetrics(view.row_plot.getAxis("bottom").font()).horizontalAdvance(label)
                 for _, label in ticks)
    assert min(b - a for (a, _), (b, _) in zip(ticks, ticks[1:])) * room >= widest



def test_the_query_row_tab_comes_a_turn_after_the_matrices(qtbot):
    from explorer.ui.views.look.attention_view import AttentionView
    from tests.ui.alone import Alone
    alone = Alone(qtbot)
    view = AttentionView(alone.session, alone.engine)  # one turn: the matrices alone
    qtbot.addWidget(view)
    assert [view.tabs.tabText(i) for i in range(view.tabs.count())] == ["Matrices"]
    qtbot.waitUntil(view.built, timeout=10_000)
    assert [view.tabs.tabText(i) for i in range(view.tabs.count())] == ["Matrices", "Query row"]
    assert len(view.row_bars.opts["x"]) == 0  # no pass yet: no bar
