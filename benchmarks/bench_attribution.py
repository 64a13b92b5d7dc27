"""Why this token, measured: the cost of attributing one position of a long prompt, of
scoring every head on it, and of the induction battery, each as a ratio to a plain
forward pass of the same tokens, measured in the same run, round after round.

    python benchmarks/bench_attribution.py [--preset gpt2-small] [--tokens 1024]
                                           [--rounds 5] [--threads N]

Attribution (``why_token``: one forward with hooks keeping the last position's vectors,
the attribution and the layer table) against ``model(ids)``; head roles on the prompt
(the attention patterns materialised) against the same; the battery (4 sequences of 40
random tokens, twice each) against plain forwards of those sequences.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.common import machine_line  # noqa: E402
from explorer.core.attribution.head_roles import battery, head_roles  # noqa: E402
from explorer.core.attribution.why import why_token  # noqa: E402
from explorer.core.gpt.config import preset  # noqa: E402
from explorer.core.gpt.build import build_model
from explorer.core.gpt.tokenizer import encode  # noqa: E402
from explorer.core.experiments.train_text import default_text  # noqa: E402


def timed(fn) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--preset", default="gpt2-small")
    parser.add_argument("--tokens", type=int, default=1024)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--threads", type=int, default=None)
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    model = build_model(preset(args.preset), seed=0)
    ids = (encode(default_text()) * 2)[:args.tokens]
    tokens = torch.tensor([ids])
    seqs = battery(model.cfg.vocab_size, 40, 4, 0)

    def plain():
        with torch.inference_mode():
            model(tokens)

    def plain_battery():
        with torch.inference_mode():
            for row in seqs:
                model(row[None])

    runs = {"attribution": lambda: why_token(model, ids, len(ids) - 1),
            "head roles": lambda: head_roles(model, ids),
            "battery": lambda: head_roles(model, ids[:2], induction=True)}
    plain(), runs["attribution"]()  # warm
    ratios = {name: [] for name in runs}
    for r in range(args.rounds):
        base = timed(plain)
        base_battery = timed(plain_battery)
        for name, fn in runs.items():
            ratios[name].append(timed(fn) / (base_battery if name == "battery" else base))
        print(f"round {r + 1}: plain {base * 1000:.0f} ms, battery's plain forwards "
              f"{base_battery * 1000:.0f} ms; " + ", ".join(
                  f"{n} {v[-1]:.2f}x" for n, v in ratios.items()), flush=True)
    print(machine_line())
    print(f"{args.preset}, {len(ids)} tokens, {args.rounds} rounds (ratio to a plain forward "
          "of the same tokens; higher is slower):")
    for name, values in ratios.items():
        print(f"  {name:12s} median {statistics.median(values):.2f}x  worst {max(values):.2f}x")


if __name__ == "__main__":
    main()
