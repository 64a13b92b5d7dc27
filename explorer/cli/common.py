"""What the commands share: the model options, loading a model with its notices, and
the screenshot options of the app."""

from __future__ import annotations

import argparse
import sys

MODEL_HELP = ("a checkpoint file or folder (the book's gpt2/124M, a Hugging Face folder, a "
              ".pth), or hf:gpt2 for a model in the local Hugging Face cache")


def add_model_args(p: argparse.ArgumentParser) -> None:
    src = p.add_mutually_exclusive_group()
    src.add_argument("--checkpoint", metavar="PATH", help=MODEL_HELP)
    src.add_argument("--preset", metavar="NAME",
                     help="a random (untrained) initialisation of a preset: gpt2-small, "
                          "gpt2-medium, gpt2-large, gpt2-xl, tiny")
    p.add_argument("--device", default="cpu", help="cpu, cuda, cuda:N, mps or auto (default cpu)")
    p.add_argument("--dtype", default="float32", help="float32 (default), bfloat16 or float16")
    p.add_argument("--seed", type=int, default=0, help="seed of a preset's random initialisation")


def spec_of(args: argparse.Namespace):
    """The ModelSpec the model options name."""
    from ..core.sources import ModelSpec

    return ModelSpec(checkpoint=args.checkpoint, preset=args.preset, device=args.device,
                     dtype=args.dtype, seed=args.seed)


def load(args: argparse.Namespace):
    """Load the model the options name; say what it is on stderr."""
    from ..core.sources import open_model

    loaded = open_model(spec_of(args))
    print(f"model: {loaded.label} ({loaded.size})", file=sys.stderr)
    for notice in loaded.notices:
        print(f"note: {notice}", file=sys.stderr)
    return loaded
