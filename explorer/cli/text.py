"""``tokenize`` and ``generate``: text in, tokens out."""

from __future__ import annotations

import argparse
import contextlib
import sys

from ..core.base.outputs import shown
from .common import add_model_args, load, source_path


def register(sub) -> None:
    t = sub.add_parser("tokenize", help="print the token ids and pieces of a text (GPT-2's, "
                                        "or a checkpoint's own tokenizer)")
    t.add_argument("text")
    t.add_argument("--checkpoint", metavar="PATH", type=source_path,
                   help="read the text with this checkpoint's tokenizer (the tokenizer.json in "
                        "its folder; GPT-2's without one); its weights are not loaded")
    t.set_defaults(func=tokenize)

    g = sub.add_parser("generate", help="generate text token by token",
                       description="Generate text token by token. Sampling applies the "
                       "temperature, then top-k, then top-p (top-p keeps the most likely tokens "
                       "up to p of the probability after the temperature: at T 2 many more than "
                       "at T 1). The book's generate applies top-k, then the temperature, with "
                       "temperature 0 meaning greedy; with top-k alone the two orders draw from "
                       "the same tokens.")
    g.add_argument("prompt", help="the prompt text")
    g.add_argument("--max-new-tokens", type=int, default=20)
    g.add_argument("--temperature", type=float, default=None,
                   help="sample with this temperature (default: greedy argmax)")
    g.add_argument("--top-k", type=int, default=None, help="sample from the k most likely")
    g.add_argument("--top-p", type=float, default=None,
                   help="nucleus sampling threshold, applied after the temperature and top-k")
    g.add_argument("--sample-seed", type=int, default=123,
                   help="seed for sampling (0 to 2,147,483,647, as the window's box)")
    g.add_argument("--show-top", type=int, default=0, metavar="K",
                   help="after each token, print the K most likely candidates")
    g.add_argument("--no-stop", action="store_true", help="do not stop at <|endoftext|>")
    g.add_argument("--leave-room", action="store_true",
                   help="crop a long prompt so the new tokens fit in the context (keeps the "
                        "KV cache working: no slow full recompute once the context is full)")
    g.add_argument("--recompute", action="store_true",
                   help="run the whole context again for every token, as the book's "
                        "generate_text_simple (no KV cache; same tokens, slower)")
    g.add_argument("--intervene", metavar="FILE.json",
                   help="apply the interventions in this file (saved from the app's What if "
                        "tab) in the prompt pass and at every step")
    g.add_argument("--start-with-eot", action="store_true",
                   help="allow an empty prompt: start from <|endoftext|>")
    g.add_argument("--save-run", metavar="FILE",
                   help="also save the run (prompt, model identity, settings, tokens with their "
                        "candidates, every node's statistics) for Open run… / --open-run")
    g.add_argument("--save-tensors", type=int, default=0, metavar="MB",
                   help="with --save-run: keep the node tensors too, in float16, up to this "
                        "many MB (default 0: statistics only)")
    add_model_args(g)
    g.set_defaults(func=generate)


def tokenize(args: argparse.Namespace) -> int:
    if args.checkpoint is None:
        from ..core.gpt.tokenizer import gpt2_tokenizer
        tokenizer = gpt2_tokenizer()
    elif not args.checkpoint.startswith("hf:"):  # a path: torch never imported
        from ..core.weights.tokenizers_files import tokenizer_for
        tokenizer = tokenizer_for(args.checkpoint)
    else:  # a Hub name: its cached folder's
        from ..core.sources import ModelSpec, open_model
        tokenizer = open_model(ModelSpec(checkpoint=args.checkpoint)).tokenizer
    ids = tokenizer.encode(args.text)
    print(f"{len(ids)} tokens ({tokenizer.name})")
    for pos, tid in enumerate(ids):
        print(f"{pos:5d} {tid:6d}  {tokenizer.token_piece(tid)!r}")
    return 0


