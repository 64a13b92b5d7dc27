"""The ``gpt-explorer`` command line.

``gpt-explorer`` with no command opens the desktop app; ``generate``, ``tokenize``,
``info`` and ``inspect`` work headless. Parses arguments and prints; the work is done
by explorer.core (and explorer.ui for the app).
"""

from __future__ import annotations

import argparse
import logging
import sys
from typing import Sequence

from . import __version__

DESCRIPTION = ("GPT Block Explorer: see inside a GPT-2 model. Without a command it opens "
               "the desktop app.")


def _add_model_args(p: argparse.ArgumentParser) -> None:
    src = p.add_mutually_exclusive_group()
    src.add_argument("--checkpoint", metavar="PATH",
                     help="a checkpoint file or Hugging Face folder, or hf:gpt2 for a model in "
                          "the local Hugging Face cache")
    src.add_argument("--preset", metavar="NAME",
                     help="a random (untrained) initialisation of a preset: gpt2-small, "
                          "gpt2-medium, gpt2-large, gpt2-xl, tiny")
    p.add_argument("--device", default="cpu", help="cpu, cuda, cuda:N, mps or auto (default cpu)")
    p.add_argument("--dtype", default="float32", help="float32 (default), bfloat16 or float16")
    p.add_argument("--seed", type=int, default=0, help="seed of a preset's random initialisation")


def _add_screenshot_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--screenshot", metavar="OUT.png",
                   help="render the window offscreen after running the prompt, save it, exit")
    p.add_argument("--prompt", default=None, help="the prompt for --screenshot")
    p.add_argument("--node", dest="screenshot_node", default=None, metavar="NAME",
                   help="the node selected in --screenshot, e.g. trf_blocks.0.ff.layers.1")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="gpt-explorer", description=DESCRIPTION)
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    parser.add_argument("--log-level", default="WARNING", choices=["DEBUG", "INFO", "WARNING", "ERROR"],
                        help="what to log to stderr (the log file always gets INFO and up)")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    gui = sub.add_parser("gui", help="open the desktop app (the default)")
    _add_model_args(gui)
    _add_screenshot_args(gui)
    # with no command, the app's options work as they are: gpt-explorer --preset tiny
    _add_model_args(parser)
    _add_screenshot_args(parser)

    g = sub.add_parser("generate", help="generate text token by token")
    g.add_argument("prompt", help="the prompt text")
    g.add_argument("--max-new-tokens", type=int, default=20)
    g.add_argument("--temperature", type=float, default=None,
                   help="sample with this temperature (default: greedy argmax)")
    g.add_argument("--top-k", type=int, default=None, help="sample from the k most likely")
    g.add_argument("--top-p", type=float, default=None, help="nucleus sampling threshold")
    g.add_argument("--sample-seed", type=int, default=123, help="seed for sampling")
    g.add_argument("--show-top", type=int, default=0, metavar="K",
                   help="after each token, print the K most likely candidates")
    g.add_argument("--no-stop", action="store_true", help="do not stop at <|endoftext|>")
    g.add_argument("--start-with-eot", action="store_true",
                   help="allow an empty prompt: start from <|endoftext|>")
    _add_model_args(g)

    t = sub.add_parser("tokenize", help="print GPT-2 token ids and pieces of a text")
    t.add_argument("text")

    i = sub.add_parser("info", help="config, parameter counts per component and memory")
    _add_model_args(i)

    n = sub.add_parser("inspect", help="statistics of every node for a prompt, in forward order")
    n.add_argument("prompt", nargs="+", help="the prompt; several prompts run as one batch "
                   "(padded on the right, padding left out of the statistics)")
    n.add_argument("--layer", type=int, default=None, help="only this block (0-based)")
    n.add_argument("--node", action="append", default=None, metavar="NAME",
                   help="a hook name or glob, e.g. 'trf_blocks.*.add2' (repeatable)")
    n.add_argument("--attention", action="store_true", help="include the attention patterns")
    n.add_argument("--save", metavar="OUT.npz",
                   help="also write the captured tensors, keyed by hook name")
    n.add_argument("--float16", action="store_true", help="save tensors as float16")
    _add_model_args(n)

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
    _add_model_args(c)

    t = sub.add_parser("train", help="train a small GPT on a text file, offline")
    t.add_argument("--text", metavar="FILE", help="UTF-8 text to train on (default: Edith "
                                                  "Wharton's 'The Verdict', in resources/)")
    t.add_argument("--preset", default="mini", help="model size: mini (default) or tiny, or a GPT-2 preset")
    budget = t.add_mutually_exclusive_group()
    budget.add_argument("--steps", type=int, default=None, help="optimizer steps (default 200)")
    budget.add_argument("--minutes", type=float, default=None, help="train for this long instead")
    t.add_argument("--out", metavar="DIR", default="runs/train", help="checkpoint folder (default runs/train)")
    t.add_argument("--resume", action="store_true", help="continue the run saved in --out")
    t.add_argument("--batch-size", type=int, default=None)
    t.add_argument("--lr", type=float, default=None, help="peak learning rate")
    t.add_argument("--eval-every", type=int, default=None)
    t.add_argument("--seed", type=int, default=None)
    t.add_argument("--plot", metavar="OUT.png", help="save the loss curve at the end")

    dl = sub.add_parser("download", help="download GPT-2 from the Hugging Face Hub into its "
                                         "cache (resumable); it becomes the default model")
    dl.add_argument("model", nargs="?", default="gpt2",
                    help="gpt2 (124M, the default), gpt2-medium, gpt2-large, gpt2-xl, or a "
                         "repository id such as openai-community/gpt2")
    dl.add_argument("--revision", default="main", help="branch, tag or commit (default main)")

    d = sub.add_parser("diff", help="compare two models node by node; find the first divergence")
    d.add_argument("prompt")
    d.add_argument("--a", default="default", metavar="SPEC",
                   help="model A: default, preset:NAME, hf:NAME or a checkpoint path")
    d.add_argument("--b", required=True, metavar="SPEC",
                   help="model B: as --a, or mutation:NAME (a change of A): "
                        "no-shortcut, post-ln, relu, ff-1024, unbiased-ln, eps, dropout-on")
    d.add_argument("--layer", type=int, default=0, help="block a mutation is made in (default 0)")
    d.add_argument("--tol", type=float, default=1e-4, help="largest |A-B| still called equal")
    d.add_argument("--device", default="cpu")
    return parser


