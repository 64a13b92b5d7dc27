"""Attention opened in the block graph: its steps as nodes in the book's order, each
with its shape, filled from the engine on demand with the pass's own numbers; the whole
block still in view at 1366×768 and 1150×700; a step inside attention selected opens it; its heatmap
draws masked scores as masked."""

import numpy as np
import pytest
from PySide6.QtWidgets import QApplication

from explorer.core.gpt.config import preset
from explorer.core.gpt.families.gpt2 import ATTENTION_INSIDE
from explorer.core.gpt.nodes import PATTERN, block_hook_name, is_pattern
from explorer.core.run.passes import Keep, run_prompt
from explorer.core.run.opened import inside_names
from tests.ui.conftest import run_and_wait
from tests.ui.views.shared.test_graph import (assert_all_in_view, assert_nothing_overlaps,
                                             graph_for, laptop)


def test_opening_attention_fills_its_steps_with_the_passs_numbers(qtbot, make_window):
    window = make_window()
    run_and_wait(qtbot, window, max_tokens=1)
    graph, session = window.graph, window.session
    session.show_pass(session.prompt)
    assert not set(inside_names(1)) - {block_hook_name(1, "att.attn_weights")} & set(session.current.views)
    session.set_layer(1)
    graph.open_att.setChecked(True)
    assert not graph.expand_ff.isChecked()  # one opens at a time: the block still fits
    names = inside_names(1)
    qtbot.waitUntil(lambda: all(n in session.current.views for n in names), timeout=60_000)
    QApplication.processEvents()
    assert {n for n in graph.items if n in names} == set(names)  # every step a node
    model = window.engine.loaded.model
    kept = run_prompt(model, session.prompt.ids, Keep(inside=True))
    for name in names:
        view = session.current.views[name]
        np.testing.assert_allclose(view.array, kept.views[name].array, atol=1e-5, err_msg=name)
        assert graph.edge_labels[name].text() == str(view.shape)  # its shape on its line
    t = len(session.prompt.ids)
    assert graph.edge_labels[block_hook_name(1, "att.attn_scores")].text() == f"(1, 4, {t}, {t})"
    assert graph.edge_labels[block_hook_name(1, "att.keys")].text() == f"(1, 4, {t}, 8)"
    assert_nothing_overlaps(graph)
    graph.open_att.setChecked(False)
    assert block_hook_name(1, "att.keys") not in graph.items
    assert graph.expand_ff.isChecked()  # the feed-forward folded to make room opens again
    session.set_node(block_hook_name(1, "att.context"))  # selecting a step opens attention
    assert graph.open_att.isChecked() and block_hook_name(1, "att.context") in graph.items


def test_the_pass_makes_the_shown_blocks_pattern_and_another_blocks_comes_when_shown(
        qtbot, make_window, monkeypatch):
    """A prompt pass makes the shown block's attention pattern only (each other block
    runs the fused kernel); showing another block makes its pattern from the input the
    pass kept, once, however many views ask: the graph's chip and the Attention tab then
    show the numbers a pass that made every pattern has."""
    window = make_window()
    session, engine = window.session, window.engine
    asked: list[str] = []
    submit = engine.submit
    monkeypatch.setattr(engine, "submit", lambda fn, name="job", **kw: (
        asked.append(name), submit(fn, name, **kw))[1])
    window.show_view("attention")  # it asks for the pattern of the block shown too
    run_and_wait(qtbot, window, max_tokens=1)
    session.show_pass(session.prompt)
    assert [n for n in session.prompt.views if is_pattern(n)] == [block_hook_name(0, PATTERN)]
    assert "open attention" not in asked
    name = block_hook_name(1, PATTERN)
    session.set_layer(1)
    qtbot.waitUntil(lambda: name in session.prompt.views, timeout=60_000)
    assert asked.count("open attention") == 1  # the graph and the Attention tab asked
    every = run_prompt(window.engine.loaded.model, session.prompt.ids, Keep())
    np.testing.assert_allclose(session.prompt.views[name].array, every.views[name].array, atol=1e-5)
    view = window.view("attention")
    qtbot.waitUntil(lambda: view.pattern is not None and view.pattern.shape[-1] == len(
        session.prompt.ids), timeout=60_000)
    np.testing.assert_array_equal(view.pattern, session.prompt.views[name].array[0])
    assert window.graph.items[name].brush().color().name() != "#e8e8e8"  # coloured by its value
    session.set_layer(0)
    session.set_layer(1)  # both there now: nothing more to make
    QApplication.processEvents()
    assert asked.count("open attention") == 1


def test_a_generated_step_opens_as_one_query_row_against_every_key(qtbot, make_window):
    window = make_window()
    run_and_wait(qtbot, window, max_tokens=3)
    session, graph = window.session, window.graph
    session.show_step(2)
    graph.open_att.setChecked(True)
    name = block_hook_name(0, "att.masked_scores")
    qtbot.waitUntil(lambda: name in session.current.views, timeout=60_000)
    t = len(session.prompt.ids)
    view = session.current.views[name]
    # step 2 runs step 1's token: its query against the prompt's keys and two more
    assert view.shape == (1, 4, 1, t + 2)
    whole = run_prompt(window.engine.loaded.model,
                       session.prompt.ids + [s.token_id for s in session.steps[:2]], Keep(inside=True))
    np.testing.assert_allclose(view.array[0, :, 0], whole.views[name].array[0, :, -1], atol=1e-4)


@pytest.fixture(scope="module")
def graph_sizes():
    """The graph's size in the real window at each laptop size (default docks, banner)."""
    return {}


@pytest.mark.parametrize("screen", [(1366, 768), (1150, 700)])
@pytest.mark.parametrize("name", ["gpt2-small", "gpt2-xl"])
@pytest.mark.parametrize("order", ["pre", "post"])
def test_the_whole_block_with_attention_open_fits_a_laptop_window(qtbot, make_window, graph_sizes,
                                                                   screen, name, order):
    if screen not in graph_sizes:
        window = make_window()
        laptop(window, *screen, True)
        graph_sizes[screen] = window.graph.size().toTuple()
    cfg = preset(name, norm_position=order)
    graph = graph_for(qtbot, cfg, cfg.context_length, graph_sizes[screen], layer=cfg.n_layers // 2,
                      attention=True)
    layer = cfg.n_layers // 2
    for node in ATTENTION_INSIDE:
        assert block_hook_name(layer, node.key) in graph.items
    assert graph.edge_labels[block_hook_name(layer, "att.attn_scores")].text() == \
        f"(1, {cfg.n_heads}, 1024, 1024)"
    assert all(label.text() for label in graph.edge_labels.values())
    assert_all_in_view(graph)
    assert_nothing_overlaps(graph)


def test_with_attention_opened_the_pass_brings_the_shown_blocks_steps(qtbot, make_window):
    window = make_window()
    window.session.set_layer(1)
    window.graph.open_att.setChecked(True)
    run_and_wait(qtbot, window, max_tokens=1)
    views = window.session.prompt.views
    assert set(inside_names(1)) <= set(views)  # with the pass itself, not a job after it
    assert not (set(inside_names(0)) - {block_hook_name(0, "att.attn_weights")}) & set(views)
