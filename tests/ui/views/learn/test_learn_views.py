"""Learn's views: Pre-LN against Post-LN and the gradient experiment, Explain, the
Model's parameter counts, the book's code with the trace, gradients through the shortcuts."""

import numpy as np
import pytest
from tests.ui.conftest import settle, show
from tests.ui.alone import Alone


def test_ln_compare_view_runs_both_orders_and_the_gradient_experiment(qtbot, ran):

    from explorer.ui.plots.plot_text import empty_message

    def hints(key):  # the "Press …" line an empty plot shows
        message = empty_message(view.plots[key])
        return [] if message is None else [message]

    view = show(qtbot, ran, "Where the norm sits")
    assert "Post-LN block:</b> input → Multi-head attention → Dropout → Add (shortcut) → LayerNorm 1" in view.orders.text()
    assert hints("residual") == ["Press “Compare on the prompt”"]
    assert hints("depth") == ["Press “Gradient experiment”"]
    assert not view.plots["residual"].getAxis("left").isVisible()  # no axes before data
    view.compare_button.click()
    qtbot.waitUntil(lambda: bool(view.runs), timeout=60_000)
    assert set(view.runs) == {"pre", "post"}
    assert "Pre-LN</b> next tokens" in view.top_label.text()
    assert len(view.plots["residual"].listDataItems()) == 2
    assert hints("residual") == [] and hints("hist") == [] and hints("grad") != []
    settle(qtbot, ran)  # the plots fit their data (the hint's placeholder range does not stay)
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
    # a step inside attention (not run apart in both orders): its block's attention
    ran.session.set_node("trf_blocks.1.att.attn_scores")
    curves = view.plots["hist"].listDataItems()
    assert len(curves) == 2 and "not captured" not in view.plots["hist"].titleLabel.text
    assert view.plots["hist"].titleLabel.text.startswith("B1 att")
    ran.session.set_node(node)
    view.depths.setText("2, 3")
    view.run_button.click()
    qtbot.waitUntil(lambda: view.result is not None, timeout=60_000)
    assert view.result.depths == [2, 3] and "Theorem 1" in view.claim.text()
    assert len(view.plots["depth"].listDataItems()) == 2
    assert hints("grad") == [] and hints("depth") == []
    assert view.run_button.isEnabled() and not view.stop_button.isEnabled()


def test_a_family_with_one_placement_has_no_twin_to_compare_on_the_prompt(qtbot):
    """OLMo's and Gemma's blocks keep their norms in one place: Compare on the prompt is
    off, with one line saying why; a Llama model turns it back on."""
    from explorer.core.gpt.config import preset
    from explorer.core.sources import ModelInfo, ModelSpec
    from explorer.ui.base.session import Session
    from explorer.ui.views.learn.ln_compare_view import LnCompareView
    from tests.ui.alone import InlineEngine
    session = Session()
    view = LnCompareView(session, InlineEngine(None))
    qtbot.addWidget(view)
    for name, words in (("gemma3-tiny", "The Gemma 3 block has its norms in one place only (Peri-LN)"),
                        ("olmo3-tiny", "The OLMo 2 / 3 block has its norms in one place only"),
                        ("llama-tiny", "")):
        session.set_model(ModelInfo(label=name, size="", config=preset(name), trained=False,
                                    device="cpu", dtype="float32", notices=(),
                                    spec=ModelSpec(preset=name)))
        assert view.compare_button.isEnabled() == (not words)
        assert view.top_label.text().startswith(words) and bool(view.top_label.text()) == bool(words)


def test_ln_compare_rejects_bad_depths(qtbot, ran):
    view = show(qtbot, ran, "Where the norm sits")
    view.depths.setText("six")
    view.run_button.click()
    assert "whole numbers" in view.claim.text() and view.run_button.isEnabled()


