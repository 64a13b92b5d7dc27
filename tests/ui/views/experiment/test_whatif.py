"""What if, in the window: interventions added from the tab and the graph's menu change
what every view shows, one switch turns them off, files save and load, clean and changed
continuations side by side, and a click on the patching heatmap applies that patch."""

import json

import numpy as np
import pytest
from PySide6.QtCore import QPointF

from explorer.core.experiments.interventions import Intervention
from explorer.core.experiments.patching import patch_sweep
from explorer.core.gpt.tokenizer import encode
from explorer.ui.graph.node_menu import node_menu
from explorer.ui.plots.patch_plots import Panel
from tests.ui.conftest import run_and_wait, settle, wait_rerun


def wait_run(qtbot, window):
    wait_rerun(qtbot, window)


def kinds_offered(alone, view):
    """``offered(node)``: the kinds of intervention the What if form lists for a node."""
    def offered(node):
        alone.session.set_node(node)
        alone.settle()
        return [view.kind.itemText(i) for i in range(view.kind.count())]
    return offered


def test_an_intervention_from_the_tab_changes_every_view_and_the_switch_undoes_it(qtbot, make_window, tmp_path):
    window = make_window()
    run_and_wait(qtbot, window, max_tokens=2)
    session, view = window.session, window.view("whatif")
    before = session.prompt.views["trf_blocks.1.att"].array.copy()
    assert np.abs(before).max() > 0
    session.set_node("trf_blocks.1.att")
    view.kind.setCurrentText("zero")
    assert view.add()
    wait_run(qtbot, window)  # the prompt ran again, with it
    assert [i.describe() for i in session.interventions] == ["trf_blocks.1.att: zero"]
    assert view.list.item(0).text() == "trf_blocks.1.att: zero"
    assert np.abs(session.prompt.views["trf_blocks.1.att"].array).max() == 0
    assert np.abs(session.prompt.views["trf_blocks.1.drop1"].array).max() == 0  # the same tensor
    assert window.graph.items["trf_blocks.1.att"].badge.text() == "× 0"  # drawn on the node
    assert "with 1 intervention (What if tab)" in session.status
    view.switch.setChecked(False)  # one switch: the model as it is
    wait_run(qtbot, window)
    # block 2 is shown now: the pass made its pattern (the fused kernel makes none), the
    # same attention to float rounding
    np.testing.assert_allclose(session.prompt.views["trf_blocks.1.att"].array, before,
                               rtol=1e-5, atol=1e-8)
    assert window.graph.items["trf_blocks.1.att"].badge.text() == ""
    # save, clear, load: the same list back; a bad file changes nothing
    view.save(str(tmp_path / "iv.json"))
    assert json.loads((tmp_path / "iv.json").read_text())["interventions"] == [
        {"kind": "zero", "node": "trf_blocks.1.att", "k": 1.0}]
    view.clear()
    wait_run(qtbot, window)
    view.load(str(tmp_path / "iv.json"))
    wait_run(qtbot, window)
    # saved with the switch off: loaded as saved, and said
    assert session.interventions == [Intervention("zero", "trf_blocks.1.att")]
    assert not session.interventions_on and "switched off as saved" in view.message.text()
    (tmp_path / "bad.json").write_text('{"interventions": [{"kind": "heads", "node": "trf_blocks.0.att", "heads": [9]}]}')
    view.load(str(tmp_path / "bad.json"))
    assert "heads must be numbers 0..3" in view.message.text()
    assert session.interventions == [Intervention("zero", "trf_blocks.1.att")]
    # a bad form: the message says why, nothing is added
    session.set_node("trf_blocks.0.att")
    view.kind.setCurrentText("heads")
    view.heads.setText("one")
    assert not view.add() and "whole numbers" in view.message.text()