def _load(args: argparse.Namespace):
    from .core.sources import open_model

    loaded = open_model(args.checkpoint, args.preset, device=args.device, dtype=args.dtype,
                        seed=args.seed)
    print(f"model: {loaded.label}", file=sys.stderr)
    for notice in loaded.notices:
        print(f"note: {notice}", file=sys.stderr)
    return loaded


def cmd_tokenize(args: argparse.Namespace) -> int:
    from .core.tokenizer import encode, token_piece

    ids = encode(args.text)
    print(f"{len(ids)} tokens")
    for pos, tid in enumerate(ids):
        print(f"{pos:5d} {tid:6d}  {token_piece(tid)!r}")
    return 0


def cmd_generate(args: argparse.Namespace) -> int:
    from .core.generation import GenerationSettings, generate_stream, prepare_prompt
    from .core.tokenizer import encode, token_piece

    sampling = args.temperature is not None or args.top_k is not None or args.top_p is not None
    settings = GenerationSettings(
        max_new_tokens=args.max_new_tokens, greedy=not sampling,
        temperature=1.0 if args.temperature is None else args.temperature,
        top_k=args.top_k, top_p=args.top_p, seed=args.sample_seed,
        stop_at_eot=not args.no_stop, show_top_k=max(1, args.show_top or 1))
    prompt_ids = encode(args.prompt)
    prepare_prompt(prompt_ids, 2**31, args.start_with_eot)  # reject an empty prompt early
    settings.validate(50257)  # the GPT-2 vocabulary; checked before the model loads
    loaded = _load(args)
    settings.validate(loaded.config.vocab_size)
    stream = generate_stream(loaded.model, prompt_ids, settings, args.start_with_eot)
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
    rate = (steps - 1) / decode if steps > 1 and decode > 0 else float("nan")
    print(f"{steps} tokens in {total:.2f} s ({rate:.1f} tok/s after the prompt pass); "
          f"stopped: {stream.stopped_by}", file=sys.stderr)
    if not loaded.trained:
        print("note: this model is UNTRAINED (random weights): the text above is noise",
              file=sys.stderr)
    return 0


