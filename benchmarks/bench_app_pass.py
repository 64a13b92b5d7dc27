"""How long a 1024-token prompt keeps the user waiting in the app, as ratios to a plain
forward of the same tokens on the same engine thread (same torch threads), round after
round:

- first view drawn: from Ctrl+Enter until every view has drawn the prompt pass;
- every view complete: until the statistics left for later (core.passes.Keep.later) are
  computed and the views that wait for them have redrawn.

Each round runs the plain forward, the app with statistics when something shows them
(lazy, the default) and the app with every statistic in the pass (eager), in turn.
With --attention each round also runs the app with the graph's attention opened (lazy),
whose first view counts until the shown block's steps are drawn too.

    python benchmarks/bench_app_pass.py [--rounds 5] [--threads N] [--preset gpt2-small]
                                        [--attention] [--no-compile]

--threads sets torch's threads after the window has set its own (every usable core).
The rounds begin once the window has compiled the statistics' kernels (as it does once
on screen; ``--no-compile``: without them, as on a machine without a C++ compiler).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import torch  # noqa: E402
from PySide6.QtWidgets import QApplication  # noqa: E402

from benchmarks.app_window import open_window, waiter  # noqa: E402
from benchmarks.common import machine_line  # noqa: E402
from explorer.core.base.resources import resource_path  # noqa: E402
from explorer.core.gpt.tokenizer import decode, encode  # noqa: E402
from explorer.core.run import fused  # noqa: E402
from explorer.core.run.opened import inside_names  # noqa: E402

BUDGET_FIRST, BUDGET_ALL = 1.15, 2.0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--preset", default="gpt2-small")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--threads", type=int, default=None)
    ap.add_argument("--tokens", type=int, default=1024)
    ap.add_argument("--attention", action="store_true",
                    help="also the app with the graph's attention opened, each round")
    ap.add_argument("--no-compile", action="store_true",
                    help="the statistics without their compiled kernels")
    args = ap.parse_args()
    if args.no_compile:
        os.environ["GPT_EXPLORER_COMPILE"] = "0"
    app = QApplication([])

    wait = waiter(app)

    with tempfile.TemporaryDirectory() as tmp:
        window = open_window(args.preset, tmp)
        wait(lambda: window.session.model is not None)
        if args.threads:
            window.engine.submit(lambda ctx: torch.set_num_threads(args.threads), "threads")
        print(f"machine: {machine_line()}")
        if not args.no_compile:  # the window compiles them on a thread of their own
            wait(lambda: fused.ready() or fused.error() is not None, 300.0)
            print(f"compiled statistics: {'ready' if fused.ready() else fused.error()}")
        ids = encode(resource_path("the-verdict.txt").read_text(encoding="utf-8"))[:args.tokens]
        text = decode(ids)
        window.prompt.prompt.setPlainText(text)
        window.prompt.max_tokens.setValue(1)
        session, runs = window.session, window.prompt.runs
        marks: dict[str, float] = {}
        def drawn() -> bool:  # the prompt pass drawn (with the shown block's attention opened)
            return session.prompt is not None and (not window.graph.open_att.isChecked() or all(
                n in session.prompt.views for n in inside_names(session.layer)))

        session.caughtUp.connect(lambda: drawn() and marks.setdefault("first", time.perf_counter()))
        session.completed.connect(lambda: marks.setdefault("details", time.perf_counter()))

        def plain(ctx) -> float:
            tokens = torch.tensor([ids], device=next(ctx.model.parameters()).device)
            with torch.inference_mode():
                start = time.perf_counter()
                ctx.model(tokens)
                return time.perf_counter() - start

        def app_pass(lazy: bool, opened: bool = False) -> tuple[float, float, float]:
            runs.lazy = lazy
            window.graph.open_att.setChecked(opened)
            marks.clear()
            session.set_model(session.model)  # forget the last pass: nothing is reused
            app.processEvents()
            wait(lambda: not window.engine.busy())  # what the last run's step asked (opened)
            start = time.perf_counter()
            window.prompt.request_run()
            wait(lambda: not window.running)
            wait(lambda: "first" in marks)
            first = marks["first"] - start
            done = max(marks.get("details", 0.0) - start, first)
            return first, done, session.prompt.seconds

        rows = {"plain": [], "lazy": [], "eager": [], "opened": []}
        for r in range(args.rounds + 1):  # the first round warms up
            result = {}
            job = window.engine.submit(plain, "plain forward", finished=lambda s: result.update(s=s))
            wait(lambda: "s" in result)
            del job
            lazy, eager = app_pass(True), app_pass(False)
            opened = app_pass(True, opened=True) if args.attention else None
            if r:
                rows["plain"].append(result["s"])
                rows["lazy"].append(lazy)
                rows["eager"].append(eager)
                if opened:
                    rows["opened"].append(opened)
                    print(f"round {r}: attention opened: first view {opened[0]:.2f} s, "
                          f"complete {opened[1]:.2f} s (pass {opened[2]:.2f} s)")
                print(f"round {r}: plain {result['s']:.2f} s · lazy first view {lazy[0]:.2f} s, "
                      f"complete {lazy[1]:.2f} s (pass {lazy[2]:.2f} s) · eager first view "
                      f"{eager[0]:.2f} s (pass {eager[2]:.2f} s)")
        window.close()
    threads = torch.get_num_threads() if args.threads is None else args.threads
    print(f"{args.preset}, {len(ids)}-token prompt, {threads} torch thread(s) "
          f"(ratios to the plain forward of the same round; median / worst of {args.rounds}):")
    for mode in ("lazy", "eager", "opened")[:3 if args.attention else 2]:
        for k, what, budget in ((0, "first view drawn", BUDGET_FIRST), (1, "every view complete", BUDGET_ALL)):
            ratios = [row[k] / p for row, p in zip(rows[mode], rows["plain"])]
            print(f"  {mode:6s} {what:22s} median {statistics.median(ratios):.2f}x  worst "
                  f"{max(ratios):.2f}x  (budget {budget}x)")
    print(f"  plain forward median {statistics.median(rows['plain']):.2f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
