"""``diff``: two models on one prompt, node by node, to the first divergence."""

from __future__ import annotations

import argparse


def register(sub) -> None:
    d = sub.add_parser("diff", help="compare two models node by node; find the first divergence")
    d.add_argument("prompt")
    d.add_argument("--a", default="default", metavar="SOURCE",
                   help="model A: default, preset:NAME, hf:NAME or a checkpoint path")
    d.add_argument("--b", required=True, metavar="SOURCE",
                   help="model B: as --a, or mutation:NAME (a change of A): "
                        "no-shortcut, post-ln, relu, ff-1024, unbiased-ln, eps, dropout-on")
    d.add_argument("--layer", type=int, default=0, help="block a mutation is made in (default 0)")
    d.add_argument("--tol", type=float, default=1e-4, help="largest |A-B| still called equal")
    d.add_argument("--device", default="cpu")
    d.set_defaults(func=diff)


def diff(args: argparse.Namespace) -> int:
    from ..core.divergence import MUTATIONS, find_divergence
    from ..core.generation import prepare_prompt
    from ..core.sources import ModelSpec, Mutation, model_for, open_model, parse_source
    from ..core.tokenizer import encode

    from ..core.validate import real

    real(args.tol, "--tol", 0.0)
    ids = encode(args.prompt)
    prepare_prompt(ids, 2**31)
    a_source = ModelSpec.parse(args.a, device=args.device)
    b_source = parse_source(args.b, layer=args.layer, device=args.device)  # both checked first
    a = open_model(a_source)
    b_model = model_for(b_source, a)
    b_label = (f"A with {MUTATIONS[b_source.name]} (block {b_source.layer})"
               if isinstance(b_source, Mutation) else b_source.describe())
    ids, notices = prepare_prompt(ids, a.config.context_length)
    result = find_divergence(a.model, b_model, ids, args.tol)
    print(f"A: {a.label}\nB: {b_label}\nprompt: {len(ids)} tokens, tolerance {args.tol:g}\n")
    print(result.table())
    return 0