def test_explain_tab_follows_the_selected_node_with_live_numbers(qtbot, ran):
    view = show(qtbot, ran, "Explain")
    ran.session.set_node("trf_blocks.0.ff.layers.0")
    settle(qtbot, ran)
    text = view.text.text()
    assert "What it does." in text and "widened each token from 32 to 128 values" in text
    assert "Common mistake." in text
    ran.session.set_node("trf_blocks.1.ff")
    settle(qtbot, ran)
    assert "does not change the embedding size" in view.text.text()


def test_the_model_panel_counts_the_loaded_models_parameters(qtbot):
    from explorer.ui.views.learn.model_view import ModelView

    alone = Alone(qtbot)
    view = ModelView(alone.session, alone.engine)
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


@pytest.mark.parametrize("name", ["tiny", "qwen3-tiny"])
def test_the_model_panels_shares_are_of_the_models_own_total(qtbot, name):
    """Tied (GPT-2's tiny) or untied (qwen3-tiny): the parts' shares add up to 100 % of
    the model's own total, which reads 100.0 %; the other total is its share of it."""
    from explorer.core.gpt.sizes import sizes
    from explorer.ui.views.learn.model_view import ModelView
    alone = Alone(qtbot, name)
    view = ModelView(alone.session, alone.engine)
    qtbot.addWidget(view)
    cfg = alone.session.model.config
    s = sizes(cfg)
    own, other = (s.tied, s.untied) if cfg.tie_weights else (s.untied, s.tied)
    shares = {view.table.item(r, 0).text(): float(view.table.item(r, 2).text().rstrip("%"))
              for r in range(view.table.rowCount())}
    parts = sum(v for k, v in shares.items() if not k.startswith("total"))
    assert parts == pytest.approx(100.0, abs=0.05 * len(shares))
    totals = {k: v for k, v in shares.items() if k.startswith("total")}
    assert sorted(totals.values()) == sorted([100.0, round(100 * other / own, 1)])


def test_the_code_view_points_at_the_lines_and_traces_the_pass(qtbot, ran):
    from PySide6.QtCore import Qt

    from explorer.core.lessons.trace import trace_order
    from explorer.ui.views.learn.code_view import CodeView

    view = ran.view(CodeView)
    ran.session.set_node("trf_blocks.0.att")
    built, runs = view.highlighted()
    assert built.strip().startswith("self.att = MultiHeadAttention(")
    assert runs.strip() == "x = self.att(x, kv, pos)"
    assert view.forward_label.text().startswith("<b>forward_pre_ln</b>")
    lines = view.init_box.toPlainText().splitlines()  # the constructor's order is not the run's
    assert [i for i, line in enumerate(lines) if "self.att =" in line] < \
        [i for i, line in enumerate(lines) if "self.norm1 =" in line]
    assert "builds att, ff, norm1, norm2, drop_shortcut" in view.note.text()
    ran.session.set_node("trf_blocks.1.ff.layers.1")  # the GELU: its own class
    assert [t.strip() for t in view.highlighted()] == ["GELU(),", "return 0.5 * x * (1 + torch.tanh("]
    assert 'What runs is F.gelu(x, approximate="tanh")' in view.note.text()
    assert "GELU" in view.title.text() and "0.5 * x * (1 + tanh(" in view.note.text()
    ran.session.set_node("trf_blocks.0.norm1")  # a LayerNorm: its class, and where it is called
    assert [t.strip() for t in view.highlighted()][0] == "self.scale = nn.Parameter(torch.ones(emb_dim))"
    assert "LayerNorm" in view.title.text() and "calls it: x = self.norm1(x)" in view.note.text()
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
    qtbot.waitUntil(lambda: not view.timer.isActive(), timeout=60_000)
    assert ran.session.node == order[-1] == "out_head"
    assert view.highlighted()[1].strip().startswith("logits = self.out_head(x)")


