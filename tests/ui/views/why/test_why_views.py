"""Why this token, Layer table and Head roles: each tested alone on a session, a tiny
model and an inline engine — empty before a pass, the answer equal to the core's, a
click selecting the node, stale answers cleared on a model change, Stop on the battery."""

import numpy as np
import pytest
from PySide6.QtCore import Qt

from explorer.core.attribution.why import why_token
from explorer.core.gpt.families.gpt2 import GPT2
from explorer.core.gpt.nodes import ATTENTION, Role, block_hook_name

GELU_OUTPUT = GPT2.role(Role.ACTIVATION_OUTPUT)
from explorer.core.gpt.tokenizer import encode, token_piece
from explorer.core.sources import ModelInfo, ModelSpec, random_model
from explorer.ui.plots.plot_text import empty_message
from explorer.ui.widgets.candidate_menu import candidate_at, candidate_menu
from tests.ui.alone import Alone


def test_before_a_pass_each_view_says_what_fills_it(qtbot):
    alone = Alone(qtbot)
    assert "Run a prompt" in empty_message(alone.why.plot)
    assert alone.why.heads.rowCount() == 0 and alone.layers.table.rowCount() == 0
    assert "Ask why" in alone.layers.note.text() and not alone.layers.export.isEnabled()
    assert "Run a prompt" in empty_message(alone.heads.grid)
    assert "why this token" not in alone.engine.names


def test_the_heads_patterns_come_a_turn_after_the_grid_and_say_what_fills_them(qtbot):
    from explorer.ui.views.why.heads_view import HeadsView
    alone = Alone(qtbot)
    heads = HeadsView(alone.session, alone.engine)
    qtbot.addWidget(heads)
    assert not heads.built() and "prompt_plot" not in heads.__dict__
    qtbot.waitUntil(heads.built, timeout=10_000)
    assert empty_message(heads.prompt_plot) == empty_message(heads.battery_plot) == "Click a head"
    assert heads.prompt_plot.getAxis("bottom").labelText == "key position"


def test_the_answer_is_the_cores_and_a_click_selects_the_node(qtbot):
    alone = Alone(qtbot)
    alone.run(max_tokens=2)
    alone.session.show_step(None)  # the prompt: why its next token
    why = alone.why
    alone.settle()
    answer = alone.session.why
    ids = alone.session.prompt.ids
    direct = why_token(alone.loaded.model, ids, len(ids) - 1)
    assert answer.attribution.target == direct.attribution.target == alone.session.prompt.top_ids[0]
    assert answer.attribution.total == pytest.approx(direct.attribution.total)
    assert why.heads.rowCount() == 8 and why.neurons.rowCount() == 8
    layer, head, value = answer.attribution.top_heads(1)[0]
    assert why.heads.item(0, 1).text() == f"{value:+.3f}"
    assert why.heads.item(0, 0).text() == f"B{layer} H{head}"
    why.heads.cellClicked.emit(0, 0)
    assert alone.session.node == block_hook_name(layer, ATTENTION)
    why.neurons.cellClicked.emit(0, 1)
    assert alone.session.node == block_hook_name(answer.attribution.top_neurons(1)[0][0], GELU_OUTPUT)
    # the layer table shows the same answer: one row per block, sortable
    layers = alone.layers
    assert layers.table.rowCount() == alone.session.model.config.n_layers
    shown = {int(layers.table.item(r, 0).data(Qt.DisplayRole)):
             float(layers.table.item(r, 6).data(Qt.DisplayRole)) for r in range(2)}
    assert shown == {row.block: pytest.approx(row.contribution, rel=1e-3) for row in answer.layers}
    layers.table.cellClicked.emit(1, 3)  # a row: its block drawn
    assert alone.session.layer == int(layers.table.item(1, 0).data(Qt.DisplayRole))
    layers.table.sortItems(6, Qt.DescendingOrder)
    values = [float(layers.table.item(r, 6).data(Qt.DisplayRole)) for r in range(2)]
    assert values == sorted(values, reverse=True)


@pytest.mark.parametrize("name,placement", [("gemma3-tiny", "Peri-LN"), ("olmo2-tiny", "Branch norm")])
def test_a_block_with_norms_in_its_branches_says_which_placement_rules_the_split_out(
        qtbot, name, placement):
    """Gemma's and OLMo's branches end in a norm: the answer is lens changes, named by
    the model's own placement, and the head and neuron tables are hidden."""
    alone = Alone(qtbot, name)
    alone.run(max_tokens=1)
    alone.session.show_step(None)
    alone.settle()
    why = alone.why
    assert not alone.session.why.attribution.exact
    assert f"— {placement}: changes of the lens, not contributions" in why.note.text()
    assert "Post-LN" not in why.note.text()
    assert why.heads.isHidden() and why.neurons.isHidden()


