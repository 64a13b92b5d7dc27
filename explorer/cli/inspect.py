"""``info`` and ``inspect``: what a model is, and every node's statistics for a prompt."""

from __future__ import annotations

import argparse
import sys

from ..core.base.outputs import atomic_output, check_output, shown
from ..core.run.groups import Group
from .common import add_model_args, load


def register(sub) -> None:
    i = sub.add_parser("info", help="config, parameter counts per component and memory")
    i.add_argument("run", nargs="?", metavar="RUN_FOLDER",
                   help="a training run's folder (train --out): its model, and the snapshots "
                        "it kept, each with the --checkpoint that opens it")
    add_model_args(i)
    i.set_defaults(func=info)

    n = sub.add_parser("inspect", help="statistics of every node for a prompt, in forward order")
    n.add_argument("prompt", nargs="+", help="the prompt; several prompts run as one batch "
                   "(padded on the right, padding left out of the statistics)")
    n.add_argument("--layer", type=int, default=None, help="only this block (0-based)")
    n.add_argument("--node", action="append", default=None, metavar="NAME",
                   help="a hook name or glob, e.g. 'trf_blocks.*.add2' (repeatable)")
    n.add_argument("--attention", action="store_true",
                   help="include attention's steps: queries, keys, values, scores, masked "
                        "scores and the pattern of every block (a step named with --node is "
                        "included without it)")
    n.add_argument("--experts", action="store_true",
                   help="a mixture of experts: include each expert's steps (ff.fc1.E … "
                        "ff.fc3.E of expert E, for the tokens routed to it; an expert no token "
                        "chose did not run and has none)")
    n.add_argument("--save", metavar="OUT.npz",
                   help="also write the captured tensors, keyed by hook name")
    n.add_argument("--float16", action="store_true", help="save tensors as float16")
    add_model_args(n)
    n.set_defaults(func=inspect)


def _run_folder(args: argparse.Namespace) -> int:
    """A training run's folder: the steps it reached, each evaluation's losses, and every
    snapshot with the source that opens it."""
    from pathlib import Path

    from ..core.experiments.snapshots import list_snapshots
    from ..core.experiments.train_files import MODEL_FILE, STATE_FILE, read_state

    folder = Path(args.run)
    if args.checkpoint or args.preset:
        raise ValueError("give a run folder or --checkpoint / --preset, not both")
    if not folder.is_dir() or not (folder / MODEL_FILE).is_file():
        raise ValueError(f"{shown(folder)} is not a training run's folder (no {MODEL_FILE} in it)")
    step, history, settings, problem = "?", [], {}, ""
    if (folder / STATE_FILE).is_file():
        try:
            step, history, settings = read_state(folder / STATE_FILE)
        except ValueError as exc:  # said, and the model and snapshots listed all the same
            problem = f" ({shown(str(exc))})"
    history = {h["step"]: h for h in history}
    print(f"run: {shown(folder)} · {shown(str(settings.get('preset', '?')))} · step {step} "
          f"of {settings.get('max_steps', '?')}{problem}")
    print(f"model: {shown(folder / MODEL_FILE)}")
    snapshots = list_snapshots(folder)
    print(f"snapshots: {len(snapshots)}" + ("" if snapshots else " (train with --snapshots N)"))
    for snap in snapshots:
        seen = history.get(snap.step, {})
        loss = seen.get("val_loss")
        said = f"  validation loss {loss:.3f}" if isinstance(loss, (int, float)) else ""
        print(f"  step {snap.step:>6}  --checkpoint {shown(folder)}@step{snap.step}{said}")
    return 0


def info(args: argparse.Namespace) -> int:
    import torch

    from ..core.gpt.config import preset
    from ..core.base.devices import resolve_device, resolve_dtype
    from ..core.gpt.sizes import count_parameters, describe_size

    if args.run:
        return _run_folder(args)
    if args.preset:  # a preset needs no weights: describe it without building it
        cfg = preset(args.preset)
        device, dtype = resolve_device(args.device), resolve_dtype(args.dtype)
        print(f"model: {args.preset} (random initialisation, seed {args.seed}) · UNTRAINED")
    else:
        loaded = load(args, said=False)  # the model line is this command's own, once
        cfg, device, dtype = loaded.config, loaded.device, loaded.dtype
        print(f"model: {loaded.label}")
        actual = sum(p.numel() for p in loaded.model.parameters())
        assert actual == count_parameters(cfg).total, (actual, count_parameters(cfg).total)
    print(f"shape: {describe_size(cfg)}")
    print(f"device: {device}   dtype: {str(dtype).replace('torch.', '')}")
    print("config:")
    fields = cfg.to_dict()
    width = max(15, *map(len, fields))  # "experts_per_token" keeps its column
    for key, value in fields.items():
        print(f"  {key:{width}s} {value}")
    counts = count_parameters(cfg)
    print("parameters:")
    for name, n in counts.rows():
        print(f"  {name:45s} {n:>15,}")
    from ..core.gpt.sizes import kv_cache_bytes, sizes
    for line in sizes(cfg).notes():  # what the figures in the literature count
        print(f"  {line}")
    from ..core.gpt.nodes import block_nodes, expert_step_keys, order_of
    print("nodes of each block (trf_blocks.N.…, for --node and --save): "
          + ", ".join(n.key for n in block_nodes(order_of(cfg))))
    if cfg.n_experts:  # each expert's steps: their names, and how inspect keeps them
        print(f"each expert's steps (E = 0…{cfg.n_experts - 1}, with inspect --experts): "
              + ", ".join(f"{key}.E" for key in expert_step_keys(cfg)))
    size = torch.tensor([], dtype=dtype).element_size()
    print(f"memory: weights {counts.total * size / 2**20:,.1f} MiB; "
          f"KV cache at full context {kv_cache_bytes(cfg, cfg.context_length, size) / 2**20:,.1f} MiB")
    return 0


