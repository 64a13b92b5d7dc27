"""``gradients``: the prompt's next-token loss backpropagated through the model, the
gradient norm at every node, and (``--no-shortcut``) the same with every block's
shortcuts removed, side by side."""

from __future__ import annotations

import argparse
import sys

from ..core.base.outputs import atomic_output, check_output, shown
from .common import add_model_args, load
from ..core.gpt.nodes import FEED_FORWARD


def register(sub) -> None:
    g = sub.add_parser("gradients", help="gradient norms at every node for a prompt's "
                                         "next-token loss, with and without the shortcuts")
    g.add_argument("prompt")
    g.add_argument("--no-shortcut", action="store_true",
                   help="also run with every block's shortcuts removed, side by side")
    g.add_argument("--no-norm", action="store_true",
                   help="remove the blocks' LayerNorms as well (both runs): the book's plain "
                        "deep network, whose gradient fades without the shortcuts")
    g.add_argument("--node", default=FEED_FORWARD, help="the block node drawn in every block in "
                                                "--plot's middle panel (default ff)")
    g.add_argument("--plot", metavar="OUT.png", help="save the figure")
    add_model_args(g)
    g.set_defaults(func=gradients)


def gradients(args: argparse.Namespace) -> int:
    if args.plot:
        check_output(args.plot)  # before any work: a FIFO or a folder is refused now
    from ..core.run.generation import prepare_prompt
    from ..core.experiments.gradients import describe, gradient_report
    from ..core.gpt.nodes import Kind, all_hook_names, block_nodes, order_of

    if not args.prompt:
        prepare_prompt([], 2**31)  # an empty prompt: one clear line, before any load
    loaded = load(args)
    keys = [n.key for n in block_nodes(order_of(loaded.config)) if n.kind != Kind.PATTERN]
    if args.node not in keys:
        raise ValueError(f"--node takes a node of this model's block: {', '.join(keys)}")
    ids, notices = prepare_prompt(loaded.tokenizer.encode(args.prompt), loaded.config.context_length)
    for notice in notices:
        print(f"note: {notice}", file=sys.stderr)
    report = gradient_report(loaded.model, ids, without=args.no_shortcut, norms=not args.no_norm)
    cfg = loaded.config
    heads = ["with shortcuts"] + (["shortcuts removed"] if args.no_shortcut else [])
    print(f"gradient norms of the next-token loss over {len(ids)} tokens, at each node's output")
    print(f"{'node':32s}" + "".join(f"{h:>20s}" for h in heads))
    for name in all_hook_names(cfg, include_pattern=False):
        if name in report.runs[0].norms:
            print(f"{name:32s}" + "".join(f"{r.norms[name]:20.4g}" for r in report.runs))
    print(f"\n{'block parameters':32s}" + "".join(f"{h:>20s}" for h in heads))
    for i in range(cfg.n_layers):
        print(f"{'block ' + str(i):32s}" + "".join(f"{r.blocks[i]:20.4g}" for r in report.runs))
    print()
    for line in describe(report, cfg.n_layers):
        print(line)
    if args.plot:
        from ..ui.plots.gradient_plots import save_gradient_figure

        with atomic_output(args.plot) as tmp:
            save_gradient_figure(str(tmp), report, args.node, cfg.n_layers)
        print(f"saved {shown(args.plot)}", file=sys.stderr)
    return 0
