"""``compare-ln``: Pre-LN vs Post-LN on a prompt, the gradient experiment of Xiong et al.
(2020) at initialisation, and the stability experiments of every norm placement side by
side (``--json``, ``--train``)."""

from __future__ import annotations

import argparse
import sys

from ..core.base.outputs import atomic_output, check_output, shown
from ..core.gpt.config import NORM_POSITIONS
from .common import add_model_args, empty_prompt_early, load, spec_of


MAX_DEPTH = 96  # as in the app; each depth is a model built and run forward and backward


def register(sub) -> None:
    c = sub.add_parser("compare-ln", help="Pre-LN vs Post-LN on a prompt, and the gradient "
                                          "experiment at initialisation (Xiong et al. 2020)")
    c.add_argument("prompt")
    c.add_argument("--depth", type=int, default=12,
                   help="depth whose per-layer gradient norms are printed (default 12)")
    c.add_argument("--depths", default="6,12,24", help="depths compared (default 6,12,24)")
    c.add_argument("--init", default="xavier", choices=["xavier", "gpt2", "pytorch"],
                   help="initialisation for the gradient experiment (default xavier, as the paper)")
    c.add_argument("--init-seed", type=int, default=0)
    c.add_argument("--plot", metavar="OUT.png", help="save the figure")
    c.add_argument("--norms", default=",".join(NORM_POSITIONS), metavar="LIST",
                   help="the placements measured side by side, comma-separated (default all: "
                        + ", ".join(NORM_POSITIONS) + ")")
    c.add_argument("--json", metavar="OUT.json", help="write each placement's numbers: per "
                   "block at initialisation grad_norms and residual_norms (and losses with --train)")
    c.add_argument("--train", type=int, default=0, metavar="STEPS",
                   help="also train the experiment's model (--depth blocks) STEPS steps in "
                        "each placement on the sample text, with and without warm-up, and "
                        "compare the losses (default 0: no training)")
    c.add_argument("--figures", metavar="FOLDER", help="save one picture per experiment "
                   "there, every placement in each: placements-gradient.png, "
                   "placements-stream.png, and with --train placements-loss.png")
    c.add_argument("--lr", type=float, default=None,
                   help="peak learning rate of --train (default: the trainer's, 0.001)")
    add_model_args(c)
    c.set_defaults(func=compare_ln)


def _placements(args: argparse.Namespace) -> list[str]:
    """--norms as placements, each known, none twice; --train's steps in range."""
    from ..core.base.validate import real, whole

    whole(args.train, "--train", 0, 100_000)
    if args.lr is not None:
        real(args.lr, "--lr", 0.0, 10.0, lo_open=True)
    chosen = [n.strip().lower() for n in args.norms.split(",") if n.strip()]
    unknown = [n for n in chosen if n not in NORM_POSITIONS]
    if unknown or not chosen or len(set(chosen)) != len(chosen):
        raise ValueError(f"--norms takes placements separated by commas, each once, from "
                         f"{', '.join(NORM_POSITIONS)}; got {args.norms!r}")
    return chosen