def inspect(args: argparse.Namespace) -> int:
    if args.save:
        check_output(args.save, ".npz")  # before the pass: a folder or a FIFO is refused
    import numpy as np

    from ..core.run.batch import make_batch
    from ..core.run.passes import Keep, run_prompt

    prompts = list(args.prompt)
    if len(prompts) == 1 and not prompts[0]:
        raise ValueError("the prompt is empty: type some text")
    make_batch(prompts, 2**31)  # an empty prompt fails before the model loads
    loaded = load(args)
    batch = make_batch(prompts, loaded.config.context_length, tokenizer=loaded.tokenizer)
    for notice in batch.notices:
        print(f"note: {notice if batch.size > 1 else notice.split(': ', 1)[1]}", file=sys.stderr)
    opened = args.attention or _names_a_step(args.node or [])  # the graph's every node
    keep = Keep(nodes=tuple(args.node) if args.node else None, layer=args.layer,
                tensors=bool(args.save), float16=args.float16, attention=opened, inside=opened,
                on_read=True, groups=PRINTED,
                experts=args.experts or _names_a_step(args.node or [], experts=True, cfg=loaded.config))
    try:
        run = run_prompt(loaded.model, batch, keep)
    except KeyError as exc:
        raise ValueError(exc.args[0]) from None
    print(f"model: {loaded.label}")
    print(f"prompt: {batch.width} tokens" if batch.size == 1 else f"batch: {batch.describe()}")
    print(HEAD)
    print("-" * len(HEAD))
    for view in run.views.values():
        print(line(view))
    if args.save:
        dtype = np.float16 if args.float16 else np.float32  # float16 -> float32 -> float16 is exact
        arrays = {n: v.array.astype(dtype, copy=False) for n, v in run.views.items()
                  if v.array is not None}
        if batch.size > 1:
            arrays["batch_mask"] = batch.mask  # True at real tokens, False at padding
        with atomic_output(args.save, ".npz") as tmp:  # .npz added as numpy would
            np.savez(tmp, **arrays)
        target = check_output(args.save, ".npz")
        print(f"saved {len(arrays)} tensors to {shown(target)}", file=sys.stderr)
        if run.dropped:
            print(f"note: over the memory budget, not saved: {', '.join(run.dropped)}",
                  file=sys.stderr)
    return 0


# What a line says of a node: the moments, the share of negatives, the top dimensions.
# Nothing else is computed (the histogram and the vectors' norms are not printed).
PRINTED = (Group.MOMENTS, Group.SIGNS, Group.TOP)
HEAD = (f"{'node':34s} {'shape':>20s} {'mean':>9s} {'std':>9s} {'min':>9s} {'max':>9s} "
        f"{'rms':>9s} {'kurt':>8s} {'neg%':>6s} {'top dims':>16s}")


def line(view) -> str:
    """A node's line of ``inspect``: only the groups in PRINTED are read."""
    st = view.stats
    dims = ",".join(str(int(d)) for d in st.top_dims[:3])
    return (f"{view.name:34s} {str(view.shape):>20s} {st.mean:9.4f} {st.std:9.4f} {st.min:9.3f} "
            f"{st.max:9.3f} {st.rms:9.4f} {st.kurtosis:8.2f} {100 * st.frac_neg:6.1f} {dims:>16s}"
            + (f"  NaN={st.n_nan} Inf={st.n_inf}" if st.n_nan or st.n_inf else ""))


def _names_a_step(names: list[str], experts: bool = False, cfg=None) -> bool:
    """Whether a name given with --node (not a glob) is one of attention's steps (with
    ``experts``: one of an expert's steps in ``cfg``'s mixture)."""
    from ..core.gpt.nodes import expert_step, inside_attention, is_pattern
    for name in names:
        if any(c in name for c in "*?["):
            continue
        try:
            if experts and expert_step(name, cfg) is not None:
                return True
            if not experts and (inside_attention(name) or is_pattern(name)):
                return True
        except KeyError:  # not a node: the capture names it
            continue
    return False