def test_the_code_view_shows_the_post_ln_forward(qtbot):
    from explorer.ui.views.learn.code_view import CodeView

    alone = Alone(qtbot)
    from explorer.core.gpt.config import preset
    from explorer.core.sources import ModelInfo
    info = alone.session.model
    alone.session.set_model(ModelInfo(**{**info.__dict__, "config": preset("tiny", norm_position="post")}))
    view = alone.view(CodeView)
    alone.session.set_node("trf_blocks.0.add1")
    assert view.forward_label.text().startswith("<b>forward_post_ln</b>")
    code = view.forward_box.toPlainText().splitlines()
    norm1 = [i for i, line in enumerate(code) if "self.norm1(" in line][0]
    assert code.index(view.highlighted()[1]) < norm1  # Post-LN: the add, then the norm
    alone.session.set_node("trf_blocks.0.norm1")
    assert "TransformerBlock.forward_post_ln calls it" in view.note.text()


def test_the_gradients_view_draws_both_runs_and_forgets_them_with_the_model(qtbot, ran):
    from explorer.ui.views.learn.gradients_view import GradientsView
    from explorer.ui.plots.plot_text import empty_message

    view = ran.view(GradientsView)
    assert empty_message(view.plots["residual"]).startswith("Press")
    view.run_button.click()  # the inline engine answers at once
    qtbot.waitUntil(lambda: view.report is not None, timeout=60_000)
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
    assert f"{report.ratio():.3g}" in view.summary.text()
    assert f"<td>{with_.loss:.4g}</td><td>{with_.blocks[0]:.3g}</td>" in view.summary.text()
    view.no_norms.setChecked(True)  # the book's plain network: both runs without LayerNorm
    view.run_button.click()
    qtbot.waitUntil(lambda: view.report is not report, timeout=60_000)
    assert [r.norms_kept for r in view.report.runs] == [False, False]
    assert "blocks' LayerNorms removed" in view.summary.text()
    ran.session.set_model(ran.session.model)  # a model load: its numbers go
    assert view.report is None and all(not p.listDataItems() for p in view.plots.values())


def test_the_gradients_view_offers_a_llama_blocks_own_nodes(qtbot):
    from explorer.ui.views.learn.gradients_view import GradientsView

    alone = Alone(qtbot, "llama-tiny")
    alone.run()
    view = alone.view(GradientsView)
    keys = [view.node_box.itemText(i) for i in range(view.node_box.count())]
    assert keys[:2] == ["norm1", "att"] and "ff.silu" in keys and "drop1" not in keys
    assert view.node_box.currentText() == "ff" and view.no_norms.text() == "No RMSNorms"
    view.node_box.setCurrentText("ff.silu")
    view.run_button.click()
    qtbot.waitUntil(lambda: view.report is not None, timeout=60_000)
    n = alone.session.model.config.n_layers
    node = view.plots["node"].listDataItems()[0].getData()[1]
    assert np.allclose(10 ** node, [view.report.runs[0].norms[f"trf_blocks.{i}.ff.silu"]
                                    for i in range(n)], rtol=1e-5)


