"""A mixture of experts opened in the block graph: the top-k weights fan out to one box
per expert and join again into the add; an expert no token chose is drawn idle (dashed,
no values); each box is its expert's output, filled on demand with the pass's own
numbers; its menu opens the expert's steps and forces or bans it; with 64 experts the
row shows the busiest and says how many more ran and how many sat idle; the whole block
in view at 1366×768 with nothing over anything."""

import numpy as np
import pytest
from PySide6.QtWidgets import QApplication

from explorer.core.gpt.build import build_model
from explorer.core.gpt.config import preset
from explorer.core.gpt.nodes import block_hook_name
from explorer.core.run.passes import Keep, run_prompt
from explorer.core.weights.checkpoints import save_checkpoint
from tests.ui.conftest import run_and_wait, settle
from tests.ui.views.shared.test_graph import assert_all_in_view, assert_nothing_overlaps, laptop

LAYER = 1


def tokens_of(session, expert):
    return session.current.views[block_hook_name(LAYER, "ff.routing")].array[0][:, expert] != 0


def _shown(qtbot, window, prompt: str):
    laptop(window, 1366, 768, True)
    window.prompt.prompt.setPlainText(prompt)
    run_and_wait(qtbot, window, max_tokens=1)
    session, graph = window.session, window.graph
    session.show_pass(session.prompt)
    session.set_layer(LAYER)
    graph.expand_ff.setChecked(True)
    settle(qtbot, window)
    routing = session.current.views[block_hook_name(LAYER, "ff.routing")].array[0]
    return session, graph, (routing != 0).sum(axis=0)


def test_eight_experts_fan_out_each_a_box_with_the_passs_numbers_the_idle_dashed(qtbot, make_window):
    window = make_window(preset="qwen3moe-tiny")
    session, graph, tokens = _shown(qtbot, window, "Every effort")  # 2 tokens: 4 experts at most
    chips = {e: block_hook_name(LAYER, f"ff.fc3.{e}") for e in range(8)}
    assert all(name in graph.items for name in chips.values())
    idle = {e for e in range(8) if tokens[e] == 0}
    assert 4 <= len(idle) < 8
    assert {e for e, name in chips.items() if graph.items[name].idle} == idle
    routing = block_hook_name(LAYER, "ff.routing")
    for e, name in chips.items():  # the fan: an arrow from the weights into every box
        into = [edge for edge in graph.edges[routing] if edge.target == name]
        assert len(into) == 1 and into[0].dashed == (e in idle)  # dashed into an idle one
    model = window.engine.loaded.model
    kept = run_prompt(model, session.prompt.ids, Keep(experts=True))
    for e, name in chips.items():
        if e in idle:
            assert name not in session.current.views
            continue
        view = session.current.views[name]
        assert view.shape == (1, int(tokens[e]), 32)
        np.testing.assert_allclose(view.array, kept.views[name].array, atol=1e-6)
    ran = [name for e, name in chips.items() if e not in idle]  # coloured by their values
    qtbot.waitUntil(lambda: all(graph.items[n].brush().color().name() != "#e8e8e8" for n in ran),
                    timeout=10_000)
    assert_all_in_view(graph)
    assert_nothing_overlaps(graph)
    # its menu: the expert's five steps, each shown in the inspector; force and ban
    busy = int(np.argmax(tokens))
    graph.node_menu(chips[busy], graph.mapToGlobal(graph.rect().center()))
    actions = [a for a in graph.menu.actions() if a.text()]
    steps = [a for a in actions if a.text().startswith(f"E{busy} ")]
    assert [a.text().split("(")[-1] for a in steps] == [
        f"ff.{s}.{busy})" for s in ("fc1", "fc2", "silu", "product", "fc3")]
    steps[2].trigger()
    assert session.node == block_hook_name(LAYER, f"ff.silu.{busy}")
    settle(qtbot, window)
    title = window.views["inspector"].title.text()
    assert f"ff.silu.{busy}" in title and f"(1, {int(tokens[busy])}, 32)" in title
    inspector = window.views["inspector"]  # its rows: the tokens routed to it
    pieces = session.current.row_labels()
    assert inspector._shown[2] == [pieces[t] for t in np.flatnonzero(tokens_of(session, busy))]
    graph.menu.close()
    next(a for a in actions if a.text() == "Send every token to it").trigger()
    run_and_wait(qtbot, window, max_tokens=1)
    forced = session.prompt.views[block_hook_name(LAYER, "ff.routing")].array[0]
    assert (np.flatnonzero(forced.any(axis=0)) == [busy]).all()


@pytest.mark.slow
def test_sixty_four_experts_show_the_busiest_and_say_the_rest(qtbot, make_window, tmp_path):
    cfg = preset("qwen3moe-tiny", n_experts=64, experts_per_token=4)
    path = save_checkpoint(build_model(cfg), tmp_path / "moe64.safetensors")
    window = make_window(preset=None, checkpoint=str(path))
    session, graph, tokens = _shown(qtbot, window, "I had always thought Jack Gisburn rather")
    boxes = sorted(int(n.rsplit(".", 1)[1]) for n in graph.items if ".ff.fc3." in n)
    ran = int((tokens > 0).sum())
    assert ran > 8 and len(boxes) == 7
    assert min(tokens[boxes]) >= sorted(tokens, reverse=True)[6]  # the seven busiest
    note = next(t.text() for k, t in graph.texts.items() if str(k).startswith("note"))
    assert note == f"+ {ran - 7} more ran; {64 - ran} idle"
    assert_all_in_view(graph)
    assert_nothing_overlaps(graph)