def cmd_info(args: argparse.Namespace) -> int:
    import torch

    from .core.config import preset
    from .core.devices import resolve_device, resolve_dtype
    from .core.model import count_parameters

    if args.preset:  # a preset needs no weights: describe it without building it
        cfg = preset(args.preset)
        device, dtype = resolve_device(args.device), resolve_dtype(args.dtype)
        print(f"model: {args.preset} (random initialisation, seed {args.seed}) · UNTRAINED")
    else:
        loaded = _load(args)
        cfg, device, dtype = loaded.config, loaded.device, loaded.dtype
        print(f"model: {loaded.label}")
        actual = sum(p.numel() for p in loaded.model.parameters())
        assert actual == count_parameters(cfg).total, (actual, count_parameters(cfg).total)
    print(f"device: {device}   dtype: {str(dtype).replace('torch.', '')}")
    print("config:")
    for key, value in cfg.to_dict().items():
        print(f"  {key:15s} {value}")
    counts = count_parameters(cfg)
    print("parameters:")
    for name, n in counts.rows():
        print(f"  {name:45s} {n:>15,}")
    size = torch.tensor([], dtype=dtype).element_size()
    print(f"memory: weights {counts.total * size / 2**20:,.1f} MiB; "
          f"KV cache at full context {2 * cfg.n_layers * cfg.context_length * cfg.emb_dim * size / 2**20:,.1f} MiB")
    return 0


def cmd_inspect(args: argparse.Namespace) -> int:
    import numpy as np
    import torch

    from .core.batch import make_batch
    from .core.capture import Capture

    prompts = list(args.prompt)
    if len(prompts) == 1 and not prompts[0]:
        raise ValueError("the prompt is empty: type some text")
    make_batch(prompts, 2**31)  # an empty prompt fails before the model loads
    loaded = _load(args)
    batch = make_batch(prompts, loaded.config.context_length)
    for notice in batch.notices:
        print(f"note: {notice if batch.size > 1 else notice.split(': ', 1)[1]}", file=sys.stderr)
    try:
        cap = Capture(loaded.model, args.node, layer=args.layer, tensors=bool(args.save),
                      float16=args.float16, attention=args.attention, mask=batch.mask)
    except KeyError as exc:
        raise ValueError(exc.args[0]) from None
    with torch.inference_mode(), cap:
        loaded.model(torch.tensor(batch.ids, device=loaded.device))
    print(f"model: {loaded.label}")
    print(f"prompt: {batch.width} tokens" if batch.size == 1 else f"batch: {batch.describe()}")
    head = (f"{'node':34s} {'shape':>20s} {'mean':>9s} {'std':>9s} {'min':>9s} {'max':>9s} "
            f"{'rms':>9s} {'kurt':>8s} {'neg%':>6s} {'top dims':>16s}")
    print(head)
    print("-" * len(head))
    for rec in cap:
        st = rec.stats
        dims = ",".join(str(int(d)) for d in st.top_dims[:3])
        print(f"{rec.name:34s} {str(rec.shape):>20s} {st.mean:9.4f} {st.std:9.4f} {st.min:9.3f} "
              f"{st.max:9.3f} {st.rms:9.4f} {st.kurtosis:8.2f} {100 * st.frac_neg:6.1f} {dims:>16s}"
              + (f"  NaN={st.n_nan} Inf={st.n_inf}" if st.n_nan or st.n_inf else ""))
    if args.save:
        arrays = {name: t.numpy() for name, t in cap.tensors().items()}
        if batch.size > 1:
            arrays["batch_mask"] = batch.mask  # True at real tokens, False at padding
        np.savez(args.save, **arrays)
        print(f"saved {len(arrays)} tensors to {args.save}", file=sys.stderr)
        if cap.dropped:
            print(f"note: over the memory budget, not saved: {', '.join(cap.dropped)}",
                  file=sys.stderr)
    return 0


