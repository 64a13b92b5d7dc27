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
from . import app, compare, diff, download, gradients, inspect, patch, text, train, why

DESCRIPTION = ("GPT Block Explorer: see inside a GPT-2 model. Without a command it opens "
               "the desktop app.")
GROUPS = (app, text, inspect, compare, gradients, why, patch, train, diff, download)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="gpt-explorer", description=DESCRIPTION)
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    parser.add_argument("--log-level", default="WARNING", choices=["DEBUG", "INFO", "WARNING", "ERROR"],
                        help="what to log to stderr (the log file always gets INFO and up)")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for group in GROUPS:
        group.register(sub)
    # with no command, the app's options work as they are: gpt-explorer --preset tiny
    app.add_app_args(parser)
    parser.set_defaults(func=app.run_app)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    _streams_that_exist()
    parser = build_parser()
    args = parser.parse_args(argv)
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
        text = str(exc).strip().splitlines()
        print(f"gpt-explorer {command}: error: {text[0] if text else type(exc).__name__}",
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
