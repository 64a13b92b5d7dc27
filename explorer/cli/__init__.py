"""The ``gpt-explorer`` command line: one module per group of commands, each a thin
layer over core functions (the app's: over explorer.ui.window.app). Without a command it opens
the desktop app. Errors a user can act on are one line and exit status 2."""

from __future__ import annotations

import argparse
import logging
import os
import sys
from typing import Sequence

from .. import __version__
from ..core.base.heap import reuse_freed_memory
from . import app, compare, diff, download, gradients, inspect, patch, text, train, why

DESCRIPTION = ("GPT Block Explorer: see inside a GPT-2 or Llama / Qwen model. Without a "
               "command it opens the desktop app.")
GROUPS = (app, text, inspect, compare, gradients, why, patch, train, diff, download)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="gpt-explorer", description=DESCRIPTION)
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    parser.add_argument("--log-level", default="WARNING", choices=["DEBUG", "INFO", "WARNING", "ERROR"],
                        help="what to log to stderr (the log file always gets INFO and up)")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for group in GROUPS:
        group.register(sub)
    # before a command, the model options go to it; with none, to the app (gpt-explorer
    # --preset tiny): kept apart here (given_*), handed over in main()
    app.add_app_args(parser, top=True)
    return parser


def handed_over(parser: argparse.ArgumentParser, argv: list[str]) -> argparse.Namespace:
    """The arguments, the model options written before the command handed to it: the
    app's when there is no command; a command that has no such option, or the same
    option given twice with two values, is refused in one line (ValueError)."""
    args = parser.parse_args(argv)
    top = {k[6:]: v for k, v in vars(args).items() if k.startswith("given_")}
    sub = next(a for a in parser._subparsers._group_actions if a.dest == "command")
    if args.command is None:  # the app: its own options' defaults, then what was given
        args = argparse.Namespace(**{**vars(parser.parse_args(["gui"])), "command": None,
                                     "log_level": args.log_level})
    own = sub.choices[args.command or "gui"]
    for name, value in top.items():
        flag = "--" + ("node" if name == "screenshot_node" else name).replace("_", "-")
        if not hasattr(args, name):
            raise ValueError(f"{flag} does not apply to {args.command}: it goes before no "
                             "command or after one that takes it")
        mine = getattr(args, name)
        if mine != own.get_default(name) and mine != value:
            raise ValueError(f"{flag} is given twice, before and after {args.command}, with two values")
        setattr(args, name, value)
    if getattr(args, "checkpoint", None) and getattr(args, "preset", None):
        raise ValueError("--checkpoint and --preset together: choose one model")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    _streams_that_exist()
    reuse_freed_memory()  # before any tensor: a long prompt's temporaries reused, not re-faulted
    parser = build_parser()
    argv = list(sys.argv[1:] if argv is None else argv)
    try:
        args = handed_over(parser, argv)
    except ValueError as exc:
        from ..core.base.outputs import shown
        print(f"gpt-explorer: error: {shown(str(exc))}", file=sys.stderr)
        return 2
    command = args.command or "gui"
    from ..core.weights.hub import HubError
    from ..log import setup_logging

    setup_logging(args.log_level, to_file=command == "gui")
    logging.getLogger("explorer").info("gpt-explorer %s %s", __version__, command)
    try:
        return args.func(args)
    except BrokenPipeError:  # the reader went away (| head): stop quietly, as cat does
        _silence(sys.stdout)
        return 0
    except (ValueError, MemoryError, OSError, HubError) as exc:  # what a user can act on
        logging.getLogger("explorer").info("%s failed: %s", command, exc)
        from ..core.base.outputs import shown
        first = str(exc).strip().split("\n")[0]  # a carriage return in a name: shown as \r
        print(f"gpt-explorer {command}: error: {shown(first) if first else type(exc).__name__}",
              file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("\ninterrupted", file=sys.stderr)
        return 130
    except Exception as exc:  # the last resort: a bug, never the way a bad input ends
        return last_resort(command, exc)


def _streams_that_exist() -> None:
    """A standard stream the shell closed (``>&-``) is None in Python: writes to it go
    nowhere instead of ending in AttributeError."""
    for name in ("stdout", "stderr"):
        if getattr(sys, name) is None:
            setattr(sys, name, open(os.devnull, "w", encoding="utf-8"))


def _silence(stream) -> None:
    """Point a broken stream at /dev/null, so flushing it at exit says nothing more."""
    try:
        os.dup2(os.open(os.devnull, os.O_WRONLY), stream.fileno())
    except (OSError, ValueError, AttributeError):
        pass


def last_resort(command: str, exc: BaseException) -> int:
    """Log the traceback to the log file; say one line and where the details are."""
    from ..log import log_dir, setup_logging

    path = setup_logging("ERROR", to_file=True)
    logging.getLogger("explorer").error("%s: unexpected error", command, exc_info=exc)
    text = str(exc).strip().splitlines()
    where = f"; the details are in {path}" if path else f" ({log_dir()} cannot be written)"
    print(f"gpt-explorer {command}: unexpected error: {type(exc).__name__}"
          f"{': ' + text[0] if text else ''}{where}", file=sys.stderr)
    return 1


if __name__ == "__main__":
    sys.exit(main())
