"""The graph's colours and the scale that says what they mean."""

from tests.ui.alone import Alone


def test_the_graph_colours_come_with_their_scale(qtbot):
    """Nodes coloured by a statistic: a viridis bar between the smallest and the largest
    value says what the colours mean; before a pass, no scale."""
    from explorer.ui.graph.graph_colours import colour as _colour

    alone = Alone(qtbot)
    graph = alone.graph
    assert not graph.scale.bar.isVisible() and "Run a prompt" in graph.scale.legend.text()
    alone.run(max_tokens=1)
    alone.session.show_step(None)
    alone.settle()
    import math

    from explorer.core.gpt.nodes import all_hook_names
    views = alone.session.prompt.views
    # one scale for the whole model: its ends are every block's extremes, not the drawn one's
    stds = {n: views[n].stats.std for n in all_hook_names(alone.session.model.config)}
    smallest, largest = min(stds, key=lambda n: abs(stds[n])), max(stds, key=lambda n: abs(stds[n]))
    assert graph.scale.legend.text() == "std (log scale):"
    ends = (graph.scale.lo.text(), graph.scale.hi.text())
    assert ends == (f"{stds[smallest]:.3g}", f"{stds[largest]:.3g}")
    assert graph.scale.bar.isVisible()
    image = graph.scale.bar.pixmap().toImage()
    assert image.pixelColor(0, 5) == _colour(0.0) and image.pixelColor(image.width() - 1, 5) == _colour(1.0)
    lo, hi = math.log10(stds[smallest]), math.log10(stds[largest])
    for layer in range(alone.session.model.config.n_layers):
        alone.session.set_layer(layer)
        alone.settle()
        assert (graph.scale.lo.text(), graph.scale.hi.text()) == ends  # the same on every block
        for name, item in graph.items.items():
            if name in stds and name in views:  # a colour is the same std on every block
                t = (math.log10(stds[name]) - lo) / (hi - lo)
                assert item.fill == _colour(t), name



def test_a_colour_scale_per_block_is_an_option(qtbot):
    """Ticked, the scale's ends are the drawn block's own extremes."""
    alone = Alone(qtbot)
    graph = alone.graph
    alone.run(max_tokens=1)
    alone.session.show_step(None)
    alone.settle()
    whole = (graph.scale.lo.text(), graph.scale.hi.text())
    graph.scale.per_block.setChecked(True)
    views = alone.session.prompt.views
    stds = [abs(views[n].stats.std) for n in graph.items if n in views and views[n].stats.std]
    own = (graph.scale.lo.text(), graph.scale.hi.text())
    assert own == (f"{min(stds):.3g}", f"{max(stds):.3g}") and own != whole
    graph.scale.per_block.setChecked(False)
    assert (graph.scale.lo.text(), graph.scale.hi.text()) == whole


def test_opening_attentions_steps_moves_neither_the_scale_nor_a_colour(qtbot):
    """The scale's ends are the whole model's nodes: attention's steps opened on one block
    (scores far wider than any node) take the end's colour, and every other node keeps its
    colour and the legend its numbers."""
    import torch
    alone = Alone(qtbot)
    with torch.no_grad():  # queries 1,000 times larger: the scores far past any node
        alone.loaded.model.trf_blocks[0].att.W_query.weight.mul_(1000)
    graph = alone.graph
    alone.run(max_tokens=1)
    alone.session.show_step(None)
    alone.settle()
    ends = (graph.scale.lo.text(), graph.scale.hi.text())
    fills = {name: item.fill for name, item in graph.items.items()}
    graph.open_att.setChecked(True)
    qtbot.waitUntil(lambda: "trf_blocks.0.att.attn_scores" in alone.session.prompt.views,
                    timeout=60_000)
    alone.settle()
    graph.recolour()
    scores = alone.session.prompt.views["trf_blocks.0.att.attn_scores"].stats.std
    assert scores > 10 * float(ends[1])  # beyond the scale: drawn at its top
    assert (graph.scale.lo.text(), graph.scale.hi.text()) == ends
    for name, fill in fills.items():
        if name in graph.items:
            assert graph.items[name].fill == fill, name
    assert graph.scale.legend.text() == "std (log scale):"  # the same pass: nothing moved


def test_a_new_pass_that_moves_the_scale_says_so(qtbot):
    """The next pass (another prompt, the next snapshot of a training run) with other ends:
    the legend says what they were, so a colour that changed is read as the scale's."""
    alone = Alone(qtbot)
    graph = alone.graph
    alone.run("Every effort moves you", max_tokens=1)
    alone.session.show_step(None)
    alone.settle()
    before = (graph.scale.lo.text(), graph.scale.hi.text())
    alone.run("I had always thought Jack Gisburn rather a cheap genius", max_tokens=1)
    alone.session.show_step(None)
    alone.settle()
    after = (graph.scale.lo.text(), graph.scale.hi.text())
    assert after != before
    assert graph.scale.legend.text() == f"std (log scale; was {before[0]}–{before[1]}):"
    graph.recolour()  # the same pass drawn again: still said
    assert "was" in graph.scale.legend.text()


def test_a_colour_scale_per_kind_spreads_attentions_steps_over_their_own_range(qtbot):
    """Per kind: every node on its own kind's scale (that kind's extremes over the whole
    model and the drawn steps), so attention's scores, far wider than any node, no longer
    all sit at the top end; its tooltip names its kind's ends; per block and per kind
    exclude each other."""
    import math

    import torch

    from explorer.core.gpt.nodes import Kind
    from explorer.ui.graph.graph_colours import colour as _colour
    alone = Alone(qtbot)
    with torch.no_grad():
        alone.loaded.model.trf_blocks[0].att.W_query.weight.mul_(1000)
    graph = alone.graph
    alone.run(max_tokens=1)
    alone.session.show_step(None)
    graph.open_att.setChecked(True)
    qtbot.waitUntil(lambda: "trf_blocks.0.att.attn_scores" in alone.session.prompt.views,
                    timeout=60_000)
    alone.settle()
    graph.recolour()
    top = _colour(1.0)
    scores, masked = "trf_blocks.0.att.attn_scores", "trf_blocks.0.att.masked_scores"
    assert graph.items[scores].fill == top  # whole model: past the top end
    graph.scale.per_block.setChecked(True)
    graph.scale.per_kind.setChecked(True)
    assert not graph.scale.per_block.isChecked()
    views = alone.session.prompt.views
    kinds = {n: item.node.kind for n, item in graph.items.items() if n in views}
    same = [n for n, k in kinds.items() if k == Kind.SCORES]
    stds = {n: abs(views[n].stats.std) for n in same}
    lo, hi = math.log10(min(stds.values())), math.log10(max(stds.values()))
    for n in same:  # the scores on the scores' own ends
        want = (math.log10(stds[n]) - lo) / (hi - lo) if hi > lo else 0.5
        assert graph.items[n].fill == _colour(want), n
    assert "colour scale of its kind (scores): std" in graph.items[scores].toolTip()
    assert "per kind of node" in graph.scale.legend.text()
    graph.scale.per_kind.setChecked(False)
    assert graph.items[scores].fill == top
    assert masked in graph.items