def test_every_placement_is_measured_side_by_side_and_trained_on_request(qtbot, ran):
    """The page's own experiment: the placements ticked, one curve each in every plot,
    their numbers the core's, a line of words each; the plot shown is the one chosen."""
    from explorer.core.experiments.ln_compare import EXPERIMENT_CONFIG
    from explorer.core.experiments.stability import TRAIN_CONTEXT, at_initialisation
    from explorer.core.gpt.norm_position import NormPosition
    from explorer.ui.plots.plot_text import empty_message

    view = show(qtbot, ran, "Where the norm sits")
    page = view.placements
    view.tabs.setCurrentWidget(page)
    assert [b.text() for b in page.chosen.values()] == [p.title for p in NormPosition]
    assert "<b>Peri-LN</b> <tt>x + norm_out(f(norm_in(x)))</tt>" in page.formulas.text()
    assert empty_message(page.plots["grad"]) == "Press “Compare placements”"
    for box in page.chosen.values():
        box.setChecked(False)
    page.run_button.click()
    assert page.words.text() == "Tick at least one placement." and page.results == {}
    page.chosen[NormPosition.POST].setChecked(True)
    page.chosen[NormPosition.DYT].setChecked(True)
    page.depth.setValue(3)
    page.steps.setValue(2)
    page.run_button.click()
    qtbot.waitUntil(lambda: bool(page.results), timeout=60_000)
    assert list(page.results) == [NormPosition.POST, NormPosition.DYT]
    for key, count in (("grad", 2), ("residual", 4)):  # the stream also once trained
        curves = page.plots[key].listDataItems()
        assert len(curves) == count and empty_message(page.plots[key]) is None
        assert [len(c.getData()[0]) for c in curves] == [3] * count
    trained = page.plots["residual"].listDataItems()[3].yData  # as given (the axis is log)
    assert list(trained) == page.results[NormPosition.DYT].trained_residual_norms["warm-up"]
    assert len(page.plots["loss"].listDataItems()) == 4  # each with and without warm-up
    shape = EXPERIMENT_CONFIG.replace(n_layers=3, norm_position="dyt", tie_weights=True,
                                      context_length=TRAIN_CONTEXT)  # the experiment's model
    grads, sizes = at_initialisation(shape, page.last_ids, "xavier", 0)
    assert page.results[NormPosition.DYT].grad_norms == pytest.approx(grads, rel=1e-5)
    assert page.results[NormPosition.DYT].residual_norms == pytest.approx(sizes, rel=1e-5)
    words = page.words.text()
    assert "Post-LN" in words and "DyT" in words and words.count("no warm-up: loss") == 2
    assert page.canvases.currentIndex() == 0
    page.shown.setCurrentIndex(2)
    assert page.canvases.currentWidget().isVisible() and page.canvases.currentIndex() == 2
    assert page.run_button.isEnabled() and not page.stop_button.isEnabled()
    page.steps.setValue(2000)  # minutes of work: Stop ends it at the next step
    reports, report = [], page.controls.report

    def stop_at_two(done, total):  # the user presses Stop once two steps have shown
        reports.append((done, total))
        report(done, total)
        if done == 2:
            page.stop_button.click()

    page.controls.report = stop_at_two
    page.run_button.click()
    qtbot.waitUntil(page.run_button.isEnabled, timeout=60_000)
    assert reports[-1][1] == 2 * (1 + 2 * 2000) and reports[-1][0] <= 3
    assert page.words.text() == "Placements experiment stopped."
    assert list(page.results) == [NormPosition.POST, NormPosition.DYT]  # the last run's stay


def test_where_the_norm_sits_draws_the_loaded_models_own_blocks(qtbot):
    """On a Llama-family model the two orders drawn are its own block's (RMSNorms, no
    dropout), not GPT-2's; on OLMo, whose block has one placement, it says so before any
    Compare, and draws that one block."""
    from PySide6.QtWidgets import QGraphicsSimpleTextItem
    from tests.ui.alone import Alone

    def texts(view):
        return [i.text() for i in view.order_graphs.scene().items()
                if isinstance(i, QGraphicsSimpleTextItem)]
    llama = Alone(qtbot, "llama-tiny").ln_compare
    drawn = texts(llama)
    assert "Llama / Qwen block" in drawn and "Llama / Qwen · Post-LN block" in drawn
    assert "RMSNorm 1" in drawn and "LayerNorm 1" not in drawn and "Dropout" not in drawn
    assert "RMSNorm 1" in llama.orders.text() and "LayerNorm" not in llama.orders.text()
    olmo = Alone(qtbot, "olmo3-tiny").ln_compare
    assert not olmo.compare_button.isEnabled() and olmo.top_label.text()
    assert len([t for t in texts(olmo) if t.endswith(" block")]) == 1
