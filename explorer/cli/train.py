"""``train``: a small GPT on a text file, offline, resumable."""

from __future__ import annotations

import argparse
import sys
from ..core.base.outputs import atomic_output, check_output, shown
from ..core.gpt.config import NORM_POSITIONS, PRESETS
from .common import norm_help, seed_number


def register(sub) -> None:
    t = sub.add_parser("train", help="train a small GPT on a text file, offline")
    t.add_argument("--text", metavar="FILE", help="UTF-8 text to train on (default: Edith "
                                                  "Wharton's 'The Verdict', in resources/)")
    t.add_argument("--preset", default=None, choices=list(PRESETS),
                   help="model size: mini (default), or any of " + ", ".join(PRESETS)
                   + "; with --resume, the run's own")
    budget = t.add_mutually_exclusive_group()
    budget.add_argument("--steps", type=int, default=None, help="optimizer steps (default 200)")
    budget.add_argument("--minutes", type=float, default=None, help="train for this long instead")
    t.add_argument("--out", metavar="DIR", default="runs/train", help="checkpoint folder (default runs/train)")
    t.add_argument("--resume", action="store_true", help="continue the run saved in --out")
    t.add_argument("--batch-size", type=int, default=None)
    t.add_argument("--lr", type=float, default=None, help="peak learning rate")
    t.add_argument("--eval-every", type=int, default=None)
    t.add_argument("--seed", type=seed_number, default=None)
    t.add_argument("--precision", choices=("auto", "float32", "bfloat16"), default=None,
                   help="matrix products in bfloat16 or float32; auto (default): bfloat16 "
                        "where the device computes it natively, float32 elsewhere")
    t.add_argument("--device", default=None, help="where to train: cpu (default), cuda, "
                                                  "cuda:1, mps or auto")
    t.add_argument("--snapshots", type=int, default=None, metavar="N",
                   help="keep N copies of the weights while training, most of them early, in "
                        "OUT/snapshots (default 12; 0: none); open one with --checkpoint "
                        "OUT@stepK, list them with gpt-explorer info OUT")
    t.add_argument("--plot", metavar="OUT.png", help="save the loss curve at the end")
    t.add_argument("--norm", choices=list(NORM_POSITIONS), type=str.lower, default=None,
                   metavar="WHERE", help=norm_help())
    t.set_defaults(func=train)


def train(args: argparse.Namespace) -> int:
    if args.plot:
        check_output(args.plot)  # before the training: a FIFO or a folder is refused now
    from pathlib import Path

    from ..core.experiments.train_files import RunExists
    from ..core.experiments.training import (Trainer, TrainSettings, check_out_dir, default_text,
                                             read_text)

    text = read_text(args.text) if args.text else default_text()
    try:
        check_out_dir(args.out, fresh=not args.resume)
    except RunExists as exc:  # a new run never replaces one
        raise ValueError(f"{shown(args.out)} already holds a training run: continue it with --resume, "
                         f"or start a new one elsewhere (--out {exc.free})") from None
    changes = _changes(args, TrainSettings().min_lr)
    if args.resume:
        trainer = Trainer.resume(args.out, text, **changes)
        if args.preset is not None and args.preset != trainer.settings.preset:
            raise ValueError(f"--preset {args.preset} with --resume: the run in {shown(args.out)} "
                             f"trains {shown(trainer.settings.preset)}, and a run keeps its model "
                             f"(start a new run for {args.preset})")
        if trainer.recovered:
            print(f"{shown(args.out)}: {trainer.recovered}", file=sys.stderr)
        if trainer.finished:
            print(f"the run in {shown(args.out)} is finished at step {trainer.state.step:,} of "
                  f"{trainer.settings.max_steps:,}: nothing to do; ask for more with --steps "
                  f"{trainer.state.step + 100}", file=sys.stderr)
            return 0
        print(f"resuming {shown(args.out)} at step {trainer.state.step}", file=sys.stderr)
    else:
        trainer = Trainer(text, TrainSettings(preset=args.preset or "mini", **changes), args.out)
    s = trainer.settings
    print(f"training {s.preset} ({sum(p.numel() for p in trainer.model.parameters()):,} parameters) on "
          f"{len(trainer.train_ids):,} training and {len(trainer.val_ids):,} validation tokens in "
          f"{'bfloat16' if trainer.bfloat16 else 'float32'} on {trainer.device}; checkpoints in "
          f"{shown(args.out)}",
          file=sys.stderr)
    report = Progress(None if s.max_minutes else s.max_steps)
    try:
        for event in trainer.run():
            report(event)
    except KeyboardInterrupt:
        path = trainer.save()
        print(f"\ninterrupted: saved step {trainer.state.step} to {shown(path)}; continue with --resume",
              file=sys.stderr)
        return 130
    print(f"done at step {trainer.state.step}; explore it with: gpt-explorer gui --checkpoint "
          f"{Path(args.out) / 'model.safetensors'}", file=sys.stderr)
    if args.plot:
        from ..ui.plots.figures import save_loss_figure
        with atomic_output(args.plot) as tmp:
            save_loss_figure(str(tmp), report.losses, trainer.state.history)
        print(f"saved {shown(args.plot)}", file=sys.stderr)
    return 0


