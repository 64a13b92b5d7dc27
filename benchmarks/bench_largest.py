"""A decode step's choice over the vocabulary: ``largest.top_k`` and ``largest.arg_max``
against ``torch.topk`` and ``torch.argmax`` on the same random row of logits, for each
vocabulary size the presets have, round after round (alternating which goes first).

    python benchmarks/bench_largest.py [--rounds 5] [--calls 200] [--k 10] [--threads 1]

Each round times ``--calls`` calls of each; the medians and worst rounds in ms a call.
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
from explorer.core.run.largest import arg_max, top_k  # noqa: E402

VOCABULARIES = {"GPT-2": 50257, "SmolLM2": 49152, "OLMo-2": 100352, "Llama 3": 128256,
                "Qwen3": 151936, "Gemma 3": 262144}


def per_call(fn, calls: int) -> float:
    fn()
    start = time.perf_counter()
    for _ in range(calls):
        fn()
    return (time.perf_counter() - start) / calls * 1e3


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--calls", type=int, default=200)
    ap.add_argument("--k", type=int, default=10)
    ap.add_argument("--threads", type=int, default=1)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    print(f"machine: {machine_line()}")
    print(f"ms a call, median (worst) of {args.rounds} rounds; top {args.k}:")
    for family, n in VOCABULARIES.items():
        x = torch.randn(n, generator=torch.Generator().manual_seed(n))
        assert torch.equal(top_k(x, args.k)[1], torch.topk(x, args.k).indices)
        assert arg_max(x) == int(torch.argmax(x))
        rows = {"torch.topk": lambda: torch.topk(x, args.k), "top_k": lambda: top_k(x, args.k),
                "torch.argmax": lambda: torch.argmax(x), "arg_max": lambda: arg_max(x)}
        ms = {name: [] for name in rows}
        for r in range(args.rounds):
            for name in (list(rows) if r % 2 == 0 else list(rows)[::-1]):
                ms[name].append(per_call(rows[name], args.calls))
        cells = "   ".join(f"{name} {statistics.median(v):.3f} ({max(v):.3f})"
                           for name, v in ms.items())
        print(f"  {family:8s} {n:7d}   {cells}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