def test_clean_and_changed_side_by_side(qtbot, make_window):
    window = make_window()
    run_and_wait(qtbot, window, max_tokens=1)
    session, view = window.session, window.view("whatif")
    session.add_intervention(Intervention("scale", "trf_blocks.1.add2", k=-3.0))
    wait_run(qtbot, window)
    view.tokens.setValue(4)
    view.request_comparison()
    qtbot.waitUntil(lambda: view.comparison is not None, timeout=60_000)
    c = view.comparison
    assert view.table.rowCount() == 4 and c.first_difference() == 0
    assert view.table.item(0, 2).text() == f"{c.steps[0].kl:.4g}"
    assert "They part at step 0" in view.message.text()


def test_the_graph_menu_adds_interventions(qtbot, make_window):
    window = make_window()
    run_and_wait(qtbot, window, max_tokens=1)
    session = window.session
    menu = node_menu(session, "trf_blocks.0.att", window.graph)
    window.view("inspector").whatif_button.click()  # the inspector's way there
    qtbot.waitUntil(lambda: window.docks["whatif"].isVisible(), timeout=60_000)
    titles = [a.text() for a in menu.actions()]
    assert "Zero it" in titles and "Knock out a head" in titles
    heads = next(a.menu() for a in menu.actions() if a.text() == "Knock out a head")
    heads.actions()[1].trigger()
    assert session.interventions == [Intervention("heads", "trf_blocks.0.att", heads=(1,))]
    gelu = [a.text() for a in node_menu(session, "trf_blocks.0.ff.layers.1", window.graph).actions()]
    assert "GELU → relu" in gelu and "Knock out a head" not in gelu
    add = [a.text() for a in node_menu(session, "trf_blocks.1.add1", window.graph).actions()]
    assert "Remove its shortcut" in add
    wait_run(qtbot, window)


def test_a_mixture_of_experts_offers_forcing_and_banning_an_expert(qtbot):
    """On Qwen3-MoE's weights the graph's menu forces an expert, on its router it bans
    one; the What if tab reads the experts from its own field."""
    from explorer.core.gpt.config import preset
    from explorer.core.sources import ModelInfo, ModelSpec
    from explorer.ui.base.session import Session
    from explorer.ui.views.experiment.whatif_view import WhatIfView
    from PySide6.QtWidgets import QWidget
    from tests.ui.alone import InlineEngine
    session, parent = Session(), QWidget()
    qtbot.addWidget(parent)
    session.set_model(ModelInfo(label="moe", size="", config=preset("qwen3moe-tiny"), trained=False,
                                device="cpu", dtype="float32", notices=(),
                                spec=ModelSpec(preset="qwen3moe-tiny")))
    routing = node_menu(session, "trf_blocks.1.ff.routing", parent)
    force = next(a.menu() for a in routing.actions() if a.text() == "Send each token to one expert")
    assert [a.text() for a in force.actions()] == [f"expert {e}" for e in range(8)]
    force.actions()[3].trigger()
    assert session.interventions == [Intervention("force-expert", "trf_blocks.1.ff.routing",
                                                  experts=(3,))]
    router = [a.text() for a in node_menu(session, "trf_blocks.1.ff.gate", parent).actions()]
    assert "Ban an expert" in router and "Send each token to one expert" not in router
    view = WhatIfView(session, InlineEngine(None))
    qtbot.addWidget(view)
    session.set_node("trf_blocks.0.ff.gate")
    view.kind.setCurrentText("ban-experts")
    view.experts.setText("1, 6")
    assert not view.experts.isHidden() and view.heads.isHidden()
    assert view.build() == Intervention("ban-experts", "trf_blocks.0.ff.gate", experts=(1, 6))