def _stability(args, norms: list[str], ids: list[int], text: str) -> dict:
    """Every placement measured, printed one line each, and written to --json."""
    import json

    from ..core.experiments.ln_compare import EXPERIMENT_CONFIG
    from ..core.experiments.stability import TRAIN_LR, stability, summary

    lr = TRAIN_LR if args.lr is None else args.lr
    base = EXPERIMENT_CONFIG.replace(n_layers=args.depth)
    print(f"\nevery placement at depth {args.depth}, {args.init} initialisation"
          + (f", trained {args.train} steps at learning rate {lr:g}, no clipping"
             if args.train else "") + ":")

    def progress(done: int, total: int) -> None:  # about ten lines, whatever the work
        if done == total or done % max(1, total // 10) == 0:
            print(f"  placements: {done}/{total} measurements and steps", file=sys.stderr)

    placed = stability(base, ids, norms, args.init, args.init_seed, args.train, text,
                       lr, progress)
    for line in summary(placed):
        print(line)
    if args.json:
        with atomic_output(args.json) as tmp:
            tmp.write_text(json.dumps({str(p): r.as_json() for p, r in placed.items()}, indent=1))
        print(f"saved {shown(args.json)}", file=sys.stderr)
    return placed


def _depths(args: argparse.Namespace) -> list[int]:
    try:
        depths = sorted({int(d) for d in args.depths.split(",") if d.strip()} | {args.depth})
    except ValueError:
        raise ValueError("--depths takes whole numbers separated by commas, e.g. 6,12,24") from None
    if min(depths) < 1 or max(depths) > MAX_DEPTH:
        raise ValueError(f"depths must be between 1 and {MAX_DEPTH} (the experiment builds a "
                         "model of each depth)")
    return depths


def _on_the_prompt(loaded, ids: list[int]) -> dict:
    """The prompt through the model in Pre-LN and Post-LN order, printed; nothing (and a
    note) for a family whose norms sit in one place only."""
    from ..core.experiments.ln_compare import FINAL_NORM_NOTE, compare_prompt, no_twin
    why = no_twin(loaded.config)
    if why:
        print(f"note: {why[0].upper()}{why[1:]}", file=sys.stderr)
        return {}
    pre, post = compare_prompt(loaded.model, ids)
    print(f"model: {loaded.label}; the other order is its twin with the same weights")
    print(FINAL_NORM_NOTE)
    print(f"\nresidual stream after each block, prompt of {len(ids)} tokens "
          "(mean per-token L2 norm / std):")
    print(f"{'layer':>5} {'Pre-LN norm':>12} {'Pre-LN std':>11} {'Post-LN norm':>13} {'Post-LN std':>12}")
    for layer in range(len(pre.residual_norm)):
        print(f"{layer:5d} {pre.residual_norm[layer]:12.4g} {pre.residual_std[layer]:11.4g} "
              f"{post.residual_norm[layer]:13.4g} {post.residual_std[layer]:12.4g}")
    for run in (pre, post):
        cands = ", ".join(f"{p!r} {v:.3g}" for p, v in zip(run.top_pieces, run.top_probs))
        print(f"{run.norm_position.position.title} next tokens: {cands}")
    return {"pre": pre, "post": post}


def compare_ln(args: argparse.Namespace) -> int:
    for out in (args.plot, args.json):
        if out:
            check_output(out)  # before any work: a FIFO or a folder is refused now
    _figure_paths(args)
    norms = _placements(args)
    from ..core.experiments.ln_compare import EXPERIMENT_CONFIG, gradient_experiment
    from ..core.run.generation import prepare_prompt
    from ..core.base.resources import resource_path
    from ..core.gpt.tokenizer import encode  # the experiment's own GPT-2 models read with it

    depths = _depths(args)
    empty_prompt_early([args.prompt], spec_of(args).known_tokenizer())
    loaded = load(args)
    ids, notices = prepare_prompt(loaded.tokenizer.encode(args.prompt), loaded.config.context_length)
    for notice in notices:
        print(f"note: {notice}", file=sys.stderr)
    runs = _on_the_prompt(loaded, ids)
    text = resource_path("the-verdict.txt").read_text(encoding="utf-8")[:4000]
    print(f"\ngradient experiment: {args.init} initialisation, seed {args.init_seed}, "
          f"emb_dim {EXPERIMENT_CONFIG.emb_dim}, depths {depths}, LM loss on 'The Verdict'…",
          file=sys.stderr)
    result = gradient_experiment(EXPERIMENT_CONFIG, encode(text), depths, args.init, args.init_seed,
                                 lambda done, total: print(f"  {done}/{total}", file=sys.stderr) or True)
    print(f"\n|grad| of ff.layers.2.weight per layer at depth {args.depth}:")
    print(f"{'layer':>5} {'Pre-LN':>12} {'Post-LN':>12}")
    for layer, (a, b) in enumerate(zip(result.per_layer[("pre", args.depth)],
                                       result.per_layer[("post", args.depth)])):
        print(f"{layer:5d} {a:12.4g} {b:12.4g}")
    print(f"\nlast layer's |grad| against depth:\n{'depth':>5} {'Pre-LN':>12} {'Post-LN':>12}")
    for d, a, b in zip(depths, result.last_layer("pre"), result.last_layer("post")):
        print(f"{d:5d} {a:12.4g} {b:12.4g}")
    print("\n" + result.summary())
    full = resource_path("the-verdict.txt").read_text(encoding="utf-8")
    placed = _stability(args, norms, encode(text), full)
    if args.plot:
        from ..core.gpt.nodes import block_hook_name, block_output, order_of
        from ..ui.plots.figures import save_compare_figure
        node = block_hook_name(0, block_output(order_of(loaded.config)))
        with atomic_output(args.plot) as tmp:
            save_compare_figure(str(tmp), runs, result, args.depth, node, placed)
        print(f"saved {shown(args.plot)}", file=sys.stderr)
    if args.figures:
        _save_figures(args, placed)
    return 0


def _figure_paths(args: argparse.Namespace) -> dict:
    """--figures' files, each checked before any work ({} without --figures)."""
    if not args.figures:
        return {}
    from pathlib import Path

    from ..core.base.outputs import OutputError
    folder = Path(args.figures).expanduser()
    if not folder.is_dir():
        raise OutputError(f"--figures takes a folder that exists; {args.figures} is not one")
    from ..core.experiments.stability import Measure
    from ..ui.plots.figures import FIGURES
    return {key: check_output(folder / name) for key, name in FIGURES.items()
            if key != Measure.LOSS or args.train}


def _save_figures(args: argparse.Namespace, placed: dict) -> None:
    """One picture per experiment, every placement measured in each."""
    from ..core.experiments.ln_compare import EXPERIMENT_CONFIG
    from ..core.experiments.stability import TRAIN_CONTEXT, TRAIN_LR
    from ..ui.plots.figures import save_placement_figure

    lr = f", peak learning rate {TRAIN_LR if args.lr is None else args.lr:g}"
    note = (f"{args.depth} blocks of width {EXPERIMENT_CONFIG.emb_dim}, rows of {TRAIN_CONTEXT} "
            f"tokens, {args.init} initialisation, seed {args.init_seed}"
            + (f"; trained {args.train} steps on 'The Verdict'{lr}" if args.train else ""))
    for key, path in _figure_paths(args).items():
        with atomic_output(path) as tmp:
            save_placement_figure(str(tmp), key, placed, note)
        print(f"saved {shown(path)}", file=sys.stderr)
