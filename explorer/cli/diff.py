"""``diff``: two models on one prompt, node by node, to the first divergence."""

from __future__ import annotations

import argparse

from ..core.gpt.mutations import MUTATIONS


def register(sub) -> None:
    d = sub.add_parser("diff", help="compare two models node by node; find the first divergence")
    d.add_argument("prompt", nargs="+", help="one prompt, or several: a batch (the seeds' "
                                             "exercise: \"Every effort moves\" \"Every day holds\")")
    d.add_argument("--a", default="default", metavar="SOURCE",
                   help="model A: default, preset:NAME, hf:NAME or a checkpoint path")
    d.add_argument("--b", required=True, metavar="SOURCE",
                   help="model B: as --a, or mutation:NAME (a change of A): "
                        f"{', '.join(MUTATIONS)} (ff-N: any width N)")
    d.add_argument("--layer", type=int, default=0, help="block a mutation is made in (default 0)")
    d.add_argument("--tol", type=float, default=1e-4, help="largest |A-B| still called equal")
    d.add_argument("--device", default="cpu")
    d.set_defaults(func=diff)


def diff(args: argparse.Namespace) -> int:
    from ..core.run.batch import check_prompts, make_batch
    from ..core.experiments.divergence import describe, find_divergence, lesson
    from ..core.run.generation import prepare_prompt
    from ..core.sources import ModelSpec, Mutation, model_for, open_model, parse_source
    from .common import empty_prompt_early

    from ..core.base.validate import real

    real(args.tol, "--tol", 0.0)
    texts = args.prompt
    check_prompts(texts)  # too many prompts, or an empty one: one clear line, first
    a_source = ModelSpec.parse(args.a, device=args.device)
    empty_prompt_early(texts, a_source.known_tokenizer())
    b_source = parse_source(args.b, layer=args.layer, device=args.device)  # both checked first
    a = open_model(a_source)
    ids = a.tokenizer.encode(texts[0])  # A's own tokenizer (B reads the same ids)
    b_model = model_for(b_source, a)
    b_label = (f"A with {describe(b_source.name, a.config)} (block {b_source.layer})"
               if isinstance(b_source, Mutation) else b_source.describe())
    if len(texts) > 1:
        prompt = make_batch(texts, a.config.context_length, tokenizer=a.tokenizer)
        what = f"a batch of {prompt.describe()}"
    else:
        prompt, _ = prepare_prompt(ids, a.config.context_length)
        what = f"{len(prompt)} tokens"
    result = find_divergence(a.model, b_model, prompt, args.tol)
    if isinstance(b_source, Mutation):
        result.notes += lesson(b_source.name, b_model, b_source.layer, prompt)
    print(f"A: {a.label}\nB: {b_label}\nprompt: {what}, tolerance {args.tol:g}\n")
    print(result.table())
    return 0
