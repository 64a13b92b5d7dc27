import json

import pytest
import torch

from explorer.core.weights.checkpoints import load_checkpoint
from explorer.core.experiments.training import (EvalEvent, StepEvent, Trainer, TrainSettings,
                                                default_text, learning_rate)

pytestmark = pytest.mark.slow  # the whole module: ./test.sh -m "not slow" leaves it out

TEXT = default_text()


def fast(**changes) -> TrainSettings:
    base = dict(preset="tiny", max_steps=40, batch_size=2, lr=3e-3, min_lr=3e-4, warmup_steps=5,
                eval_every=20, eval_batches=2, sample_tokens=5, seed=7)
    base.update(changes)
    return TrainSettings(**base)


def test_a_few_dozen_steps_reduce_the_loss():
    trainer = Trainer(TEXT, fast())
    events = list(trainer.run())
    evals = [e for e in events if isinstance(e, EvalEvent)]
    steps = [e for e in events if isinstance(e, StepEvent)]
    assert [e.step for e in evals] == [0, 20, 40] and len(steps) == 40
    assert evals[0].train_loss == pytest.approx(10.82, abs=0.1)  # ln(50257) for a fresh model
    assert evals[-1].train_loss < evals[0].train_loss - 1.5
    assert evals[-1].val_loss < evals[0].val_loss - 1.0
    assert evals[-1].sample.startswith("Every effort moves you")


def test_learning_rate_warms_up_then_decays_to_the_minimum():
    s = fast(max_steps=100, warmup_steps=10)
    lrs = [learning_rate(i, s) for i in range(100)]
    assert lrs[0] == pytest.approx(s.lr / 10) and lrs[9] == pytest.approx(s.lr)
    assert all(a >= b for a, b in zip(lrs[10:], lrs[11:]))
    assert learning_rate(100, s) == pytest.approx(s.min_lr)


def test_saved_checkpoint_reloads_to_identical_logits(tmp_path):
    trainer = Trainer(TEXT, fast(max_steps=5, eval_every=5), tmp_path)
    list(trainer.run())
    loaded = load_checkpoint(tmp_path / "model.safetensors")
    assert loaded.trained and loaded.config == trainer.model.cfg
    ids = torch.tensor([[6109, 3626, 6100, 345]])
    trainer.model.eval()
    with torch.no_grad():
        assert torch.equal(loaded.model(ids), trainer.model(ids))


def test_resuming_continues_exactly_where_it_stopped(tmp_path):
    straight = Trainer(TEXT, fast(max_steps=12, eval_every=6))
    list(straight.run())

    first = Trainer(TEXT, fast(max_steps=12, eval_every=6), tmp_path)
    for event in first.run():  # interrupted after step 7, as Ctrl+C would
        if isinstance(event, StepEvent) and event.step == 7:
            break
    first.save()
    assert json.loads((tmp_path / "trainer.json").read_text())["step"] == 7
    resumed = Trainer.resume(tmp_path, TEXT)
    assert resumed.state.step == 7
    steps = [e.step for e in resumed.run() if isinstance(e, StepEvent)]
    assert steps == [8, 9, 10, 11, 12]
    for (name, a), (_, b) in zip(straight.model.state_dict().items(), resumed.model.state_dict().items()):
        torch.testing.assert_close(a, b, atol=1e-6, rtol=1e-5, msg=name)


def test_bad_settings_and_short_texts_are_refused():
    with pytest.raises(ValueError, match="learning rate 0.003 is below the schedule's final rate 1"):
        fast(min_lr=1.0).validate()
    for bad, message in (({"max_minutes": float("nan")}, "minutes \\(--minutes\\) must be a finite"),
                         ({"lr": 1e30}, "the learning rate \\(--lr\\) must be a finite number in \\(0, 10\\]"),
                         ({"batch_size": 2.5}, "batch size must be a whole number"),
                         ({"max_steps": -1}, "steps must be between 1")):
        with pytest.raises(ValueError, match=message):
            fast(**bad).validate()
    with pytest.raises(ValueError, match="too short"):
        Trainer("Just a few words.", fast())
    with pytest.raises(ValueError, match="no resumable"):
        Trainer.resume("/nonexistent/run", TEXT)


def simulated_run(total=200, eval_every=25, snapshots=12, step_s=2.0, eval_steps=3.0,
                  snap_s=1.5):
    """The events of a run on a controlled clock: every step 2 s (the first 5 s: it
    warms up), every evaluation 3 steps' time, every snapshot 1.5 s; with the elapsed
    time after each event."""
    from explorer.core.experiments.snapshots import SnapshotEvent, snapshot_plan
    plan, clock, events = set(snapshot_plan(total, snapshots)), 0.0, []
    clock += eval_steps * step_s
    events.append((EvalEvent(0, 11.0, 11.0, "", eval_steps * step_s), clock))
    for step in range(1, total + 1):
        took = 5.0 if step == 1 else step_s
        clock += took
        events.append((StepEvent(step, 9.0, 1e-3, 512.0, clock, took), clock))
        if step in plan:
            clock += snap_s
            events.append((SnapshotEvent(step, "", snap_s), clock))
        if step % eval_every == 0 or step == total:
            clock += eval_steps * step_s
            events.append((EvalEvent(step, 9.0, 9.0, "", eval_steps * step_s), clock))
    return events, clock