def cmd_compare_ln(args: argparse.Namespace) -> int:
    from .core.compare import (EXPERIMENT_CONFIG, FINAL_NORM_NOTE, compare_prompt,
                               gradient_experiment)
    from .core.generation import prepare_prompt
    from .core.resources import resource_path
    from .core.tokenizer import encode

    try:
        depths = sorted({int(d) for d in args.depths.split(",") if d.strip()} | {args.depth})
    except ValueError:
        raise ValueError("--depths takes whole numbers separated by commas, e.g. 6,12,24") from None
    if min(depths) < 1:
        raise ValueError("depths must be at least 1")
    prompt_ids = encode(args.prompt)
    prepare_prompt(prompt_ids, 2**31)
    loaded = _load(args)
    ids, notices = prepare_prompt(prompt_ids, loaded.config.context_length)
    for notice in notices:
        print(f"note: {notice}", file=sys.stderr)
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
        print(f"{'Pre-LN' if run.norm_position == 'pre' else 'Post-LN'} next tokens: {cands}")
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
    if args.plot:
        from .ui.ln_compare import save_figure
        save_figure(args.plot, {"pre": pre, "post": post}, result, args.depth)
        print(f"saved {args.plot}", file=sys.stderr)
    return 0


def cmd_train(args: argparse.Namespace) -> int:
    from pathlib import Path

    from .core.training import (CheckpointEvent, EvalEvent, StepEvent, Trainer, TrainSettings,
                                default_text)

    if args.text:
        try:
            text = Path(args.text).read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise ValueError(f"{args.text}: cannot read it as UTF-8 text ({exc})") from None
    else:
        text = default_text()
    changes = {k: v for k, v in {"max_steps": args.steps, "batch_size": args.batch_size, "lr": args.lr,
                                  "eval_every": args.eval_every, "seed": args.seed}.items() if v is not None}
    if args.minutes is not None:
        changes.update(max_minutes=args.minutes, max_steps=10**9)
    if args.resume:
        trainer = Trainer.resume(args.out, text, **changes)
        print(f"resuming {args.out} at step {trainer.state.step}", file=sys.stderr)
    else:
        trainer = Trainer(text, TrainSettings(preset=args.preset, **changes), args.out)
    s = trainer.settings
    print(f"training {s.preset} ({sum(p.numel() for p in trainer.model.parameters()):,} parameters) on "
          f"{len(trainer.train_ids):,} training and {len(trainer.val_ids):,} validation tokens; "
          f"checkpoints in {args.out}", file=sys.stderr)
    total = None if s.max_minutes else s.max_steps
    losses: list[tuple[int, float]] = []
    try:
        for event in trainer.run():
            if isinstance(event, StepEvent):
                losses.append((event.step, event.loss))
                done = f"{event.step}/{total}" if total else f"{event.step}"
                bar = ""
                if total:
                    filled = int(30 * event.step / total)
                    bar = "[" + "#" * filled + "." * (30 - filled) + "] "
                sys.stderr.write(f"\r{bar}step {done}  loss {event.loss:.3f}  lr {event.lr:.2e}  "
                                 f"{event.tokens_per_second:,.0f} tok/s  {event.elapsed:,.0f} s ")
                sys.stderr.flush()
            elif isinstance(event, EvalEvent):
                print(f"\nstep {event.step}: train loss {event.train_loss:.3f}, validation loss "
                      f"{event.val_loss:.3f}\n  sample: {event.sample!r}")
            elif isinstance(event, CheckpointEvent):
                print(f"  saved {event.path}", file=sys.stderr)
    except KeyboardInterrupt:
        path = trainer.save()
        print(f"\ninterrupted: saved step {trainer.state.step} to {path}; continue with --resume",
              file=sys.stderr)
        return 130
    print(f"done at step {trainer.state.step}; explore it with: gpt-explorer gui --checkpoint "
          f"{Path(args.out) / 'model.safetensors'}", file=sys.stderr)
    if args.plot:
        from .ui.train_panel import save_loss_figure
        save_loss_figure(args.plot, losses, trainer.state.history)
        print(f"saved {args.plot}", file=sys.stderr)
    return 0


