"""Continue with this token: a branch from a step of a run, in the window — the tokens of
a fresh run of its text, listed beside the run, every view on the selected one."""

from explorer.core.gpt.tokenizer import token_piece
from explorer.core.run.generation import GenerationSettings, generate
from explorer.core.sources import random_model
from explorer.ui.widgets.branch_box import BranchBox
from tests.ui.conftest import run_and_wait


def test_a_branch_continues_from_a_step_with_another_token(qtbot, make_window):
    window = make_window()
    run_and_wait(qtbot, window, max_tokens=4)
    session = window.session
    main = list(session.steps)
    session.show_step(1)
    other = next(t for t in session.current.top_ids if t != main[1].token_id)
    window.services.branch(other)
    qtbot.waitUntil(lambda: not window.running and len(session.steps) == 6, timeout=60_000)
    assert len(session.branches) == 2 and session.branch == 1
    steps = session.steps
    assert steps[0] is main[0] and steps[1].token_id == other and steps[1].step == 1
    assert [p.step for p in steps] == list(range(6))
    model = random_model("tiny", seed=0).model
    prompt = list(session.prompt.ids)
    fresh = generate(model, prompt + [main[0].token_id, other],
                     GenerationSettings(max_new_tokens=4, stop_at_eot=False))
    assert [p.token_id for p in steps[2:]] == fresh.new_ids
    box = window.prompt.findChild(BranchBox)
    assert box.isVisibleTo(window) and box.count() == 2 and box.currentIndex() == 1
    assert session.current is steps[1]  # shown where the branch parts
    session.select_branch(0)  # back to the run: its own tokens everywhere
    assert session.steps is session.branches[0][1] and [p.token_id for p in session.steps] == [
        p.token_id for p in main]
    assert window.prompt.output_count() == 1 + 4
    compare = window.view("branches")  # side by side: where they part, and the next step both ways
    compare.refresh()
    assert compare.left.currentIndex() == 0 and compare.right.currentIndex() == 1
    text = compare.note.text()
    assert text.startswith(f"They part at step 1: {token_piece(main[1].token_id)!r} against "
                           f"{token_piece(other)!r}.")
    after = [main[2], steps[2]]
    for column, p in ((1, after[0]), (2, after[1])):
        assert compare.table.item(0, column).text().startswith(repr(p.top_pieces[0]))
    labels = [compare.table.item(r, 0).text() for r in range(compare.table.rowCount())]
    last = labels.index("out_head std")  # every node of the step, in forward order
    assert labels[5] == "tok_emb std" and "B1 add2 std" in labels
    want = steps[2].views["out_head"].stats.std - main[2].views["out_head"].stats.std
    assert compare.table.item(last, 3).text() == f"{want:+.4f}"


def test_a_branch_needs_a_run_with_a_cache(qtbot, make_window):
    window = make_window()
    qtbot.waitUntil(lambda: window.session.model is not None, timeout=60_000)
    said = []
    window.session.errorRaised.connect(lambda title, text: said.append(text))
    window.services.branch(42)
    assert said and "generate first" in said[0].lower()
    assert len(window.session.branches) == 1
