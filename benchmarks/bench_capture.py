"""Capture cost: a forward pass with every node captured (statistics only) against a
plain forward, at T=128 and T=1024; and the memory of keeping every node's full tensor
at T=1024 against TransformerLens-style caching of the same nodes (a detached fp32 copy
of every hooked output, as ``run_with_cache`` keeps), on random gpt2-small weights, CPU.

    python benchmarks/bench_capture.py [--repeats 5]
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
from explorer.core.capture import Capture  # noqa: E402
from explorer.core.config import preset  # noqa: E402
from explorer.core.model import build_model  # noqa: E402
from explorer.core.nodes import all_hook_names  # noqa: E402

GIB = 2**30


def timed(fn) -> float:
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def tl_style_bytes(model, ids) -> int:
    """Keep a detached fp32 copy of every node's output, as run_with_cache does."""
    cache = {}
    modules = dict(model.named_modules())
    handles = [modules[n].register_forward_hook(
        lambda m, i, o, n=n: cache.__setitem__(n, o.detach().clone()))
        for n in all_hook_names(model.cfg, include_pattern=True)]
    try:
        with torch.inference_mode():
            model(ids)
    finally:
        for h in handles:
            h.remove()
    return sum(t.numel() * t.element_size() for t in cache.values())


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=5)
    args = ap.parse_args()
    print(f"machine: {machine_line()}")
    model = build_model(preset("gpt2-small"), seed=0)
    for t in (128, 1024):
        ids = torch.randint(0, 50257, (1, t), generator=torch.Generator().manual_seed(t))
        with torch.inference_mode():
            model(ids)  # warm-up
            plain, captured = [], []
            for _ in range(args.repeats):
                plain.append(timed(lambda: model(ids)))
                with Capture(model):
                    captured.append(timed(lambda: model(ids)))
        p, c = statistics.median(plain), statistics.median(captured)
        # each round's two passes ran back to back: the median of their ratios is the
        # figure least moved by the machine's load changing between rounds
        ratio = statistics.median(b / a for a, b in zip(plain, captured))
        print(f"T={t:5d}: plain forward {p:6.3f} s, every node's statistics {c:6.3f} s, "
              f"ratio {ratio:.2f}x (budget 1.15x; median of {len(plain)} rounds)")
    ids = torch.randint(0, 50257, (1, 1024), generator=torch.Generator().manual_seed(0))
    baseline = tl_style_bytes(model, ids)
    print(f"T= 1024 every node's full tensor, attention patterns included "
          f"({len(all_hook_names(model.cfg))} nodes):")
    print(f"  TransformerLens-style fp32 copies   {baseline / GIB:5.2f} GiB")
    for half in (False, True):
        with torch.inference_mode(), Capture(model, tensors=True, attention=True, float16=half,
                                             budget_bytes=8 * GIB) as cap:
            model(ids)
        print(f"  explorer Capture {'float16' if half else 'float32'}            "
              f"{cap.kept_bytes / GIB:5.2f} GiB  ratio {cap.kept_bytes / baseline:.2f} (budget 0.50)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
