"""The explanatory views: GELU, distributions, attention, logit lens."""

import numpy as np
import pytest
from PySide6.QtCore import QPointF

from explorer.core.run.analysis import gelu_input_shares
from explorer.core.gpt.nodes import block_nodes
from explorer.ui.views.distributions_view import write_table_csv
from tests.ui.alone import Alone
from tests.ui.conftest import run_and_wait


def show(qtbot, views, title):
    """The view of this title, alone (on a session and an inline engine) or in a window."""
    if isinstance(views, Alone):
        return views.show(title)
    from explorer.ui.views.registry import VIEWS
    dock = views.docks[next(v.key for v in VIEWS if v.title == title)]
    dock.raise_()
    qtbot.waitUntil(lambda: dock.widget().isVisible(), timeout=5_000)
    qtbot.wait(50)
    busy = getattr(dock.widget(), "busy", None)  # a view that draws its plots in turns
    if busy is not None:
        qtbot.waitUntil(lambda: not busy(), timeout=5_000)
    return dock.widget()


@pytest.fixture
def ran(qtbot):
    """A tiny model's prompt pass and two steps, shown to views built alone."""
    alone = Alone(qtbot)
    alone.run(max_tokens=2)
    alone.session.show_step(None)
    return alone


def test_gelu_view_overlays_the_real_inputs(qtbot, ran):
    view = show(qtbot, ran, "GELU")
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
    qtbot.wait(20)
    assert "Block 2 of 2" in view.info.text()


def test_distributions_small_multiples_and_clickable_table(qtbot, ran):
    view = show(qtbot, ran, "Distributions")
    keys = [n.key for n in block_nodes("pre") if n.kind != "pattern"]
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
    assert "range of its own values" in view.header.text and "Block 1 of 2" in view.header.text
    # the fixed range, one click away: the node kind's bins, as the capture counted them
    view.range_box.setCurrentIndex(1)
    qtbot.waitUntil(lambda: not view.busy(), timeout=5_000)
    np.testing.assert_array_equal(shown.curve.yData, add2.stats.hist)
    assert shown.shown.lo == add2.stats.hist_range.lo and "fixed range" in view.header.text
    view.range_box.setCurrentIndex(0)
    qtbot.waitUntil(lambda: not view.busy(), timeout=5_000)
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
    qtbot.waitUntil(lambda: not view.busy(), timeout=5_000)  # its three plots take three turns
    names, values = view.resid_curve.getData()
    assert len(values) == 4


def test_redrawing_unchanged_titles_and_ticks_relayouts_nothing(qtbot, ran, monkeypatch):
    """A title or tick labels set again to the same text would relayout the plot and
    repaint it once more; after a pass the views set only what changed."""
    import pyqtgraph as pg

    view = show(qtbot, ran, "Distributions")
    inspector = ran.inspector  # built (and drawn) before the counting starts
    ran.session.set_layer(1)
    qtbot.waitUntil(lambda: not view.busy(), timeout=5_000)
    assert view.small_plots["add2"].titleLabel.text.startswith("B2 ")  # block 2 of 2
    calls = []
    monkeypatch.setattr(pg.PlotItem, "setTitle", lambda self, *a, **k: calls.append(("title", a)))
    monkeypatch.setattr(pg.AxisItem, "setTicks", lambda self, *a, **k: calls.append(("ticks", a)))
    monkeypatch.setattr(pg.AxisItem, "setLabel", lambda self, *a, **k: calls.append(("label", a)))
    view.redraw()
    inspector.refresh()
    qtbot.waitUntil(lambda: not view.busy(), timeout=5_000)  # drawn in loop turns
    assert calls == []
    ran.session.set_layer(0)  # new titles: set, once per plot
    qtbot.waitUntil(lambda: not view.busy(), timeout=5_000)
    titles = [a[0] for kind, a in calls if kind == "title"]
    assert len(titles) == len(view.small_plots) and all(t.startswith("B1 ") for t in titles)