def test_a_mixture_of_experts_is_explained_by_heads_and_experts(qtbot):
    """Qwen3-MoE's stream is still a sum of branches: the parts add up to the logit,
    attention splits by head, and each block's feed-forward by the token's k experts —
    their parts add up to the feed-forward's, the experts it was not routed to give 0."""
    alone = Alone(qtbot, "qwen3moe-tiny")
    alone.run(max_tokens=1)
    alone.session.show_step(None)
    alone.settle()
    why, attribution = alone.why, alone.session.why.attribution
    assert attribution.exact and attribution.neurons.shape == (2, 8)
    assert sum(p.value for p in attribution.parts) == pytest.approx(attribution.logit, abs=1e-4)
    from explorer.core.attribution.direct import Branch
    ff = [p.value for p in attribution.parts if p.kind == Branch.FEED_FORWARD]
    assert list(attribution.neurons.sum(axis=1)) == pytest.approx(ff, abs=1e-5)
    assert ((attribution.neurons != 0).sum(axis=1) == 2).all()
    assert why.heads.rowCount() == 8 and not why.neurons.isHidden()
    assert why.neurons.rowCount() == 4 and why.neurons.item(0, 0).text().startswith("B")
    assert " E" in why.neurons.item(0, 0).text()
    assert why.neurons.horizontalHeaderItem(0).text() == "top expert"
    from explorer.core.attribution.why import summary_lines
    assert any(line.startswith("Top experts: block ") for line in summary_lines(alone.session.why))
    why.neurons.cellClicked.emit(0, 0)
    layer = why.neurons.item(0, 0).data(Qt.UserRole)[0]
    assert alone.session.node == f"trf_blocks.{layer}.ff.routing"


def test_a_generated_step_explains_the_token_it_chose(qtbot):
    alone = Alone(qtbot)
    alone.run(max_tokens=2)
    alone.why  # built, then shown the second step
    alone.session.show_step(1)
    alone.settle()
    step = alone.session.steps[1]
    answer = alone.session.why
    assert answer.attribution.target == step.token_id
    assert answer.position == len(step.ids) - 2 and answer.ids == tuple(step.ids[:-1])
    assert "generation step 1" in alone.why.position_box.currentText()


def test_a_typed_token_and_a_second_one_explain_their_difference(qtbot):
    alone = Alone(qtbot)
    alone.run(max_tokens=1)
    alone.session.show_step(None)
    why = alone.why
    why.target_edit.setText(" know")
    why.versus_edit.setText(" say")
    why.explain()
    alone.settle()
    a = alone.session.why.attribution
    assert (a.target, a.versus) == (encode(" know")[0], encode(" say")[0])
    why.target_edit.setText(" two words")
    why.explain()
    assert "is 2 tokens" in why.note.text()


def test_the_next_token_charts_request_is_answered(qtbot):
    alone = Alone(qtbot)
    alone.run(max_tokens=1)
    alone.session.show_step(None)
    alone.why
    asked = alone.shown
    third = alone.session.prompt.top_ids[2]
    chart = alone.next_token
    assert chart._shown("top_ids")[2] == third
    assert candidate_at(2.3, 10) == 2 and candidate_at(2.5, 10) is None
    assert candidate_at(10.0, 10) is None
    menu = candidate_menu(chart, third, chart._shown("top_pieces")[2], alone.services)
    action = menu.actions()[0]
    assert action.text() == f"Why this token? ({token_piece(third)!r})"
    action.trigger()
    alone.settle()
    assert asked == ["why"] and alone.session.why.attribution.target == third
    assert alone.why.target_edit.text() == token_piece(third)


def test_a_new_model_clears_the_answers(qtbot):
    alone = Alone(qtbot)
    alone.run(max_tokens=1)
    alone.why, alone.layers, alone.heads, alone.contributions
    alone.settle()
    assert alone.session.why is not None and alone.heads.roles is not None
    assert alone.contributions.graph is not None
    other = random_model("tiny", seed=5)
    alone.engine.loaded = other
    alone.session.set_model(ModelInfo.of(other, ModelSpec(preset="tiny", seed=5)))
    alone.settle()
    assert alone.session.why is None and alone.layers.table.rowCount() == 0
    assert alone.heads.roles is None and alone.why.heads.rowCount() == 0
    assert alone.contributions.graph is None and alone.contributions.shown_edges == []


