"""What the commands share: the model options, loading a model with its notices, and
the screenshot options of the app."""

from __future__ import annotations

import argparse
import sys

MODEL_HELP = ("a checkpoint file or folder (the book's gpt2/124M, a Hugging Face folder, a "
              ".pth), or hf:gpt2 for a model in the local Hugging Face cache")


SEED_LIMIT = 2 ** 63  # torch's seeds are signed 64-bit


def seed_number(text: str) -> int:
    """A seed for --seed: a whole number 0 ≤ seed < 2**63 (one line otherwise)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"a seed is a whole number, got {text!r}") from None
    if not 0 <= value < SEED_LIMIT:
        raise argparse.ArgumentTypeError(f"a seed is between 0 and 2**63 − 1, got {text[:30]}")
    return value


def source_path(text: str) -> str:
    """--checkpoint: an empty one would silently mean the default model."""
    if not text.strip():
        raise argparse.ArgumentTypeError("--checkpoint needs a path, hf:NAME or a folder; it is empty")
    return text


MODEL_OPTIONS = ("checkpoint", "preset", "device", "dtype", "seed")


def norm_help() -> str:
    """Each norm position in one line's worth: its word and its formula."""
    from ..core.gpt.norm_position import NormPosition
    return ("where a preset's norms sit: " + "; ".join(f"{p} ({p.formula})" for p in NormPosition)
            + " (default: the preset's own, pre for GPT-2 and Llama / Qwen)")


def add_model_args(p: argparse.ArgumentParser, top: bool = False) -> None:
    """The model options. ``top``: the ones written before a command, kept apart
    (``given_<name>``, absent unless given) so that main() can hand them to the command."""
    from ..core.base.dtypes import DTYPE_NAMES
    from ..core.gpt.config import NORM_POSITIONS, PRESETS

    def name(key: str, default):
        return {"dest": f"given_{key}", "default": argparse.SUPPRESS} if top else {"default": default}

    src = p.add_mutually_exclusive_group()
    src.add_argument("--checkpoint", metavar="PATH", type=source_path, help=MODEL_HELP,
                     **name("checkpoint", None))
    src.add_argument("--preset", metavar="NAME", choices=list(PRESETS),
                     help="a random (untrained) initialisation of a preset: " + ", ".join(PRESETS),
                     **name("preset", None))
    p.add_argument("--device", help="cpu, cuda, cuda:N, mps or auto (default cpu)", **name("device", "cpu"))
    p.add_argument("--dtype", choices=list(DTYPE_NAMES), type=str.lower,
                   help="what the model runs in: " + ", ".join(DTYPE_NAMES) + " (default float32)",
                   **name("dtype", "float32"))
    p.add_argument("--seed", type=seed_number, help="seed of a preset's random initialisation",
                   **name("seed", 0))
    p.add_argument("--norm", choices=list(NORM_POSITIONS), type=str.lower, metavar="WHERE",
                   help=norm_help(), **name("norm", None))
    p.add_argument("--own-tokenizer", action="store_true",
                   help="refuse a model whose vocabulary is not GPT-2's when no tokenizer of "
                        "its own (tokenizer.json, tokenizer.model) is beside it, rather than "
                        "read it with GPT-2's (said in its title)", **name("own_tokenizer", False))


def spec_of(args: argparse.Namespace):
    """The ModelSpec the model options name."""
    from ..core.sources import ModelSpec

    norm = getattr(args, "norm", None)
    if norm is not None and not args.preset:
        raise ValueError(f"--norm {norm} places a preset's norms: give it with --preset (a "
                         "checkpoint's norms sit where it was trained with them)")
    return ModelSpec(checkpoint=args.checkpoint, preset=args.preset, device=args.device,
                     dtype=args.dtype, seed=args.seed, norm_position=norm,
                     own_tokenizer=getattr(args, "own_tokenizer", False))


def load(args: argparse.Namespace, said: bool = True):
    """Load the model the options name; say what it is on stderr (``said``: a command
    that prints it itself, as ``info``, says only the notices)."""
    from ..core.sources import open_model

    loaded = open_model(spec_of(args))
    if said:
        print(f"model: {loaded.label} ({loaded.size})", file=sys.stderr)
    for notice in loaded.notices:
        print(f"note: {notice}", file=sys.stderr)
    return loaded


def empty_prompt_early(texts: list[str], tokenizer=None, start_with_eot: bool = False) -> None:
    """An empty prompt said before any model loads, in the words the model's own
    tokenizer would give (``tokenizer``: the one the model will read with, when it is
    known; any non-empty text is then tokenized once, by the model's own)."""
    from ..core.run.generation import prepare_prompt

    for text in texts:
        if not text:
            prepare_prompt([], 2**31, start_with_eot, tokenizer=tokenizer)
