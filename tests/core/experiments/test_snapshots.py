"""Snapshots while training: taken at the planned steps (most of them early), each the
model exactly as it was at its step, opened like any checkpoint (RUN_FOLDER@stepN), and
listed again from the run folder."""

import pytest
import torch

from explorer.core.experiments.snapshots import list_snapshots, resolve, snapshot_plan
from explorer.core.experiments.training import Trainer, default_text
from explorer.core.sources import ModelSpec, open_model
from tests.core.experiments.test_training import fast


def test_the_plan_starts_at_the_random_start_ends_at_the_end_and_is_dense_early():
    plan = snapshot_plan(200, 12)
    assert len(plan) == 12 and plan[0] == 0 and plan[-1] == 200
    assert plan == sorted(set(plan))
    assert sum(step <= 100 for step in plan) >= 8  # two thirds in the first half
    gaps = [b - a for a, b in zip(plan, plan[1:])]
    assert gaps == sorted(gaps)  # wider and wider
    assert snapshot_plan(5, 12) == [0, 1, 2, 3, 4, 5]  # each step once
    assert snapshot_plan(200, 0) == [] and snapshot_plan(200, 1) == [200]


def test_each_snapshot_is_the_model_at_its_step_and_opens_as_a_checkpoint(tmp_path):
    trainer = Trainer(default_text(), fast(max_steps=9, eval_every=9, snapshots=4), tmp_path)
    seen = {}
    for event in trainer.run():
        if type(event).__name__ == "SnapshotEvent":
            seen[event.step] = {k: v.clone() for k, v in trainer.model.state_dict().items()}
    assert sorted(seen) == snapshot_plan(9, 4) == [0, 1, 4, 9]
    assert [s.step for s in list_snapshots(tmp_path)] == [0, 1, 4, 9]
    ids = torch.tensor([[464, 3290, 318, 257]])
    for step, weights in seen.items():
        loaded = open_model(ModelSpec(checkpoint=f"{tmp_path}@step{step}"))
        for name, value in loaded.model.state_dict().items():
            assert torch.equal(value, weights[name]), (step, name)
        assert loaded.trained == (step > 0)
    first, last = (open_model(ModelSpec(checkpoint=f"{tmp_path}@step{k}")).model for k in (0, 9))
    with torch.no_grad():
        assert not torch.allclose(first(ids), last(ids))  # it learned in between


def test_a_step_without_a_snapshot_is_refused_with_the_steps_there_are(tmp_path):
    for _ in Trainer(default_text(), fast(max_steps=4, eval_every=4, snapshots=2), tmp_path).run():
        pass
    with pytest.raises(ValueError, match=r"has no snapshot of step 3; it has @step0, @step4"):
        resolve(f"{tmp_path}@step3")
    assert resolve(str(tmp_path / "model.safetensors")) == str(tmp_path / "model.safetensors")
    assert resolve("no/such/folder@step3") == "no/such/folder@step3"  # a name, not a run


def test_no_snapshots_when_asked_for_none(tmp_path):
    for _ in Trainer(default_text(), fast(max_steps=3, eval_every=3, snapshots=0), tmp_path).run():
        pass
    assert list_snapshots(tmp_path) == []
    with pytest.raises(ValueError, match="snapshots must be between 0 and 1,000"):
        fast(snapshots=-1).validate()