def generate(args: argparse.Namespace) -> int:
    from ..core.run.generation import GenerationSettings, generate_stream
    from ..core.gpt.config import LIMITS
    from .common import empty_prompt_early, spec_of

    from ..core.base.validate import whole

    whole(args.show_top, "--show-top", 0, LIMITS["vocab_size"])  # the model's: once loaded
    if args.save_run:
        from ..core.base.outputs import check_output
        from ..core.run.generation import RUN_STEPS
        check_output(args.save_run)  # before any work: a FIFO or a folder is refused now
        whole(args.max_new_tokens, "--max-new-tokens with --save-run (a saved run's tokens)",
              1, RUN_STEPS)
    sampling = args.temperature is not None or args.top_k is not None or args.top_p is not None
    settings = GenerationSettings(
        max_new_tokens=args.max_new_tokens, greedy=not sampling,
        temperature=1.0 if args.temperature is None else args.temperature,
        top_k=args.top_k, top_p=args.top_p, seed=args.sample_seed,
        stop_at_eot=not args.no_stop, show_top_k=max(1, args.show_top or 1),
        leave_room=args.leave_room, recompute=args.recompute)
    empty_prompt_early([args.prompt], spec_of(args).known_tokenizer(), args.start_with_eot)
    settings.validate(LIMITS["vocab_size"])  # what any model allows, before one loads
    loaded = load(args)
    settings.validate(loaded.config.vocab_size)  # and the model's own vocabulary
    whole(args.show_top, "--show-top", 0, loaded.config.vocab_size)
    prompt_ids = loaded.tokenizer.encode(args.prompt)  # the model's own tokenizer
    stream = generate_stream(loaded.model, prompt_ids, settings, args.start_with_eot)
    specs, enabled = [], True
    with contextlib.ExitStack() as stack:
        if args.intervene:
            from ..core.experiments.interventions import applied, load_file, resolve

            specs, enabled = load_file(args.intervene, loaded.config)  # all checked, or none
            if not enabled:  # the app saves its switch: a file saved switched off changes nothing
                print(f"interventions in {args.intervene} are switched off (\"enabled\": false): "
                      f"none of its {len(specs)} applied", file=sys.stderr)
                specs = []
            stack.enter_context(applied(loaded.model, resolve(loaded.model, specs, stream.prompt_ids)))
            for spec in specs:
                print(f"intervention: {spec.describe()}", file=sys.stderr)
        if args.save_run:
            return _save_run(args, loaded, stream.prompt_ids, settings, specs, enabled)
        return _write(args, stream, loaded)


def _save_run(args, loaded, prompt_ids, settings, specs, enabled) -> int:
    """Generate with every node's statistics captured, print the text, save the run."""
    import dataclasses

    from ..core.playground.run_file import SavedRun, save_run, weights_sha256
    from ..core.base.validate import whole
    from ..core.run.passes import EVERYTHING, STATISTICS, Pass, prompt_then_generate
    from .common import spec_of

    mb = whole(args.save_tensors, "--save-tensors", 0, 10**6)
    passes: list = []
    prompt_then_generate(loaded.model, prompt_ids, settings,
                         lambda p: isinstance(p, Pass) and passes.append(p),
                         keep=dataclasses.replace(EVERYTHING, inside=True) if mb else STATISTICS)
    print(args.prompt + loaded.tokenizer.decode([p.token_id for p in passes[1:]]))
    model = {"label": loaded.label, "source": spec_of(args).to_dict(),
             "sha256": weights_sha256(loaded.model), "config": loaded.config.to_dict()}
    run = SavedRun(args.prompt, list(prompt_ids), model, settings, passes,
                   [s.to_dict() for s in specs], enabled, tokenizer=loaded.tokenizer)
    print(f"saved {shown(save_run(args.save_run, run, mb * 2**20))}: {len(passes) - 1} tokens",
          file=sys.stderr)
    return 0


def _write(args, stream, loaded) -> int:
    token_piece = loaded.tokenizer.token_piece
    for notice in stream.notices:
        print(f"note: {notice}", file=sys.stderr)
    sys.stdout.write(args.prompt)
    sys.stdout.flush()
    steps = 0
    for step in stream:
        steps += 1
        sys.stdout.write(step.text)
        if args.show_top:
            cands = ", ".join(f"{token_piece(i)!r} {p:.3f}" for i, p in zip(step.top_ids, step.top_probs))
            sys.stdout.write(f"    [{cands}]\n")
        sys.stdout.flush()
    sys.stdout.write("\n")
    total = (step.elapsed if steps else 0.0)
    decode = total - (stream.prompt_seconds or 0.0)
    rate = (f"{(steps - 1) / decode:.1f} tok/s after the prompt pass" if steps > 1 and decode > 0
            else "the prompt pass made it" if steps == 1 else "none generated")
    print(f"{steps} token{'s' if steps != 1 else ''} in {total:.2f} s ({rate}); "
          f"stopped: {stream.stopped_by}", file=sys.stderr)
    if not loaded.trained:
        print("note: this model is UNTRAINED (random weights): the text above is noise",
              file=sys.stderr)
    return 0
