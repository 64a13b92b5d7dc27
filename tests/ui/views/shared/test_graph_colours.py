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