def test_head_roles_on_the_prompt_then_the_battery_with_a_click(qtbot):
    alone = Alone(qtbot)
    alone.run("The cat sat on the mat and the dog sat on the rug", max_tokens=1)
    heads = alone.heads
    alone.settle()
    roles = heads.roles
    n_layers, n_heads = alone.session.model.config.n_layers, alone.session.model.config.n_heads
    assert roles.scores["previous-token"].shape == (n_layers, n_heads)
    heads.cell = (1, 2)  # a head clicked before the battery ran: its prompt pattern drawn
    heads._draw_patterns()
    assert empty_message(heads.prompt_plot) is None
    assert empty_message(heads.battery_plot) == "Press Induction battery"
    heads.role_box.setCurrentText("induction")
    assert "Press Induction battery" in empty_message(heads.grid)
    heads.run_battery()
    alone.settle()
    assert heads.roles.battery_patterns is not None and empty_message(heads.grid) is None
    assert "Strongest: block" in heads.note.text()
    heads.cell = (1, 2)
    heads._draw_patterns()
    assert empty_message(heads.prompt_plot) is None and empty_message(heads.battery_plot) is None
    heads.role_box.setCurrentText("copying")
    assert heads.values() is heads.roles.copying


def test_stop_ends_the_battery_and_says_so(qtbot):
    alone = Alone(qtbot)
    alone.run(max_tokens=1)
    heads = alone.heads
    alone.settle()
    before = heads.roles
    heads.run_battery()
    heads.controls.stop()  # before the job's first block
    alone.settle()
    assert "Stopped" in heads.note.text() and heads.roles is before
    assert heads.controls.run_button.isEnabled()


def test_the_graph_colours_each_branch_by_its_part_and_the_strip_by_block(qtbot):
    from explorer.core.gpt.nodes import FEED_FORWARD, FIRST_NORM
    LINEAR_2 = GPT2.role(Role.LAST_LINEAR)
    from explorer.ui.graph.contribution_colours import CONTRIBUTION, NEUTRAL, diverging, scale

    alone = Alone(qtbot)
    alone.run(max_tokens=1)
    alone.session.show_step(None)
    graph = alone.graph
    graph.stat_box.setCurrentText(CONTRIBUTION)
    assert "Ask why" in graph.scale.legend.text() and graph.strip.totals is None
    alone.why
    alone.settle()
    why = alone.session.why
    parts = {(p.layer, p.kind): p.value for p in why.attribution.parts}
    top = scale(why)
    layer = alone.session.layer
    fill = {name: item.fill.name() for name, item in graph.items.items()}
    assert fill[block_hook_name(layer, ATTENTION)] == diverging(parts[layer, "attention"], top).name()
    for key in (FEED_FORWARD, LINEAR_2):
        assert fill[block_hook_name(layer, key)] == diverging(parts[layer, "feed-forward"], top).name()
    assert fill[block_hook_name(layer, FIRST_NORM)] == NEUTRAL.name()
    np.testing.assert_allclose(graph.strip.totals, why.attribution.block_totals())
    colours = graph.strip.fills([1.0] * len(graph.strip.totals))
    biggest = int(np.argmax(np.abs(graph.strip.totals)))
    assert colours[biggest].name() == diverging(graph.strip.totals[biggest],
                                                abs(graph.strip.totals[biggest])).name()
    assert "blue against, red for" in graph.scale.legend.text()
    graph.stat_box.setCurrentText("std")  # back to the statistic: the strip too
    assert graph.strip.totals is None and "std" in graph.scale.legend.text()


def test_the_contribution_graph_draws_edges_above_the_threshold_and_a_click_names_one(qtbot):
    alone = Alone(qtbot)
    assert "Run a prompt" in empty_message(alone.contributions.plot)
    alone.run(max_tokens=1)
    alone.session.show_step(None)
    view = alone.contributions
    alone.settle()
    graph = view.graph
    assert graph.ids == tuple(alone.session.prompt.ids)
    view.threshold.setValue(5)
    assert len(view.shown_edges) == len(graph.edges(0.05)) > 0
    view.threshold.setValue(60)
    assert len(view.shown_edges) == len(graph.edges(0.60)) < len(graph.edges(0.05))
    view.threshold.setValue(5)
    kind, layer, head, source, target, value = next(e for e in view.shown_edges if e[0] == "head")
    x = source + (target - source) * 0.5
    assert view.edge_at(x, layer + 0.5)[:2] == (kind, layer)
    assert view.edge_at(-5.0, layer + 0.5) is None
    view.select((kind, layer, head, source, target, value))
    assert alone.session.node == block_hook_name(layer, ATTENTION)
    assert view.note.text().startswith(f"Block {layer}, head {head}:")


