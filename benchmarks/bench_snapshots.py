"""What snapshots cost a training run: the seconds the trainer spends writing them
against the run's whole time, measured in the same run from its own events (each
snapshot and step carries the seconds it took).

    python benchmarks/bench_snapshots.py [--preset mini] [--steps 200] [--snapshots 12]
                                         [--rounds 3]

Prints each round's share and the median and worst; the target is at most 10 % of the
training time.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.common import machine_line  # noqa: E402
from explorer.core.experiments.snapshots import SnapshotEvent  # noqa: E402
from explorer.core.experiments.training import Trainer, TrainSettings, default_text  # noqa: E402


def one_run(preset: str, steps: int, snapshots: int) -> tuple[float, float, int]:
    """(seconds in snapshots, seconds of the whole run, snapshots written)."""
    with tempfile.TemporaryDirectory() as out:
        trainer = Trainer(default_text(), TrainSettings(preset=preset, max_steps=steps,
                                                        snapshots=snapshots), out)
        start, spent, count = time.perf_counter(), 0.0, 0
        for event in trainer.run():
            if isinstance(event, SnapshotEvent):
                spent += event.seconds
                count += 1
        return spent, time.perf_counter() - start, count


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--preset", default="mini")
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--snapshots", type=int, default=12)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    print(machine_line())
    shares = []
    for r in range(args.rounds):
        spent, total, count = one_run(args.preset, args.steps, args.snapshots)
        shares.append(spent / total)
        print(f"round {r + 1}: {count} snapshots took {spent:.2f} s of a {total:.1f} s run: "
              f"{100 * shares[-1]:.1f} %", flush=True)
    print(f"{args.preset}, {args.steps} steps, {args.snapshots} snapshots: median "
          f"{100 * statistics.median(shares):.1f} %, worst {100 * max(shares):.1f} % of the "
          "training time (target at most 10 %)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