def test_the_time_left_counts_steps_evaluations_and_snapshots_as_timed_here():
    """Evaluations cost 3 steps each: from the second evaluation on, elapsed + left is
    within 25 % of the run's true total (exactly it, here); before an evaluation has been
    timed the time left is a range that holds the truth."""
    from explorer.core.experiments.train_estimate import MEASURING, Estimate
    events, total = simulated_run()
    estimate = Estimate(200, eval_every=25, snapshots=12)
    assert estimate.text() == MEASURING
    evals = 0
    for event, clock in events:
        estimate.add(event)
        evals += isinstance(event, EvalEvent)
        left = estimate.seconds_left()
        if left is None:
            assert estimate.text() == MEASURING
            continue
        lo, hi = left
        assert lo <= total - clock + 1e-6 or evals >= 2  # the range holds the truth…
        assert total - clock <= hi + 1e-6 or evals >= 2
        if evals >= 2:  # …and from the second evaluation on, one figure, near it
            assert lo == hi and abs(clock + hi - total) <= 0.25 * total
            assert abs(clock + hi - total) < 1e-6
    assert estimate.text() == "under a minute left (512 tokens/s here)"
    early = Estimate(200, eval_every=25, snapshots=12)
    for event, _ in events[:6]:  # five steps, the start's evaluation left out
        early.add(event)
    assert "–" in early.text() and early.text().endswith("min left (512 tokens/s here)")
    assert Estimate(None).text() == MEASURING  # a time limit: no number of steps to count


def test_a_finished_run_is_described_with_its_own_losses():
    from explorer.core.experiments.train_estimate import result_words
    evals = [EvalEvent(0, 10.9, 10.9, ""), EvalEvent(100, 4.1, 5.7, ""), EvalEvent(200, 2.9, 5.9, "")]
    words = result_words(evals)
    assert words.startswith("Done: validation loss 5.90 (at the start 10.90, lowest 5.70 at "
                            "step 100).")
    assert "stopped falling" in words and "memorise" in words
    still = result_words(evals[:2])
    assert "lowest 5.70 at step 100" in still and "stopped falling" not in still
    assert result_words([]) == "Done."


def test_bfloat16_learns_what_float32_learns_at_every_evaluation():
    """bfloat16 autocast (the default where the CPU has it natively) changes the speed,
    not what is learned: the same losses within noise at the same steps."""
    runs = {}
    for precision in ("float32", "bfloat16"):
        trainer = Trainer(TEXT, fast(precision=precision, max_steps=16, eval_every=8))
        assert trainer.bfloat16 == (precision == "bfloat16")
        runs[precision] = [(e.train_loss, e.val_loss) for e in trainer.run()
                           if isinstance(e, EvalEvent)]
    assert len(runs["float32"]) == 3
    assert runs["float32"] != runs["bfloat16"]  # the products really ran in bfloat16
    for (t32, v32), (t16, v16) in zip(runs["float32"], runs["bfloat16"]):
        assert t16 == pytest.approx(t32, abs=0.1) and v16 == pytest.approx(v32, abs=0.1)
    assert runs["bfloat16"][-1][0] < runs["bfloat16"][0][0] - 0.8  # it learned


def test_an_unknown_precision_is_refused():
    with pytest.raises(ValueError, match="precision 'half' is not one of auto, float32, bfloat16"):
        Trainer(TEXT, fast(precision="half"))


def test_a_new_run_goes_beside_an_existing_one_never_over_it(tmp_path):
    """A folder holding any part of a run (state, model, optimizer or snapshots) is refused
    for a new run, with the first free sibling named; train() never replaces one."""
    from explorer.core.experiments.train_files import (RunExists, check_out_dir, free_run_dir,
                                                       latest_run_dir)
    from explorer.core.experiments.training import train

    run = tmp_path / "run"
    assert free_run_dir(run) == run and check_out_dir(run, fresh=True) == run  # empty: fine
    for part in ("trainer.json", "model.safetensors", "optimizer.pt", "snapshots"):
        run.mkdir(exist_ok=True)
        (run / part).mkdir() if part == "snapshots" else (run / part).write_bytes(b"x")
        assert free_run_dir(run) == tmp_path / "run-2"
        with pytest.raises(RunExists) as caught:
            check_out_dir(run, fresh=True)
        assert caught.value.free == tmp_path / "run-2" and "already holds a training run" in str(caught.value)
        assert check_out_dir(run) == run  # resuming reads it
        for p in run.iterdir():
            p.rmdir() if p.is_dir() else p.unlink()
    (run / "trainer.json").write_bytes(b"{}")
    (tmp_path / "run-2").mkdir()
    (tmp_path / "run-2" / "optimizer.pt").write_bytes(b"x")
    (tmp_path / "run-3").write_bytes(b"a file, not a folder")
    assert free_run_dir(run) == tmp_path / "run-4"
    assert latest_run_dir(run) == run  # run-2 has no trainer.json; run-3 is a file
    (tmp_path / "run-2" / "trainer.json").write_bytes(b"{}")
    import os
    os.utime(run / "trainer.json", ns=(1_000_000_000, 1_000_000_000))
    assert latest_run_dir(run) == tmp_path / "run-2"  # the one saved last
    assert latest_run_dir(tmp_path / "other") == tmp_path / "other"
    with pytest.raises(RunExists):
        train(None, fast(max_steps=1), run, lambda event: None)
    assert (run / "trainer.json").read_bytes() == b"{}" and not (run / "model.safetensors").exists()