def test_every_part_of_the_waterfall_has_a_row_and_a_name(qtbot):
    """24 parts of a 12-block model, each named beside its own bar (attention and
    feed-forward alike), at the height the Why view gives the plot."""
    from explorer.core.attribution.direct import Attribution, Part
    from explorer.ui.plots.why_plots import bar_at, draw_waterfall, waterfall_bars, waterfall_height
    from explorer.ui.plots.plot_axes import plot_widget
    from PySide6.QtGui import QFontMetrics

    parts = tuple(Part(f"Block {i // 2} of 12 {'attention' if i % 2 == 0 else 'feed-forward'}",
                       "attention" if i % 2 == 0 else "feed-forward", i // 2, None,
                       (-1) ** i * 0.5) for i in range(24))
    a = Attribution(3, 10, None, 0.0, True, parts)
    bottoms, tops, total = waterfall_bars(a)
    assert tops[-1] == pytest.approx(a.total) and bottoms[-1] == 0 and total[-1]
    widget = plot_widget()
    qtbot.addWidget(widget)
    plot = widget.getPlotItem()
    metrics = QFontMetrics(plot.getAxis("left").font())
    widget.resize(400, waterfall_height(a, metrics.height()))
    widget.show()
    qtbot.waitExposed(widget)
    draw_waterfall(plot, a)
    qtbot.waitUntil(lambda: len(plot.getAxis("left")._tickLevels[0]) == 25, timeout=60_000)
    ticks = plot.getAxis("left")._tickLevels[0]
    assert [name for _, name in ticks] == [f"B{i // 2} {k}" for i in range(24)
                                           for k in ["attention", "feed-forward"][i % 2:i % 2 + 1]] + ["logit"]
    per_row = plot.vb.height() / 25
    assert per_row >= metrics.height()  # the names stand apart
    assert bar_at(a, 3.1) == 3 and bar_at(a, 24.0) is None  # the total is no part


def test_a_post_ln_model_shows_no_head_or_neuron_tables(qtbot):
    alone = Alone(qtbot, preset="tiny")
    other = random_model("tiny", seed=0, norm_position="post")
    alone.engine.loaded = other
    alone.session.set_model(ModelInfo.of(other, ModelSpec(preset="tiny", norm_position="post")))
    alone.run(max_tokens=1)
    alone.session.show_step(None)
    why = alone.why
    alone.settle()
    assert not alone.session.why.attribution.exact
    assert why.heads.isHidden() and why.neurons.isHidden() and "Post-LN" in why.note.text()


def test_expert_routing_draws_the_pass_routing_and_says_so_on_a_dense_model(qtbot):
    """Qwen3-MoE: block 1's map is the pass's routing weights (idle experts empty), the
    bars the tokens each expert got, the note the core's loss; a step (one token kept)
    and a dense model are each said in one line."""
    import numpy as np
    import pyqtgraph as pg
    from explorer.core.run.routing import routing_map
    from explorer.ui.plots.plot_text import empty_message
    from tests.ui.alone import Alone
    alone = Alone(qtbot, "qwen3moe-tiny")
    view = alone.routing
    assert "Run a prompt" in view.note.text() and empty_message(view.grid)
    alone.run(max_tokens=1)
    alone.session.show_step(None)
    alone.session.set_layer(1)
    alone.settle()
    want = routing_map(alone.session.current.views, alone.loaded.config, 1)
    image = next(i for i in view.grid.items if hasattr(i, "image"))
    shown = np.nan_to_num(image.image)
    np.testing.assert_allclose(shown, want.weights, rtol=1e-6)
    bars = next(i for i in view.load.items if hasattr(i, "opts") and "height" in i.opts)
    assert list(bars.opts["height"]) == list(want.tokens)
    assert f"Load-balancing loss {want.balance_loss:.3f} (2 if perfectly balanced)" in view.note.text()
    assert view.note.text().startswith("Block 1 of 2: each token's weights on its 2 of 8 experts")
    every = [routing_map(alone.session.current.views, alone.loaded.config, i) for i in (0, 1)]
    line = next(i for i in view.depth.items if isinstance(i, pg.PlotDataItem))
    assert list(line.getData()[1]) == pytest.approx([m.entropy_bits.mean() for m in every])
    view.canvas.scene().sigMouseClicked.emit(None)
    assert alone.session.node == "trf_blocks.1.ff.routing"
    alone.session.show_step(0)  # the generated token's own routing: one row, named by its step
    alone.settle()
    assert view.map.weights.shape == (1, 8) and (view.map.weights != 0).sum() == 2
    assert view.grid.getAxis("left")._tickLevels[0][0][1] == "step 0"
    dense = Alone(qtbot, "llama-tiny")
    dense.run(max_tokens=1)
    assert dense.routing.note.text().startswith("This model's feed-forward is dense")


