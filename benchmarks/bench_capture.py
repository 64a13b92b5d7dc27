"""Capture cost: a forward pass with every node captured (statistics only) against a
plain forward, at T=128 and T=1024; and the memory of keeping every node's full tensor
at T=1024 against TransformerLens-style caching of the same nodes (a detached fp32 copy
of every hooked output, as ``run_with_cache`` keeps), on random gpt2-small weights, CPU.

    python benchmarks/bench_capture.py [--repeats 5] [--threads N] [--peer]

--peer: every node kept in full at T=1024 (attention patterns included), side by side
with TransformerLens's ``run_with_cache`` on the same shapes, round after round (it runs
in its own environment, .venv-tl: benchmarks/setup_transformerlens.sh; skipped with a
note when that is missing).
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path

import torch

try:
    import resource
except ImportError:  # not on Windows: no fault counts there
    resource = None

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.common import compile_option, compiled_statistics, machine_line  # noqa: E402
from explorer.core.run import resident  # noqa: E402
from explorer.core.run.capture import Capture  # noqa: E402
from explorer.core.gpt.config import preset  # noqa: E402
from explorer.core.gpt.build import build_model
from explorer.core.gpt.nodes import all_hook_names  # noqa: E402
from explorer.core.run.passes import EVERYTHING, run_prompt  # noqa: E402

GIB = 2**30


def timed(fn) -> float:
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def faults() -> int:
    """Page faults this process has taken so far (minor and major): what writing into
    memory the C heap did not have ready costs (0 where the system does not say)."""
    if resource is None:
        return 0
    use = resource.getrusage(resource.RUSAGE_SELF)
    return use.ru_minflt + use.ru_majflt


def counted(fn) -> tuple[float, int]:
    """(seconds, page faults) of ``fn()``."""
    before = faults()
    seconds = timed(fn)
    return seconds, faults() - before


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


TL_PYTHON = Path(__file__).resolve().parents[1] / ".venv-tl" / "bin" / "python"


def peer(rounds: int, tokens: int = 1024) -> int:
    """Rounds of: our plain forward, our pass with every node kept in full (statistics
    when shown: moments in the pass, the rest completed after; and all at once), then
    TransformerLens's plain forward and run_with_cache in its own process."""
    if not TL_PYTHON.exists():
        print("TransformerLens peer skipped: no .venv-tl (run benchmarks/setup_transformerlens.sh)")
        return 0
    threads = torch.get_num_threads()
    tl = subprocess.Popen([str(TL_PYTHON), str(Path(__file__).with_name("tl_peer.py")),
                           str(threads), str(tokens)], stdin=subprocess.PIPE,
                          stdout=subprocess.PIPE, text=True)
    print(tl.stdout.readline().strip())

    def ask(what: str) -> tuple[float, int]:  # (seconds, page faults) of the peer's pass
        tl.stdin.write(what + "\n")
        tl.stdin.flush()
        seconds, faulted = tl.stdout.readline().split()
        return float(seconds), int(faulted)

    model = build_model(preset("gpt2-small"), seed=0)
    ids = torch.randint(0, 50257, (1, tokens), generator=torch.Generator().manual_seed(0))
    lst = ids[0].tolist()
    # the app's pass, with room for every node's tensor (the app keeps 1 GiB by default,
    # and the statistics alone of what does not fit)
    everything = replace(EVERYTHING, budget_bytes=8 * GIB)
    missing = [n for n, v in run_prompt(model, lst, everything).views.items() if v.array is None]
    assert not missing, missing

    def one_capture(inside: bool, read: bool, on_read: bool = True) -> float:
        """One Capture keeping every node's full tensor and the attention patterns
        (``inside``: every block's attention steps too, as TransformerLens keeps q, k, v,
        scores, pattern and z); statistics when read (``read``: every one read as the
        pass ends), or (``on_read=False``) every statistic computed in the hooks."""
        start = time.perf_counter()
        with torch.inference_mode(), Capture(model, tensors=True, attention=True, inside=inside,
                                             budget_bytes=8 * GIB, on_read=on_read) as cap:
            model(ids)
        if read:
            cap.complete()
        seconds = time.perf_counter() - start
        assert not cap.dropped, cap.dropped  # every node kept in full
        return seconds

    rows = []  # per round: (seconds, page faults) of each row
    def ours() -> tuple[tuple[float, int], ...]:
        def plain():
            with torch.inference_mode():
                model(ids)
        return (counted(plain), counted(lambda: run_prompt(model, lst, everything)),
                counted(lambda: one_capture(False, False)),
                counted(lambda: one_capture(False, True)),
                counted(lambda: one_capture(False, True, on_read=False)),
                counted(lambda: one_capture(True, False)), counted(lambda: one_capture(True, True)))

    names = ("our plain forward", "the app's pass (moments; details later)",
             "every tensor, statistics when read", "every tensor and every statistic",
             "the same, statistics in the hooks", "with attention's steps, tensors",
             "with attention's steps, every statistic",
             "TransformerLens plain forward", "TransformerLens run_with_cache")
    for r in range(rounds + 1):  # round 0 warms both up; then alternating who goes first
        if r % 2:
            peer = ask("plain"), ask("cache")
            row = ours() + peer
        else:
            row = ours() + (ask("plain"), ask("cache"))
        if r:
            rows.append(row)
            print(f"round {r}: " + ", ".join(f"{name} {t:.2f} s ({n:,} faults)"
                                             for name, (t, n) in zip(names, row)), flush=True)
    tl.stdin.close()
    tl.wait()
    print(f"T={tokens}, {threads} torch thread(s), every node kept in full, median / worst of "
          f"{rounds} rounds (ratio to TransformerLens's run_with_cache in the same round):")
    print(f"  {'':42s} {'median':>8s}   ratio median / worst   page faults median / most")
    for k, name in enumerate(names):
        ratios = [row[k][0] / row[-1][0] for row in rows]
        counts = [row[k][1] for row in rows]
        print(f"  {name:42s} {statistics.median(row[k][0] for row in rows):6.2f} s   "
              f"{statistics.median(ratios):.2f}x / {max(ratios):.2f}x"
              f"{statistics.median(counts):16,.0f} / {max(counts):,}")
    return 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--threads", type=int, default=None, help="torch threads (default: torch's)")
    ap.add_argument("--peer", action="store_true", help="only the TransformerLens comparison")
    ap.add_argument("--device", default="cpu", help="cpu, cuda, mps (the statistics ratios)")
    ap.add_argument("--dtype", default="float32", help="float32 or bfloat16")
    compile_option(ap)
    args = ap.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    print(f"machine: {machine_line()}")
    if args.device == "cpu":  # the kernels are a CPU's
        compiled_statistics(args.no_compile)
    elif args.no_compile:  # a GPU's statistics as some forty kernels a shape (resident.py)
        os.environ["GPT_EXPLORER_COMPILE"] = "0"
    if args.peer:
        return peer(args.repeats)
    model = build_model(preset("gpt2-small"), seed=0).to(args.device, getattr(torch, args.dtype))
    model.tie_weights()
    sync = torch.cuda.synchronize if args.device.startswith("cuda") else (lambda: None)
    for t in (128, 1024):
        ids = torch.randint(0, 50257, (1, t), generator=torch.Generator().manual_seed(t)).to(args.device)
        def captured(**kw):  # the whole with-block: a GPU's capture ends with its copy
            with Capture(model, **kw):
                model(ids)
            sync()

        with torch.inference_mode():
            model(ids)  # warm-up (on a GPU: the statistics compiled for these shapes)
            captured()
            if args.device != "cpu":
                captured(tensors=True, attention=True, budget_bytes=8 * GIB)
                print(f"T={t:5d} the device's statistics: {resident.how()}")
            plain, stats_only, kept = [], [], []
            for _ in range(args.repeats):
                plain.append(timed(lambda: (model(ids), sync())))
                stats_only.append(timed(captured))
                if args.device != "cpu":
                    kept.append(timed(lambda: captured(tensors=True, attention=True,
                                                       budget_bytes=8 * GIB)))
        p, c = statistics.median(plain), statistics.median(stats_only)
        # each round's passes ran back to back: the median of their ratios is the
        # figure least moved by the machine's load changing between rounds
        ratio = statistics.median(b / a for a, b in zip(plain, stats_only))
        print(f"T={t:5d} {args.device} {args.dtype}: plain forward {p:6.3f} s, every node's statistics {c:6.3f} s, "
              f"ratio {ratio:.2f}x (worst {max(b / a for a, b in zip(plain, stats_only)):.2f}x; budget "
              f"1.5x; median of {len(plain)} rounds)")
        if kept:
            ratios = [b / a for a, b in zip(plain, kept)]
            print(f"T={t:5d} {args.device} {args.dtype}: every node and pattern kept in full and copied "
                  f"to the host {statistics.median(kept):6.3f} s, ratio {statistics.median(ratios):.2f}x "
                  f"(worst {max(ratios):.2f}x)")
    if args.device != "cpu" or args.dtype != "float32":
        return 0  # the memory comparison is of CPU float32 copies
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
