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
    stds = {n: alone.session.prompt.views[n].stats.std for n in graph.items
            if n in alone.session.prompt.views}
    smallest, largest = min(stds, key=lambda n: abs(stds[n])), max(stds, key=lambda n: abs(stds[n]))
    assert graph.scale.legend.text() == "std (log scale):"
    assert graph.scale.lo.text() == f"{stds[smallest]:.3g}" and graph.scale.hi.text() == f"{stds[largest]:.3g}"
    assert graph.scale.bar.isVisible()
    image = graph.scale.bar.pixmap().toImage()
    assert image.pixelColor(0, 5) == _colour(0.0) and image.pixelColor(image.width() - 1, 5) == _colour(1.0)
    assert graph.items[smallest].brush().color() == _colour(0.0)
    assert graph.items[largest].brush().color() == _colour(1.0)
