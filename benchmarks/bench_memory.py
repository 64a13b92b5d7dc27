"""Resident memory over a long generation with every node captured, as a window run
keeps it: the prompt's pass, then one pass a token (every node's vector, its
statistics and the logits it was drawn from), all kept until the run is replaced.

    python benchmarks/bench_memory.py [--preset gpt2-small] [--new-tokens 1000] [--recompute]

Prints the process's resident memory before the prompt, after it, and every 100 tokens,
with the growth per token and the numpy bytes a step's pass holds. A window run makes
at most RUN_STEPS tokens, so the growth stops there. With --recompute every step runs
its whole context again ("Recompute all") and keeps at most its share of the run's
tensor budget (passes.RUN_BUDGET); the bound printed is that budget and the statistics.
"""

from __future__ import annotations

import argparse
import resource
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.common import machine_line  # noqa: E402
from explorer.core.gpt.tokenizer import encode  # noqa: E402
from explorer.core.run.generation import RUN_STEPS, GenerationSettings  # noqa: E402
from explorer.core.run.passes import (EVERYTHING, RUN_BUDGET, Pass,  # noqa: E402
                                      prompt_then_generate, recompute_budget)
from explorer.core.sources import random_model  # noqa: E402


def rss_mib() -> float:
    """The resident set now (Linux's /proc), in MiB."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def pass_bytes(p: Pass) -> int:
    arrays = [v.array for v in p.views.values() if v.array is not None]
    stats = [getattr(v.stats, f) for v in p.views.values()
             for f in ("hist", "top_dims", "top_values", "token_l2")]
    logits = [p.next_logits] if p.next_logits is not None else []
    return sum(np.asarray(a).nbytes for a in arrays + stats + logits)


def _kept(p: Pass) -> int:
    """A pass's kept tensors, each once (nodes that output one tensor share it)."""
    arrays = {v.array.__array_interface__["data"][0]: v.array.nbytes
              for v in p.views.values() if v.array is not None}
    return sum(arrays.values())


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--preset", default="gpt2-small")
    parser.add_argument("--new-tokens", type=int, default=1000)
    parser.add_argument("--recompute", action="store_true", help="Recompute all, as the window's box")
    args = parser.parse_args()
    print(machine_line())
    model = random_model(args.preset, seed=0).model
    settings = GenerationSettings(max_new_tokens=args.new_tokens, stop_at_eot=False,
                                  greedy=False, seed=1, recompute=args.recompute)
    kept: list[Pass] = []
    marks = {"before the prompt": rss_mib()}

    def report(p) -> None:
        if not isinstance(p, Pass):
            return
        kept.append(p)
        steps = len(kept) - 1
        if steps == 0:
            marks["after the prompt"] = rss_mib()
        elif steps % 100 == 0 or steps == args.new_tokens:
            marks[f"{steps} tokens"] = rss_mib()
            print(f"{steps} tokens: {marks[f'{steps} tokens']:.0f} MiB", flush=True)

    prompt_then_generate(model, encode("I had always thought Jack Gisburn"), settings, report,
                         keep=EVERYTHING)
    for what, mib in marks.items():
        print(f"{what:>20}: {mib:8.0f} MiB")
    steps = len(kept) - 1
    grown = marks[f"{steps} tokens"] - marks["after the prompt"]
    held = np.median([pass_bytes(p) for p in kept[1:]]) / 2**20
    print(f"{args.preset}, {steps} tokens: {grown:.0f} MiB more, {grown / steps:.2f} MiB a token "
          f"(a step's pass holds {held:.2f} MiB of arrays); a window run stops at "
          f"{RUN_STEPS:,} tokens: at most {grown / steps * RUN_STEPS:.0f} MiB")
    if args.recompute:
        tensors = sum(_kept(p) for p in kept[1:]) / 2**20
        print(f"recomputed steps keep {tensors:.0f} MiB of tensors together (the run's budget: "
              f"{RUN_BUDGET / 2**20:.0f} MiB, {recompute_budget(settings, EVERYTHING) / 2**20:.2f} "
              f"MiB a step); the largest resident set: {max(marks.values()):.0f} MiB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