def _changes(args: argparse.Namespace, min_lr: float) -> dict:
    """The settings the options change (the rest: the run's own, or the defaults)."""
    changes = {k: v for k, v in {"max_steps": args.steps, "batch_size": args.batch_size, "lr": args.lr,
                                  "eval_every": args.eval_every, "seed": args.seed,
                                  "precision": args.precision, "snapshots": args.snapshots,
                                  "device": args.device,
                                  "norm_position": args.norm}.items() if v is not None}
    if args.lr is not None:  # the schedule decays towards 1e-4, or to the rate if lower
        changes["min_lr"] = min(args.lr, min_lr) if args.lr > 0 else args.lr
    if args.minutes is not None:
        changes.update(max_minutes=args.minutes, max_steps=10**9)
    if args.resume and args.norm is not None:
        raise ValueError(f"--norm {args.norm} with --resume: a run's norms stay where it started "
                         "(start a new run with --norm)")
    return changes


class Progress:
    """Training's events on the terminal: a bar that rewrites its line on a terminal, a
    plain line every 10 s into a pipe or a log, each evaluation and checkpoint."""

    def __init__(self, total: int | None) -> None:
        self.total = total
        self.losses: list[tuple[int, float]] = []
        self.tty = sys.stderr.isatty()
        self.last_line = 0.0  # when a plain progress line was last written (not a terminal)

    def __call__(self, event) -> None:
        import time

        from ..core.experiments.snapshots import SnapshotEvent
        from ..core.experiments.training import CheckpointEvent, EvalEvent, StepEvent
        if isinstance(event, StepEvent):
            self.losses.append((event.step, event.loss))
            total = self.total
            done = f"{event.step}/{total}" if total else f"{event.step}"
            bar = ""
            if total and self.tty:
                filled = int(30 * event.step / total)
                bar = "[" + "#" * filled + "." * (30 - filled) + "] "
            line = (f"{bar}step {done}  loss {event.loss:.3f}  lr {event.lr:.2e}  "
                    f"{event.tokens_per_second:,.0f} tok/s  {event.elapsed:,.0f} s")
            if self.tty:
                sys.stderr.write(f"\r{line} ")
            elif time.monotonic() - self.last_line >= 10 or event.step == total or event.step == 1:
                sys.stderr.write(line + "\n")  # a log or a pipe: a plain line now and then
                self.last_line = time.monotonic()
            sys.stderr.flush()
        elif isinstance(event, EvalEvent):
            from ..core.experiments.training import TrainSettings
            print(f"\nstep {event.step}: train loss {event.train_loss:.3f}, validation loss "
                  f"{event.val_loss:.3f} (estimates on {TrainSettings().eval_batches} batches "
                  f"each)\n  sample: {event.sample!r}")
        elif isinstance(event, CheckpointEvent):
            print(f"  saved {shown(event.path)}", file=sys.stderr)
        elif isinstance(event, SnapshotEvent):
            print(f"{chr(10) if self.tty else ''}  snapshot of step {event.step}: "
                  f"{shown(event.path)}", file=sys.stderr)
