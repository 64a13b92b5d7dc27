"""A training run killed at random moments, and a disk that fills at each file of a
checkpoint: does every run resume from one consistent step?

Each kill trial starts ``gpt-explorer train`` on the tiny preset with a checkpoint after
every step (so a good share of the kills land inside a checkpoint's writes or renames),
sends SIGKILL after a random time, then resumes the folder as ``train --resume`` does
(Trainer.resume: a checkpoint cut short is finished or dropped, and the model's, the
optimizer's and trainer.json's steps must agree) and trains one step more, saved.

Each full-disk trial trains to a checkpoint, then resumes with the process's file size
limited (RLIMIT_FSIZE, as a full disk answers a write) below the model's size or
between the model's and the optimizer's, expects the one-line refusal and the files of
the earlier step byte for byte, and resumes again without the limit.

    python benchmarks/kill_training.py [--kills 20] [--full 20] [--seed 0]
"""

from __future__ import annotations

import argparse
import os
import random
import resource
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

FILES = ("model.safetensors", "optimizer.pt", "trainer.json")


def train(out: Path, *extra: str, limit: int | None = None) -> subprocess.Popen:
    def limited():
        if limit:
            signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
            resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))
    return subprocess.Popen([sys.executable, "-m", "explorer", "train", "--preset", "tiny",
                             "--batch-size", "2", "--snapshots", "3", "--out", str(out), *extra],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                            cwd=ROOT, preexec_fn=limited, env={**os.environ, "OMP_NUM_THREADS": "1"})


def resumed_step(out: Path) -> tuple[int | None, str]:
    """The step the folder resumes from (None: no checkpoint yet), after one more step
    trained and saved from there; what resuming repaired."""
    from explorer.core.experiments.training import Trainer, default_text
    from explorer.core.experiments.train_checkpoint import model_step
    if not (out / "trainer.json").exists() and not (out / "trainer.json.part").exists():
        return None, "killed before its first checkpoint"
    trainer = Trainer.resume(out, default_text())
    step = trainer.state.step
    trainer.settings.max_steps = step + 1
    for _ in trainer.run():
        pass
    assert model_step(out / "model.safetensors") == step + 1
    return step, trainer.recovered or ""


def kills(n: int, rng: random.Random, base: Path) -> list[str]:
    lines = []
    for trial in range(n):
        out = base / f"kill{trial}"
        proc = train(out, "--steps", "400", "--eval-every", "1")
        time.sleep(rng.uniform(3.0, 9.0))
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        parts = sorted(p.name for p in out.glob("*.part")) if out.exists() else []
        step, repaired = resumed_step(out)
        lines.append(f"kill {trial + 1}: parts left {parts or 'none'}; resumed at step {step}"
                     f"{'; ' + repaired if repaired else ''}")
        print(lines[-1], flush=True)
    return lines


def full_disks(n: int, rng: random.Random, base: Path) -> list[str]:
    lines = []
    for trial in range(n):
        out = base / f"full{trial}"
        first = train(out, "--steps", "2", "--eval-every", "2")
        assert first.wait() == 0, first.stderr.read()
        before = {name: (out / name).read_bytes() for name in FILES}
        model = len(before["model.safetensors"])
        where = rng.choice(["model", "optimizer"])
        limit = rng.randint(model // 10, model - 1) if where == "model" else \
            rng.randint(model + 1, 2 * model - 1)
        proc = train(out, "--resume", "--steps", "4", "--eval-every", "2", "--snapshots", "0",
                     limit=limit)
        _, err = proc.communicate()
        said = [line for line in err.splitlines() if "could not be written" in line]
        kept = all((out / name).read_bytes() == before[name] for name in FILES)
        step, _ = resumed_step(out)
        lines.append(f"full disk at the {where} ({limit:,} bytes): exit {proc.returncode}, "
                     f"{len(said)} line, earlier checkpoint kept {kept}, resumed at step {step}")
        print(lines[-1], flush=True)
        assert proc.returncode != 0 and len(said) == 1 and kept and step == 2, err
    return lines


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--kills", type=int, default=20)
    ap.add_argument("--full", type=int, default=20)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    rng = random.Random(args.seed)
    with tempfile.TemporaryDirectory() as tmp:
        kills(args.kills, rng, Path(tmp))
        full_disks(args.full, rng, Path(tmp))
    print("every run resumed from one consistent step")
    return 0


if __name__ == "__main__":
    sys.exit(main())