def test_expert_routing_maps_the_whole_text_as_one_pass_over_it_routes_it(qtbot):
    """Whole text: the prompt's rows, then one row for each generated token, equal to
    the routing of one pass over the prompt and the generated tokens; rows named by
    their tokens; the note says how many were generated."""
    import numpy as np
    from explorer.core.run.passes import Keep, run_prompt
    from explorer.core.run.routing import routing_map
    from tests.ui.alone import Alone
    alone = Alone(qtbot, "qwen3moe-tiny")
    view = alone.routing
    alone.run(max_tokens=4)
    alone.session.set_layer(1)
    view.whole.setChecked(True)
    alone.settle()
    session = alone.session
    generated = [s.token_id for s in session.steps[:-1]]  # the last one was never run
    ids = list(session.prompt.ids) + generated
    whole = run_prompt(alone.loaded.model, ids, Keep(nodes=("trf_blocks.1.ff.*",)))
    want = routing_map(whole.views, alone.loaded.config, 1)
    assert view.map.weights.shape == (len(ids), 8) and len(generated) == 3
    np.testing.assert_allclose(view.map.weights, want.weights, atol=1e-5)
    np.testing.assert_allclose(view.map.probs, want.probs, atol=1e-5)
    ticks = dict(view.grid.getAxis("left")._tickLevels[0])
    last = f"{len(ids) - 1} {session.tokenizer.token_piece(generated[-1])!r}"[:14]
    assert ticks[len(ids) - 0.5] == last
    assert "Block 1 of 2 (prompt and 3 generated): each token's weights" in view.note.text()
    view.whole.setChecked(False)
    alone.settle()
    assert view.map.weights.shape == (len(session.prompt.ids), 8)


@pytest.mark.parametrize("name", ["tiny", "post-tiny", "llama-tiny"])
def test_why_and_layers_explain_the_model_that_ran_with_its_interventions(qtbot, name, tmp_path):
    """Block 0's feed-forward × 10 (What if): the waterfall's logit is the intervened
    model's, computed here with a hook of our own, not the clean model's; the answer and
    the Layers view say which model it explains."""
    import torch
    from explorer.core.experiments.interventions import Change, Intervention
    if name == "post-tiny":  # a Post-LN model, opened from its file
        alone = Alone(qtbot, loaded=random_model("tiny", seed=1, norm_position="post"))
    else:
        alone = Alone(qtbot, name)
    alone.session.add_intervention(Intervention(Change.SCALE, "trf_blocks.0.ff", k=10.0))
    alone.run(max_tokens=1)
    alone.session.show_step(None)
    why = alone.why
    why.explain()
    alone.settle()
    answer = alone.session.why
    model, ids = alone.loaded.model, list(alone.session.prompt.ids)
    target = answer.attribution.target
    with torch.no_grad():
        clean = model(torch.tensor([ids]))[0, -1, target].item()
        hook = model.trf_blocks[0].ff.register_forward_hook(lambda m, i, o: o * 10)
        try:
            changed = model(torch.tensor([ids]))[0, -1, target].item()
        finally:
            hook.remove()
    assert abs(changed - clean) > 1e-3
    assert answer.attribution.logit == pytest.approx(changed, abs=1e-5)
    assert answer.interventions == 1
    assert "(the model with its 1 What if intervention)" in why.note.text()
    assert alone.layers.note.text().endswith("in the model with its 1 What if intervention.")
    plain = why_token(model, ids, answer.position, target)  # the clean model, here
    assert alone.layers.rows[0].ff_norm == pytest.approx(10 * plain.layers[0].ff_norm, rel=1e-4)