def cmd_download(args: argparse.Namespace) -> int:
    from .core import hub

    repo_id, _ = hub.resolve(args.model)
    resumed = hub.partial_bytes(repo_id)
    print(f"{repo_id} from {hub.endpoint()} into {hub.cache_dir()}"
          + (f"; resuming after {resumed / 1e6:,.1f} MB" if resumed else ""), file=sys.stderr)
    tty = sys.stderr.isatty()
    last = {"share": -1, "width": 0}

    def show(p: "hub.DownloadProgress") -> None:
        if p.phase == "done":
            return
        text = p.line()
        if tty:
            pad = " " * max(0, last["width"] - len(text))
            sys.stderr.write("\r" + text + pad)
            last["width"] = len(text)
        else:  # a log file: a line per tenth, and each check
            share = int(10 * p.done_bytes / p.total_bytes) if p.total_bytes else 0
            if share == last["share"] and p.phase == "download":
                return
            last["share"] = share
            sys.stderr.write(text + "\n")
        sys.stderr.flush()

    try:
        result = hub.download(repo_id, progress=show, revision=args.revision)
    except KeyboardInterrupt:
        kept = hub.partial_bytes(repo_id)
        print(f"\ninterrupted: {kept / 1e6:,.1f} MB kept in the cache; run the same command "
              "again to resume", file=sys.stderr)
        return 130
    finally:
        if tty and last["width"]:
            sys.stderr.write("\n")
    for notice in result.notices:
        print(f"note: {notice}", file=sys.stderr)
    if result.already_complete:
        print(f"{repo_id} is already complete in the cache ({result.folder}); nothing to "
              "download", file=sys.stderr)
    else:
        print(f"downloaded {result.fetched_bytes / 1e6:,.1f} MB; every weights file matches "
              f"the Hub's sha256", file=sys.stderr)
    print(f"{repo_id} is now the default model: gpt-explorer (the app), gpt-explorer generate …",
          file=sys.stderr)
    print(result.folder)
    return 0


def _model_from_spec(spec: str, device: str):
    from .core.sources import open_model

    if spec == "default":
        return open_model(device=device)
    if spec.startswith("preset:"):
        return open_model(preset_name=spec[len("preset:"):], device=device)
    return open_model(spec, device=device)


def cmd_diff(args: argparse.Namespace) -> int:
    from .core.divergence import MUTATIONS, find_divergence, mutate
    from .core.generation import prepare_prompt
    from .core.tokenizer import encode

    ids = encode(args.prompt)
    prepare_prompt(ids, 2**31)
    a = _model_from_spec(args.a, args.device)
    if args.b.startswith("mutation:"):
        name = args.b[len("mutation:"):]
        b_model = mutate(a.model, name, layer=args.layer)
        b_label = f"A with {MUTATIONS[name]} (block {args.layer})"
    else:
        b = _model_from_spec(args.b, args.device)
        b_model, b_label = b.model, b.label
    ids, notices = prepare_prompt(ids, a.config.context_length)
    result = find_divergence(a.model, b_model, ids, args.tol)
    print(f"A: {a.label}\nB: {b_label}\nprompt: {len(ids)} tokens, tolerance {args.tol:g}\n")
    print(result.table())
    return 0


def cmd_gui(args: argparse.Namespace) -> int:
    from .ui import app
    from .ui.engine import ModelSpec

    explicit = any(getattr(args, k, None) for k in ("checkpoint", "preset"))
    spec = ModelSpec(checkpoint=args.checkpoint, preset=args.preset, device=args.device,
                     dtype=args.dtype, seed=args.seed) if explicit else None
    if args.screenshot:
        return app.screenshot(args.screenshot, spec, args.prompt, args.screenshot_node)
    return app.run(spec)


COMMANDS = {"generate": cmd_generate, "tokenize": cmd_tokenize, "info": cmd_info,
            "inspect": cmd_inspect, "compare-ln": cmd_compare_ln, "train": cmd_train, "diff": cmd_diff,
            "download": cmd_download, "gui": cmd_gui}


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    command = args.command or "gui"
    if args.command is None:  # no command: the app, with the options given to the program
        args.command = "gui"
    from .log import setup_logging

    setup_logging(args.log_level, to_file=command == "gui")
    logging.getLogger("explorer").info("gpt-explorer %s %s", __version__, command)
    from .core.hub import HubError

    try:
        return COMMANDS[command](args)
    except (ValueError, MemoryError, FileNotFoundError, HubError) as exc:
        logging.getLogger("explorer").info("%s failed: %s", command, exc)
        print(f"gpt-explorer {command}: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("\ninterrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