def test_two_snapshots_compared_node_by_node_equal_each_run_alone(tmp_path):
    from explorer.core.experiments.snapshot_compare import compare_snapshots
    from explorer.core.gpt.nodes import all_hook_names
    from explorer.core.run.passes import STATISTICS, run_prompt
    for _ in Trainer(default_text(), fast(max_steps=6, eval_every=6, snapshots=3), tmp_path).run():
        pass
    first, last = list_snapshots(tmp_path)[0], list_snapshots(tmp_path)[-1]
    ids = [464, 3290, 318, 257, 1110]
    got = compare_snapshots(first, last, ids)
    assert got.steps == (0, 6)
    model_cfg = open_model(ModelSpec(checkpoint=str(first.path))).config
    assert [r[0] for r in got.rows] == all_hook_names(model_cfg, include_pattern=False)
    for i, snap in enumerate((first, last)):
        alone = run_prompt(open_model(ModelSpec(checkpoint=str(snap.path))).model, ids, STATISTICS)
        for name, *stds in got.rows:
            assert stds[i] == pytest.approx(float(alone.views[name].stats.std), rel=1e-6), name
        assert [p for _, p in got.candidates[i]] == pytest.approx(list(alone.top_probs[:5]))
    assert any(a != b for _, a, b in got.rows)  # six steps changed something
    name, ratio = got.largest_change()
    a, b = next((a, b) for n, a, b in got.rows if n == name)
    assert ratio == pytest.approx(b / a)


def test_a_run_limited_by_time_keeps_snapshots_from_its_start_to_its_end(tmp_path):
    """--minutes: the steps are not known ahead, so the snapshots are planned over the
    minutes (the same squared spacing) and the last step is kept too."""
    trainer = Trainer(default_text(), fast(max_steps=10**9, max_minutes=0.03, eval_every=10**6,
                                           snapshots=4), tmp_path)
    for _ in trainer.run():
        pass
    steps = [s.step for s in list_snapshots(tmp_path)]
    assert steps[0] == 0 and steps[-1] == trainer.state.step > 0
    assert len(steps) >= 2 and steps == sorted(set(steps)) and len(steps) <= 5


def test_the_schedule_takes_planned_steps_and_planned_moments():
    from explorer.core.experiments.snapshots import SnapshotSchedule
    by_steps = SnapshotSchedule(200, 12)
    assert [s for s in range(201) if by_steps.due(s, 0.0)] == snapshot_plan(200, 12)
    assert not by_steps.last(200)
    by_time = SnapshotSchedule(10**9, 3, minutes=1.0)  # at 0 s, 15 s and 60 s, and the end
    taken = [step for step, t in [(0, 0.0), (1, 10.0), (2, 16.0), (3, 40.0), (4, 59.0)]
             if by_time.due(step, t)]
    assert taken == [0, 2] and by_time.last(4) and not by_time.last(4)
    assert not SnapshotSchedule(10**9, 0, minutes=1.0).last(5)


def test_a_snapshot_name_takes_ascii_digits_only_and_must_be_of_this_run(tmp_path):
    """@step٣ (an Arabic-Indic three) is not a step; a snapshot file named with such
    digits is not listed; another model's snapshot, or one recording another step, put in
    the run's folder is refused rather than opened as this run's."""
    import shutil

    from explorer.core.experiments.snapshots import snapshot_path
    run, other = tmp_path / "run", tmp_path / "other"
    for folder, preset in ((run, "tiny"), (other, "mini")):
        for _ in Trainer(default_text(), fast(preset=preset, max_steps=2, eval_every=2,
                                              snapshots=2, batch_size=1), folder).run():
            pass
    assert resolve(f"{run}@step\u0663") == f"{run}@step\u0663"  # not a run's step: a name
    (run / "snapshots" / "step00000\u0663.safetensors").write_bytes(b"")
    assert [s.step for s in list_snapshots(run)] == [0, 2]
    shutil.copy(snapshot_path(other, 2), snapshot_path(run, 1))  # mini's, in tiny's run
    with pytest.raises(ValueError, match="a snapshot of another model .* not this run's"):
        resolve(f"{run}@step1")
    shutil.copy(snapshot_path(run, 2), snapshot_path(run, 7))  # step 2's, named step 7
    with pytest.raises(ValueError, match="records step '2', not 7"):
        resolve(f"{run}@step7")
    assert resolve(f"{run}@step2") == str(snapshot_path(run, 2))
