"""``attribute``: why the model gives a token its logit (direct attribution through the
residual stream, the layer table); ``heads``: each attention head's role, scored."""

from __future__ import annotations

import argparse
import sys

from ..core.base.outputs import atomic_output, check_output, shown
from .common import add_model_args, empty_prompt_early, load, spec_of


def register(sub) -> None:
    a = sub.add_parser("attribute", help="why this token: each block's, head's and neuron's "
                                         "part of a token's logit")
    a.add_argument("prompt")
    a.add_argument("--target", metavar="TOKEN", help="the token to explain, as text with its "
                   "leading space (\" know\"); default: the model's choice")
    a.add_argument("--vs", metavar="TOKEN", help="explain the target's logit minus this one's")
    a.add_argument("--step", type=int, default=0, metavar="N",
                   help="generate N tokens (greedy) and explain the N-th; 0 (default): the "
                        "token after the prompt")
    a.add_argument("--top", type=int, default=10, metavar="K", help="heads and neurons listed")
    a.add_argument("--csv", metavar="FILE", help="the layer table as CSV")
    a.add_argument("--plot", metavar="FILE.png", help="the waterfall and top heads as a PNG")
    add_model_args(a)
    a.set_defaults(func=attribute)
    h = sub.add_parser("heads", help="each attention head scored as previous-token, "
                                     "first-token, current-token, local and induction")
    h.add_argument("prompt")
    h.add_argument("--induction", action="store_true",
                   help="also run the induction battery (seeded repeated random tokens)")
    h.add_argument("--csv", metavar="FILE", help="every head's scores as CSV")
    h.add_argument("--plot", metavar="FILE.png", help="the layers x heads grids as a PNG")
    add_model_args(h)
    h.set_defaults(func=heads)


def _prompt(args, loaded, new_tokens: int = 0) -> list[int]:
    from ..core.run.generation import prepare_prompt

    ids, notices = prepare_prompt(loaded.tokenizer.encode(args.prompt), loaded.config.context_length,
                                  new_tokens=new_tokens, leave_room=new_tokens > 0)
    for notice in notices:
        print(f"note: {notice}", file=sys.stderr)
    return ids


def attribute(args: argparse.Namespace) -> int:
    for out in (args.csv, args.plot):
        if out:
            check_output(out)  # before any work
    from ..core.attribution.layer_table import COLUMNS, write_csv
    from ..core.attribution.why import one_token, summary_lines, why_token
    from ..core.run.generation import GenerationSettings, generate

    if not 0 <= args.step <= 1000 or not 1 <= args.top <= 1000:
        raise ValueError("--step is 0..1000 and --top 1..1000")
    early = spec_of(args).known_tokenizer()  # a wrong --target is said before the model loads
    empty_prompt_early([args.prompt], early)
    for text, what in ((args.target, "--target"), (args.vs, "--vs")):
        if early is not None and text is not None:
            one_token(text, what, early)
    loaded = load(args)
    target = one_token(args.target, tokenizer=loaded.tokenizer) if args.target is not None else None
    versus = one_token(args.vs, "--vs", loaded.tokenizer) if args.vs is not None else None
    context = loaded.config.context_length
    if args.step >= context:  # said before any token is generated
        raise ValueError(f"--step {args.step}: this model's context holds {context} tokens, "
                         f"the prompt's last one included; give --step 0..{context - 1}")
    ids = _prompt(args, loaded, args.step)
    if args.step:
        result = generate(loaded.model, ids, GenerationSettings(max_new_tokens=args.step,
                                                                stop_at_eot=False))
        ids = ids + list(result.new_ids)
        target = ids[-1] if target is None else target
        ids = ids[:-1]
    why = why_token(loaded.model, ids, len(ids) - 1, target, versus)
    for line in summary_lines(why, args.top):
        print(line)
    print()
    print("  ".join(COLUMNS))
    for row in why.layers:  # every value under its own header, as wide as it
        values = (str(row.block), *(f"{v:.3f}" for v in (
            row.residual_after_attention, row.residual_after_ff, row.attention_norm,
            row.ff_norm, row.attention_ratio, row.ff_ratio, row.entropy)),
            repr(row.lens_top), str(row.lens_top_id), f"{row.contribution:+.3f}")
        print("  ".join(v.rjust(len(c)) for v, c in zip(values, COLUMNS)))
    _write(args, lambda path: write_csv(list(why.layers), path), "save_why_figure", why)
    return 0


def heads(args: argparse.Namespace) -> int:
    for out in (args.csv, args.plot):
        if out:
            check_output(out)
    from ..core.attribution.head_roles import ROLES, head_roles, write_csv
    from ..core.gpt.nodes import head_label

    empty_prompt_early([args.prompt], spec_of(args).known_tokenizer())
    loaded = load(args)
    ids = _prompt(args, loaded)
    roles = head_roles(loaded.model, ids, induction=args.induction,
                       progress=lambda i, n: print(f"battery {i}/{n}", file=sys.stderr))
    cfg = loaded.config
    print(f"{len(ids)} prompt tokens; scores: the share of attention above an even spread")
    print(f"{'head':10s}" + "".join(f"{r:>16s}" for r in ROLES) + "  role")
    for layer in range(cfg.n_layers):
        for head in range(cfg.n_heads):
            values = "".join(f"{roles.scores[r][layer, head]:16.3f}" for r in ROLES)
            print(f"{head_label(layer, head):10s}{values}  {roles.role(layer, head) or '-'}")
    for role in ROLES if args.induction else ROLES[:-1]:
        layer, head, value = roles.best(role)
        print(f"strongest {role}: block {layer} head {head} ({value:.3f})")
    for note in roles.notes:
        print(note)
    _write(args, lambda path: write_csv(roles, path), "save_heads_figure", roles)
    return 0


def _write(args, table, figure: str, answer) -> None:
    """--csv with ``table(path)``, --plot with why_plots' ``figure``, each written whole
    or not at all."""
    if args.csv:
        with atomic_output(args.csv) as tmp:
            table(tmp)
        print(f"saved {shown(args.csv)}", file=sys.stderr)
    if args.plot:
        from ..ui.plots import why_plots
        with atomic_output(args.plot) as tmp:
            getattr(why_plots, figure)(str(tmp), answer)
        print(f"saved {shown(args.plot)}", file=sys.stderr)
