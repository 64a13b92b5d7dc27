"""Every view built alone, on a session and an inline engine, without the window: a view
made after the model loaded and a pass ran starts from them, and the views that need
the model get it through jobs."""

import numpy as np

from explorer.core.gpt.nodes import all_hook_names, drawn_beside
from explorer.ui.views.registry import VIEWS
from tests.ui.alone import Alone


def test_each_view_alone_starts_from_the_session(qtbot):
    alone = Alone(qtbot)
    alone.run(max_tokens=2)
    for spec in VIEWS:
        assert alone.view(spec.cls).isVisible(), spec.title
    cfg = alone.session.model.config
    assert {n for n in alone.graph.items if n.startswith("trf_blocks.")} == {
        n for n in all_hook_names(cfg) if n.startswith("trf_blocks.0.")}
    assert alone.attention.head_box.count() == 1 + cfg.n_heads
    assert alone.inspector.title.text().startswith(f"<b>{alone.session.node}</b>")
    assert alone.prompt.output_count() == 3  # the prompt pass and two tokens
    assert list(drawn_beside(cfg.norm_position)) == ["att"]


def test_the_lens_asks_the_engine_and_shows_the_answer(qtbot):
    alone = Alone(qtbot)
    alone.run(max_tokens=1)
    alone.session.show_step(None)
    lens = alone.lens
    alone.settle()
    assert "logit lens" in alone.engine.names
    assert lens.table.rowCount() == 2 * alone.session.model.config.n_layers
    final = lens.rows[-1]
    assert final.top_ids[0] == alone.session.prompt.top_ids[0]  # the last row is the model's answer
    np.testing.assert_allclose(final.top_probs[0], alone.session.prompt.top_probs[0], rtol=1e-4)


def test_a_view_shows_its_failed_job_in_itself_and_on_the_status_line(qtbot):
    alone = Alone(qtbot)
    errors = []
    alone.session.errorRaised.connect(lambda title, text: errors.append((title, text)))
    compare = alone.ln_compare
    compare._compare()  # no prompt yet: said in the view, no job
    assert "Run a prompt first" in compare.top_label.text() and not alone.engine.names
    alone.run(max_tokens=1)
    alone.engine.loaded = None  # as if the model were gone: the job fails, one line
    compare._compare()
    alone.settle()
    assert compare.top_label.text() == "The comparison failed: no model is loaded yet"
    assert alone.session.status == "Pre-LN/Post-LN comparison: no model is loaded yet"
    assert not errors  # in the view, not a dialog to click away