def test_a_click_on_the_patching_heatmap_applies_that_patch(qtbot, make_window):
    window = make_window()
    view = window.view("patching")
    view.request()
    qtbot.waitUntil(lambda: view.sweep is not None, timeout=60_000)
    sweep = view.sweep
    assert set(view.shown) == {Panel.NODES}
    expected = patch_sweep(window.engine.loaded.model, view.clean.text(), view.corrupt.text(),
                           " Mary", " John")
    np.testing.assert_allclose(sweep.restored, expected.restored)
    row = sweep.keys.index("add2")
    patch = view.cell_clicked(Panel.NODES, QPointF(1.5, row + 0.5))  # the last block's output
    assert patch == Intervention("patch", "trf_blocks.1.add2", prompt=sweep.clean,
                                 positions=(len(encode(sweep.clean)) - 1,))
    wait_run(qtbot, window)
    session = window.session
    assert session.prompt.ids == encode(sweep.corrupt) and session.interventions == [patch]
    # the patched last position predicts what the clean prompt does
    with_patch = session.prompt.top_ids
    session.set_interventions([])
    wait_run(qtbot, window)
    window.prompt.run_prompt(sweep.clean)
    wait_run(qtbot, window)
    assert session.prompt.top_ids == with_patch
    # another model: the sweep of this one goes, the canvas says what fills it again
    session.set_model(session.model)
    assert view.sweep is None and view.shown == {}
    [blank] = view.canvas.ci.items
    assert blank._empty_note.isVisible() and "Run the sweep" in blank._empty_note.toPlainText()
    session.set_model(session.model)  # and an empty canvas is kept as it is
    assert list(view.canvas.ci.items) == [blank]


def test_interventions_that_do_not_fit_a_new_model_are_dropped_with_a_word(qtbot, make_window, tmp_path):
    from explorer.core.weights.checkpoints import save_checkpoint
    from explorer.core.gpt.config import preset
    from explorer.core.gpt.build import build_model
    from explorer.core.sources import ModelSpec

    window = make_window()
    session = window.session
    keep = Intervention("scale", "trf_blocks.0.ff", k=0.5)
    wide = Intervention("steer", "trf_blocks.0.add2", k=2.0, vector=(0.5,) * 32)  # tiny's width
    session.set_interventions([Intervention("zero", "trf_blocks.1.att"), keep,
                               Intervention("heads", "trf_blocks.0.att", heads=(3,)), wide])
    small = save_checkpoint(build_model(preset("tiny", n_layers=1, n_heads=2, emb_dim=16)),
                            tmp_path / "one.safetensors")
    window.models.load(ModelSpec(checkpoint=str(small)))
    qtbot.waitUntil(lambda: session.model is not None and session.model.config.n_layers == 1,
                    timeout=60_000)
    assert session.interventions == [keep]
    words = window.view("whatif").message.text()
    assert "trf_blocks.1.att: zero" in words and "knock out heads [3]" in words
    assert "steer 2 × a given vector" in words  # 32 values for a 16-wide model: dropped too


def test_a_llama_blocks_nodes_offer_their_own_interventions(qtbot):
    """On a Llama block the activation is SiLU (ff.silu), the adds have shortcuts and
    attention has heads; the list asks the model's own block, and an intervention added
    there runs."""
    from explorer.ui.views.experiment.whatif_view import WhatIfView
    from tests.ui.alone import Alone

    alone = Alone(qtbot, "llama-tiny")
    alone.run()
    view = alone.view(WhatIfView)
    offered = kinds_offered(alone, view)
    assert offered("trf_blocks.0.ff.silu") == ["zero", "mean", "scale", "steer", "patch", "activation"]
    assert "no-shortcut" in offered("trf_blocks.1.add2")
    assert offered("trf_blocks.0.att") == ["zero", "mean", "scale", "steer", "patch", "heads"]
    alone.session.set_node("trf_blocks.0.ff.silu")
    alone.settle()
    view.kind.setCurrentText("activation")
    view.function.setCurrentText("identity")
    spec = view.build()
    assert (spec.kind, spec.node, spec.function) == ("activation", "trf_blocks.0.ff.silu", "identity")
    assert spec.describe() == "trf_blocks.0.ff.silu: SiLU → identity"