def test_distributions_row_labels_never_overlap(qtbot, ran):
    """Eleven node rows in a short table: every k-th label, so that the shown labels
    fit one text line each; all of them once the table is tall enough."""
    from PySide6.QtGui import QFontMetrics

    view = show(qtbot, ran, "Distributions")
    axis = view.table_plot.getAxis("left")
    line = QFontMetrics(axis.font()).height()
    rows = len(view.table_keys)
    steps = []
    for height in (120, 260, 600):
        view.table_plot.setFixedHeight(height)
        qtbot.wait(30)
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
    qtbot.wait(50)
    area = view.findChild(QScrollArea)
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

    from explorer.ui.views.attention_view import token_label
    pieces = ran.session.prompt.pieces
    rows = -(-heads // columns)
    box = view.plot.getViewBox()
    cell = box.height() / box.viewRect().height()
    for side, tiles in (("left", rows), ("bottom", columns)):
        ticks = view.plot.getAxis(side)._tickLevels[0]
        assert {t for _, t in ticks} <= {token_label(p) for p in pieces}
        assert len({round(pos // (n + gap)) for pos, _ in ticks}) == tiles  # each tile row/column
        spacing = min(b - a for (a, _), (b, _) in zip(ticks, ticks[1:]) if b - a < n)
        need = QFontMetrics(view.plot.getAxis(side).font()).height()
        assert spacing * cell >= need
    assert view.plot.getAxis("left").labelText.startswith("query token")
    assert view.plot.getAxis("bottom").labelText.startswith("key token")
    assert view.color_bar.isVisible() and view.color_bar.levels() == (0.0, 1.0)
    view.head_box.setCurrentIndex(2)  # head 1
    assert view.shown_heads == [1]
    np.testing.assert_array_equal(view.image.image, pattern[1])
    assert view.plot.titleLabel.text == "head 1"
    left = view.plot.getAxis("left")._tickLevels[0]
    k = round(left[1][0] - left[0][0]) if len(left) > 1 else 1
    assert [t for _, t in left] == [token_label(p) for p in pieces][::k]
    assert [pos for pos, _ in left] == [i + 0.5 for i in range(0, len(pieces), k)]  # cell centres


def test_attention_image_is_reused_and_big_patterns_shrink_by_block_max(qtbot, ran):
    from explorer.ui.views.attention_view import block_max
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

    from explorer.ui.views.attention_view import mosaic
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
    qtbot.waitUntil(lambda: view.table.rowCount() == 2 * n_layers, timeout=30_000)
    top = ran.session.prompt.top_pieces[0]
    assert view.table.item(2 * n_layers - 1, 0).text().startswith(repr(top))
    assert view.position_box.currentIndex() == len(ran.session.prompt.pieces) - 1


def test_ln_compare_view_runs_both_orders_and_the_gradient_experiment(qtbot, ran):

    from explorer.ui.plots.plot_text import empty_message

    def hints(key):  # the "Press …" line an empty plot shows
        message = empty_message(view.plots[key])
        return [] if message is None else [message]

    view = show(qtbot, ran, "Pre-LN vs Post-LN")
    assert "Post-LN block:</b> input → Multi-head attention → Dropout → Add (shortcut) → LayerNorm 1" in view.orders.text()
    assert hints("residual") == ["Press “Compare on the prompt”"]
    assert hints("depth") == ["Press “Gradient experiment”"]
    assert not view.plots["residual"].getAxis("left").isVisible()  # no axes before data
    view.compare_button.click()
    qtbot.waitUntil(lambda: bool(view.runs), timeout=30_000)
    assert set(view.runs) == {"pre", "post"}
    assert "Pre-LN</b> next tokens" in view.top_label.text()
    assert len(view.plots["residual"].listDataItems()) == 2
    assert hints("residual") == [] and hints("hist") == [] and hints("grad") != []
    qtbot.wait(50)  # the plots fit their data (the hint's placeholder range does not stay)
    norms = np.concatenate([r.residual_norm for r in view.runs.values()])
    (x0, x1), (y0, y1) = view.plots["residual"].getViewBox().viewRange()
    assert y0 <= norms.min() and y1 >= norms.max() and x1 >= len(view.runs["pre"].residual_norm) - 1
    # the node's histogram in both orders: each on its own values' range, as densities
    from explorer.ui.plots.figures import density
    node = ran.session.node
    curves = view.plots["hist"].listDataItems()
    assert len(curves) == 2
    for curve, position in zip(curves, ("pre", "post")):
        hist = view.runs[position].histograms[node]
        stats = view.runs[position].views[node].stats
        assert hist.counts.sum() + hist.below + hist.above == stats.count  # every value
        assert stats.min <= hist.lo and hist.hi <= stats.max + 1e-5 * abs(stats.max) + 1e-6
        x, y = curve.getData()
        np.testing.assert_allclose(y, density(hist))
        assert np.sum(y * np.diff(hist.edges)) == pytest.approx(hist.counts.sum() / stats.count)
    (x0, x1), _ = view.plots["hist"].getViewBox().viewRange()
    his = [view.runs[p].histograms[node] for p in ("pre", "post")]
    assert x0 <= min(h.lo for h in his) and x1 >= max(h.hi for h in his)
    assert "outside the range: Pre-LN" in view.plots["hist"].titleLabel.text
    view.depths.setText("2, 3")
    view.run_button.click()
    qtbot.waitUntil(lambda: view.result is not None, timeout=60_000)
    assert view.result.depths == [2, 3] and "Theorem 1" in view.claim.text()
    assert len(view.plots["depth"].listDataItems()) == 2
    assert hints("grad") == [] and hints("depth") == []
    assert view.run_button.isEnabled() and not view.stop_button.isEnabled()


def test_ln_compare_rejects_bad_depths(qtbot, ran):
    view = show(qtbot, ran, "Pre-LN vs Post-LN")
    view.depths.setText("six")
    view.run_button.click()
    assert "whole numbers" in view.claim.text() and view.run_button.isEnabled()


def start_training(window, steps, out):
    panel = window.train_panel
    panel.preset.setCurrentText("tiny")
    panel.steps.setValue(steps)
    panel.out_dir.setText(str(out))
    panel.start_button.click()
    return panel


def test_train_panel_trains_shows_the_curve_and_loads_the_result(qtbot, make_window, tmp_path):
    window = make_window()
    panel = start_training(window, 6, tmp_path / "run")
    assert window.running and not window.generation.generate_button.isEnabled()
    qtbot.waitUntil(lambda: not window.running, timeout=120_000)
    assert [s for s, _ in panel.steps_seen] == list(range(1, 7))
    assert [e.step for e in panel.evals] == [0, 6]
    assert "step 6 (validation loss" in panel.samples.toPlainText()
    assert window.status_text.text() == "Training finished: saved model.safetensors"
    # a sample that starts with blank lines shows them (⏎), so it does not look empty, on
    # its step's line: many line breaks are not a column of marks without their step
    from explorer.core.experiments.training import EvalEvent
    panel.on_event(EvalEvent(step=7, train_loss=1.0, val_loss=2.0, sample="\n\nHello"))
    assert panel.samples.toPlainText().endswith("step 7 (validation loss 2.00): ⏎ ⏎ Hello\n")
    panel.on_event(EvalEvent(step=8, train_loss=1.0, val_loss=2.0, sample="\n" * 40 + "end"))
    last = [line for line in panel.samples.toPlainText().splitlines() if line][-1]
    assert last.startswith("step 8 (validation loss 2.00): ⏎ ⏎") and last.endswith("end")
    panel.evals.pop()
    panel.evals.pop()
    assert panel.load_button.isEnabled() and panel.checkpoint.endswith("model.safetensors")
    panel.load_button.click()
    qtbot.waitUntil(lambda: window.session.model.spec.checkpoint == panel.checkpoint, timeout=30_000)
    assert window.session.model.trained and "UNTRAINED" not in window.windowTitle()
    assert window.generation.generate_button.isEnabled()


@pytest.mark.parametrize("how", ["Stop", "Esc"])
def test_stopping_training_saves_a_checkpoint(qtbot, make_window, tmp_path, how):
    window = make_window()
    panel = start_training(window, 10_000, tmp_path / "run")
    qtbot.waitUntil(lambda: len(panel.steps_seen) >= 2, timeout=60_000)
    if how == "Stop":
        panel.stop_button.click()
    else:  # the window's Esc stops the engine's job: the same stop, said the same way
        from PySide6.QtCore import Qt
        from PySide6.QtTest import QTest
        QTest.keyClick(window, Qt.Key_Escape)
    qtbot.waitUntil(lambda: not window.running, timeout=60_000)
    assert len(panel.steps_seen) < 100 and (tmp_path / "run" / "model.safetensors").is_file()
    import json
    assert json.loads((tmp_path / "run" / "trainer.json").read_text())["step"] == len(panel.steps_seen)
    # said as a stop, not as a finished run, and not remembered as a model trained here
    assert panel.status.text().startswith(f"Stopped at step {len(panel.steps_seen)}. Saved ")
    assert window.session.status.startswith("Training stopped: saved")
    from explorer.core.base import state
    assert state.trained_models() == []


def test_explain_tab_follows_the_selected_node_with_live_numbers(qtbot, ran):
    view = show(qtbot, ran, "Explain")
    ran.session.set_node("trf_blocks.0.ff.layers.0")
    qtbot.wait(20)
    text = view.text.text()
    assert "What it does." in text and "widened each token from 32 to 128 values" in text
    assert "Common mistake." in text
    ran.session.set_node("trf_blocks.1.ff")
    qtbot.wait(20)
    assert "does not change the embedding size" in view.text.text()


def test_divergence_tab_finds_and_marks_the_first_diverging_node(qtbot, ran):
    view = show(qtbot, ran, "Divergence")
    graph = ran.graph  # the block graph outlines what the finder marks in the session
    view.kind.setCurrentIndex(view.kind.findData("relu"))
    assert not view.ff_width.isVisible()
    assert view.layer.text() == "Block 1 of 2" and "where do you look first?" in view.question.text()
    view.layer.setValue(2)  # block 2 of 2: trf_blocks.1
    view.request()
    qtbot.waitUntil(lambda: view.result is not None, timeout=30_000)
    assert view.result.first == "trf_blocks.1.ff.layers.1"
    assert "First divergence: <b>trf_blocks.1.ff.layers.1</b>" in view.summary.text()
    assert ran.session.mark == "trf_blocks.1.ff.layers.1" and ran.session.layer == 1
    item = graph.items["trf_blocks.1.ff.layers.1"]
    assert item.diverged and item.pen().color().name() == "#d40000"
    ff = next(i for i in range(view.kind.count()) if str(view.kind.itemData(i)).startswith("ff-"))
    view.kind.setCurrentIndex(ff)  # ff-N: the width as the user types it
    assert view.ff_width.isVisible() and view.ff_width.value() == 1024
    view.ff_width.setValue(48)
    view.request()
    qtbot.waitUntil(lambda: "48 values per token instead of 32" in view.summary.text(), timeout=30_000)


def test_the_graph_colours_come_with_their_scale(qtbot):
    """Nodes coloured by a statistic: a viridis bar between the smallest and the largest
    value says what the colours mean; before a pass, no scale."""
    from explorer.ui.graph.graph_colours import colour as _colour

    alone = Alone(qtbot)
    graph = alone.graph
    assert not graph.scale_bar.isVisible() and "Run a prompt" in graph.legend.text()
    alone.run(max_tokens=1)
    alone.session.show_step(None)
    alone.settle()
    stds = {n: alone.session.prompt.views[n].stats.std for n in graph.items
            if n in alone.session.prompt.views}
    smallest, largest = min(stds, key=lambda n: abs(stds[n])), max(stds, key=lambda n: abs(stds[n]))
    assert graph.legend.text() == "std (log scale):"
    assert graph.scale_lo.text() == f"{stds[smallest]:.3g}" and graph.scale_hi.text() == f"{stds[largest]:.3g}"
    assert graph.scale_bar.isVisible()
    image = graph.scale_bar.pixmap().toImage()
    assert image.pixelColor(0, 5) == _colour(0.0) and image.pixelColor(image.width() - 1, 5) == _colour(1.0)
    assert graph.items[smallest].brush().color() == _colour(0.0)
    assert graph.items[largest].brush().color() == _colour(1.0)


def test_the_model_panel_counts_the_loaded_models_parameters(qtbot):
    from explorer.ui.views.model_view import ModelView

    alone = Alone(qtbot)
    view = ModelView(alone.session)
    qtbot.addWidget(view)
    cfg = alone.session.model.config
    cells = {view.table.item(r, 0).text(): view.table.item(r, 1).text()
             for r in range(view.table.rowCount())}
    from explorer.core.gpt.sizes import sizes
    s = sizes(cfg)
    assert cells["total, head tied (as GPT-2)"] == f"{s.tied:,}"
    assert cells["total, head untied (its own matrix)"] == f"{s.untied:,}"
    assert cells["token embedding (tok_emb)"] == f"{cfg.vocab_size * cfg.emb_dim:,}"
    assert f"{s.tied * 4 / 2**20:,.2f} MB of weights in float32" in view.title.text()
    assert "Tied head" in view.notes.text()


def test_the_code_view_points_at_the_lines_and_traces_the_pass(qtbot, ran):
    from PySide6.QtCore import Qt

    from explorer.core.lessons.trace import trace_order
    from explorer.ui.views.code_view import CodeView

    view = ran.view(CodeView)
    ran.session.set_node("trf_blocks.0.norm1")
    built, runs = view.highlighted()
    assert built.strip() == "self.norm1 = LayerNorm(cfg.emb_dim)"
    assert runs.strip() == "x = self.norm1(x)"
    assert view.forward_label.text().startswith("<b>forward_pre_ln</b>")
    lines = view.init_box.toPlainText().splitlines()  # the constructor's order is not the run's
    assert [i for i, line in enumerate(lines) if "self.att =" in line] < \
        [i for i, line in enumerate(lines) if "self.norm1 =" in line]
    assert "builds att, ff, norm1, norm2, drop_shortcut" in view.note.text()
    ran.session.set_node("trf_blocks.1.ff.layers.1")
    assert view.highlighted()[0].strip() == "GELU(),"
    assert "FeedForward" in view.title.text()
    # the trace: Right steps in forward order, Left back, Space plays to the end
    order = trace_order(ran.session.model.config)
    ran.session.set_node(order[0])
    view.setFocus()
    qtbot.keyClick(view, Qt.Key_Right)
    assert ran.session.node == order[1] == "pos_emb"
    assert "one learned vector per position 0..3" in view.sentence.text()
    qtbot.keyClick(view, Qt.Key_Right)
    qtbot.keyClick(view, Qt.Key_Left)
    assert ran.session.node == "pos_emb"
    ran.session.set_node("trf_blocks.0.ff.layers.0")
    sentence = view.sentence.text()
    std = ran.session.current.views["trf_blocks.0.ff.layers.0"].stats.std
    assert "feature dimension from 32 to 128" in sentence and f"{std:.3g}" in sentence
    view.timer.setInterval(1)
    qtbot.keyClick(view, Qt.Key_Space)
    qtbot.waitUntil(lambda: not view.timer.isActive(), timeout=10_000)
    assert ran.session.node == order[-1] == "out_head"
    assert view.highlighted()[1].strip().startswith("logits = self.out_head(x)")


def test_the_code_view_shows_the_post_ln_forward(qtbot):
    from explorer.ui.views.code_view import CodeView

    alone = Alone(qtbot)
    from explorer.core.gpt.config import preset
    from explorer.core.sources import ModelInfo
    info = alone.session.model
    alone.session.set_model(ModelInfo(**{**info.__dict__, "config": preset("tiny", norm_position="post")}))
    view = alone.view(CodeView)
    alone.session.set_node("trf_blocks.0.norm1")
    assert view.forward_label.text().startswith("<b>forward_post_ln</b>")
    code = view.forward_box.toPlainText().splitlines()
    assert code.index(view.highlighted()[1]) > [i for i, line in enumerate(code) if "self.add1(" in line][0]


def test_the_gradients_view_draws_both_runs_and_forgets_them_with_the_model(qtbot, ran):
    from explorer.ui.views.gradients_view import GradientsView
    from explorer.ui.plots.plot_text import empty_message

    view = ran.view(GradientsView)
    assert empty_message(view.plots["residual"]).startswith("Press")
    view.run_button.click()  # the inline engine answers at once
    qtbot.waitUntil(lambda: view.report is not None, timeout=30_000)
    report, n = view.report, ran.session.model.config.n_layers
    with_, without = report.runs
    assert report.prompt_tokens == len(ran.session.prompt.ids)
    for key in ("residual", "node", "blocks"):
        curves = view.plots[key].listDataItems()
        assert len(curves) == 2 and empty_message(view.plots[key]) is None
    residual = view.plots["residual"].listDataItems()[0].getData()[1]  # log axes: log10 of it
    assert np.allclose(10 ** residual, with_.residual, rtol=1e-5) and len(residual) == n + 1
    view.node_box.setCurrentText("norm1")
    node = view.plots["node"].listDataItems()[1].getData()[1]
    assert np.allclose(10 ** node, [without.norms[f"trf_blocks.{i}.norm1"] for i in range(n)], rtol=1e-5)
    assert f"{report.ratio():.3g}" in view.summary.toPlainText()
    view.no_norms.setChecked(True)  # the book's plain network: both runs without LayerNorm
    view.run_button.click()
    qtbot.waitUntil(lambda: view.report is not report, timeout=30_000)
    assert [r.norms_kept for r in view.report.runs] == [False, False]
    assert "blocks' LayerNorms removed" in view.summary.toPlainText()
    ran.session.set_model(ran.session.model)  # a model load: its numbers go
    assert view.report is None and all(not p.listDataItems() for p in view.plots.values())
