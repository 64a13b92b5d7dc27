"""A run saved with its branches (version 3): every line reads back with its name, where
it parts from the shown one and its own passes; a run without branches stays version 2;
a branch whose steps do not follow from where it parts is refused in one line."""

import dataclasses
import json

import pytest

from explorer.core.gpt.config import preset
from explorer.core.gpt.build import build_model
from explorer.core.gpt.tokenizer import encode
from explorer.core.playground.run_branches import lines_of
from explorer.core.playground.run_file import RunFileError, SavedRun, read_run, save_run, \
    weights_sha256
from explorer.core.run.generation import GenerationSettings
from explorer.core.run.passes import EVERYTHING, prompt_then_generate
from tests.core.playground.run_edit import opened, written

PROMPT = "Every effort moves you"
SETTINGS = GenerationSettings(max_new_tokens=4, stop_at_eot=False)


def passes_of(model, forced):
    out = []
    prompt_then_generate(model, encode(PROMPT), SETTINGS, out.append, keep=EVERYTHING,
                         forced=forced)
    return [p for p in out if hasattr(p, "views")]


def parting(a, b):
    return next((i for i, (x, y) in enumerate(zip(a, b)) if x is not y), None)


@pytest.fixture(scope="module")
def lines():
    """The run (4 greedy tokens) and two branches, as the window holds them: a branch's
    steps are the run's objects up to where it parts, then its own."""
    model = build_model(preset("tiny"), seed=2)
    run = passes_of(model, None)
    tokens = [p.token_id for p in run[1:]]
    a = passes_of(model, tokens[:1] + [13, 11, 198])  # '.' at step 1
    b = passes_of(model, tokens[:2] + [262, 290])  # ' the' at step 2
    steps = run[1:]
    return model, run[0], [("the run", steps), ("'.' at step 1", steps[:1] + a[2:]),
                           ("' the' at step 2", steps[:2] + b[3:])]


def saved(lines, shown):
    model, prompt, branches = lines
    return SavedRun(PROMPT, encode(PROMPT), {"label": "tiny", "source": {"preset": "tiny"},
                                            "sha256": weights_sha256(model),
                                            "config": model.cfg.to_dict()},
                    SETTINGS, [prompt, *branches[shown][1]],
                    branches=lines_of(branches, shown, parting), label=branches[shown][0],
                    shown=shown)


@pytest.mark.parametrize("shown", [0, 1, 2])
def test_every_line_reads_back_with_its_name_and_where_it_parts(lines, shown, tmp_path):
    path = save_run(tmp_path / "run.gbrun", saved(lines, shown))
    back = read_run(path)
    _, _, branches = lines
    assert back.shown == shown and back.label == branches[shown][0]
    assert [b.label for b in back.branches] == [label for i, (label, _) in enumerate(branches)
                                                if i != shown]
    assert back.tokens == [p.token_id for p in branches[shown][1]]
    for b in back.branches:  # each line whole: the shown steps before it parts, then its own
        steps = dict(branches)[b.label]
        whole = [p.token_id for p in back.passes[1:1 + b.at] + b.passes]
        assert whole == [p.token_id for p in steps] and len(whole) == 4
        assert [p.step for p in b.passes] == list(range(b.at, 4))
        own = steps[b.at:]
        assert [p.prob for p in b.passes] == [p.prob for p in own]
        assert b.passes[0].views["trf_blocks.1.add2"].stats.std == \
            own[0].views["trf_blocks.1.add2"].stats.std
    # where each parts from the shown one: the run and '.' part at 1, ' the' at 2 from the run
    at = {b.label: b.at for b in back.branches}
    assert at == {0: {"'.' at step 1": 1, "' the' at step 2": 2},
                  1: {"the run": 1, "' the' at step 2": 1},
                  2: {"the run": 2, "'.' at step 1": 1}}[shown]
    assert json.loads(opened(path.read_bytes())[0]["run"])["shown"] == shown
    assert opened(path.read_bytes())[0]["version"] == "3"


def test_a_run_without_branches_stays_version_2(lines, tmp_path):
    model, prompt, branches = lines
    run = saved((model, prompt, branches[:1]), 0)
    assert run.branches == []
    path = save_run(tmp_path / "run.gbrun", run)
    assert opened(path.read_bytes())[0]["version"] == "2"
    assert read_run(path).branches == [] and read_run(path).label == "the run"


@pytest.mark.parametrize("change, words", [
    (lambda r: r["branches"][0].update(at=5), "branch 1 parts at step 5"),
    (lambda r: r["branches"][1].update(at=0), "branch 2's passes are not steps 0, 1"),
    (lambda r: r["branches"][0].update(passes=9), "passes for the run shown"),
    (lambda r: r["branches"][0].update(label=7), "branches must be at most 64 objects"),
    (lambda r: r.update(shown=3), "shown a place among the 3 lines"),
    # a branch's first step that does not read the run's tokens before it
    (lambda r: r["passes"][5]["ids"].__setitem__(-2, 11), "branch \"'.' at step 1\"'s step 1 "
                                                           "reads ids that are not the prompt"),
])
def test_a_branch_that_does_not_follow_is_refused_in_one_line(lines, tmp_path, change, words):
    path = save_run(tmp_path / "run.gbrun", saved(lines, 0))
    meta, description, tensors = opened(path.read_bytes())
    change(description)
    written(path, meta, description, tensors)
    with pytest.raises(RunFileError) as caught:
        read_run(path)
    assert words in str(caught.value) and "\n" not in str(caught.value)