def test_attentions_steps_take_the_interventions_they_are_offered(qtbot):
    """What if offers zero and scale on a score matrix, every kind of a vector node on
    queries, keys and values — and each one offered applies (it was refused as "no such
    node in this model")."""
    from explorer.core.experiments.interventions import applied, from_dict, resolve
    from explorer.ui.views.experiment.whatif_view import WhatIfView
    from tests.ui.alone import Alone

    alone = Alone(qtbot)
    alone.run()
    view = alone.view(WhatIfView)
    offered = kinds_offered(alone, view)
    assert offered("trf_blocks.0.att.attn_scores") == ["zero", "scale"]
    assert offered("trf_blocks.1.att.queries") == ["zero", "mean", "scale", "steer", "patch"]
    model, ids = alone.loaded.model, encode("Every effort moves you")
    import torch
    with torch.no_grad():
        clean = model(torch.tensor([ids]))
    for node in ("trf_blocks.0.att.queries", "trf_blocks.0.att.values", "trf_blocks.0.att.attn_scores"):
        view.kind.setCurrentText("zero")
        alone.session.set_node(node)
        alone.settle()
        spec = view.build()
        assert (spec.kind, spec.node) == ("zero", node)
        with applied(model, resolve(model, [spec], ids)), torch.no_grad():
            changed = model(torch.tensor([ids]))
        assert not torch.allclose(changed, clean), node  # it did something
    steer = from_dict({"kind": "steer", "node": "trf_blocks.0.att.masked_scores", "vector": [1.0] * 4})
    with pytest.raises(ValueError, match=r"a score matrix \(a row per query, a column per "
                                         r"key\) can be zeroed or scaled only"):
        steer.check(model.cfg)


def test_an_intervention_makes_the_runs_branches_again_under_it(qtbot, make_window):
    """The run again with a new intervention, as the main line is, and each of its
    branches made again on it: the same token chosen at the same step, every later step
    generated under the change (equal to a run of our own with the intervention and that
    token forced); the status line says so."""
    import torch
    from explorer.core.experiments.interventions import intervened
    from explorer.core.run.generation import GenerationSettings, generate
    window = make_window()
    session = window.session
    run_and_wait(qtbot, window, max_tokens=3)
    session.show_step(0)
    window.services.branch(13)
    qtbot.waitUntil(lambda: len(session.branches) == 2 and not window.running, timeout=60_000)
    label, old = session.branches[1]
    change = Intervention("scale", "trf_blocks.1.add2", k=0.5)
    session.add_intervention(change)
    wait_run(qtbot, window)
    qtbot.waitUntil(lambda: not window.running and len(session.branches) == 2, timeout=60_000)
    settle(qtbot, window)
    new_label, steps = session.branches[1]
    assert new_label == label and steps[0].token_id == 13 and steps[0] is not old[0]
    model, prompt = window.engine.loaded.model, list(session.prompt.ids)
    with torch.no_grad(), intervened(model, [change], prompt):  # 13 forced, then greedy
        want = generate(model, prompt + [13], GenerationSettings(max_new_tokens=len(steps) - 1))
    assert [s.token_id for s in steps[1:]] == want.new_ids
    assert len(steps) == len(old) > 1 and steps[1].prob == pytest.approx(want.steps[0].prob)
    assert steps[1].prob != pytest.approx(old[1].prob, rel=1e-3)  # not the branch from before
    assert "the run's 1 branch made again under this change" in " ".join(session.prompt.notices)


def test_the_patching_prompts_show_their_start_in_a_narrow_box(qtbot):
    """A prompt longer than its box shows its beginning (it opened scrolled to the end,
    seen from the middle)."""
    from explorer.ui.views.experiment.patching_view import PatchingView
    from tests.ui.alone import Alone
    alone = Alone(qtbot)
    view = alone.view(PatchingView, width=420)
    for box in (view.clean, view.corrupt):
        assert len(box.text()) > 40 and box.cursorPosition() == 0
        shown = box.cursorRect()
        assert shown.left() < box.width() // 4  # the text's start is in view
