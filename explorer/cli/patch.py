"""``patch``: the activation patching sweep for a clean and a corrupted prompt."""

from __future__ import annotations

import argparse
import sys

from ..core.base.outputs import atomic_output, check_output, shown
from .common import add_model_args, load


def register(sub) -> None:
    p = sub.add_parser("patch", help="activation patching: how much of the logit difference "
                                     "each node's clean value brings back")
    p.add_argument("--clean", required=True, help="the prompt with the right answer")
    p.add_argument("--corrupt", required=True, help="the same length, one detail changed")
    p.add_argument("--answer", required=True, help="the clean answer token, e.g. ' Mary'")
    p.add_argument("--wrong", required=True, help="the token it competes with, e.g. ' John'")
    p.add_argument("--positions", default="last", choices=["last", "all"],
                   help="patch the last position only (default) or each position in turn")
    p.add_argument("--plot", metavar="OUT.png", help="save the heatmap")
    p.add_argument("--csv", metavar="OUT.csv", help="save every cell")
    add_model_args(p)
    p.set_defaults(func=patch)


def patch(args: argparse.Namespace) -> int:
    for target in (args.csv, args.plot):  # before any work
        if target:
            check_output(target)
    from ..core.gpt.nodes import order_of, block_hook_name
    from ..core.experiments.patching import patch_sweep, single_token

    single_token(args.answer, "answer")  # checked before the model loads
    single_token(args.wrong, "wrong token")
    loaded = load(args)

    def progress(done, total):
        if done == total or done % 50 == 0:
            print(f"  {done}/{total} patches", file=sys.stderr)

    sweep = patch_sweep(loaded.model, args.clean, args.corrupt, args.answer, args.wrong,
                        args.positions, progress=progress)
    print(f"logit difference {args.answer!r} − {args.wrong!r}: clean {sweep.clean_diff:.4g}, "
          f"corrupted {sweep.corrupt_diff:.4g}")
    if sweep.note:
        print(f"note: {sweep.note}")
    last = len(sweep.positions) - 1
    print(f"share restored by patching each node at position {sweep.positions[last]} "
          "(rows: nodes, columns: layers)")
    print(f"{'node':14s}" + "".join(f"{layer:>8d}" for layer in range(sweep.layers)))
    for i, key in enumerate(sweep.keys):
        print(f"{key:14s}" + "".join(f"{sweep.restored[i, layer, last]:8.3f}"
                                     for layer in range(sweep.layers)))
    key, layer, position, value = sweep.best()
    print(f"largest: {block_hook_name(layer, key)} at position {position}: {value:.3f}")
    if args.csv:
        with atomic_output(args.csv) as tmp:
            sweep.write_csv(tmp)
        print(f"saved {shown(args.csv)}", file=sys.stderr)
    if args.plot:
        from ..ui.plots.patch_plots import save_sweep_figure

        with atomic_output(args.plot) as tmp:
            save_sweep_figure(str(tmp), sweep, order_of(loaded.config))
        print(f"saved {shown(args.plot)}", file=sys.stderr)
    return 0
