"""``gui`` (the default): the desktop app, or ``--screenshot`` to render it offscreen."""

from __future__ import annotations

import argparse

from ..core.base.outputs import check_output
from .common import add_model_args


def workspaces() -> list[str]:
    """The workspaces' names, from the window's one list of views (neither Qt nor torch
    imported: every command builds this parser)."""
    from ..ui.views.registry import WORKSPACES
    return [ws.key for ws in WORKSPACES]


def add_app_args(p: argparse.ArgumentParser, top: bool = False) -> None:
    """The app's options; ``top``: written before any command (see add_model_args)."""
    add_model_args(p, top)

    def where(dest: str) -> dict:
        return {"dest": f"given_{dest}", "default": argparse.SUPPRESS} if top else \
            {"dest": dest, "default": None}

    p.add_argument("--screenshot", metavar="OUT.png", **where("screenshot"),
                   help="render the window offscreen after running the prompt, save it, exit")
    p.add_argument("--prompt", help="the prompt for --screenshot", **where("prompt"))
    p.add_argument("--node", metavar="NAME", **where("screenshot_node"),
                   help="the node selected in --screenshot, e.g. trf_blocks.0.ff.layers.1")
    p.add_argument("--workspace", choices=workspaces(), **where("workspace"),
                   help="the workspace to show first (with --screenshot: the one rendered)")
    p.add_argument("--open-run", metavar="FILE", **where("open_run"),
                   help="open a saved run (generate --save-run, File ▸ Save run…); with "
                        "--screenshot, render it and exit (2 with one line if refused)")


def view_keys() -> list[str]:
    """Every view's key, from the one list (nothing of Qt or torch imported)."""
    from ..ui.views.registry import VIEWS
    return [v.key for v in VIEWS]


def register(sub) -> None:
    gui = sub.add_parser("gui", help="open the desktop app (the default)")
    add_app_args(gui)
    gui.set_defaults(func=run_app)
    one = sub.add_parser("view", help="open one view alone, on the prompt run once (for "
                                      "developing or looking at a single view)")
    one.add_argument("key", choices=view_keys(), metavar="KEY",
                     help="the view: " + ", ".join(view_keys()))
    add_model_args(one)
    one.add_argument("--prompt", default=None, help="the prompt run once (default: "
                                                    "'Every effort moves you')")
    one.add_argument("--screenshot", metavar="OUT.png",
                     help="render the view offscreen after the run, save it, exit")
    one.set_defaults(func=run_view)


def run_view(args: argparse.Namespace) -> int:
    from ..ui.window import app
    from .common import spec_of

    if args.screenshot:
        check_output(args.screenshot)
    return app.run_view(args.key, spec_of(args), args.prompt, screenshot=args.screenshot)


def run_app(args: argparse.Namespace) -> int:
    from ..ui.window import app
    from .common import spec_of

    explicit = any(getattr(args, k, None) for k in ("checkpoint", "preset"))
    spec = spec_of(args) if explicit else None
    if args.screenshot:
        check_output(args.screenshot)  # before the window opens: a FIFO would block at the end
        return app.screenshot(args.screenshot, spec, args.prompt, args.screenshot_node,
                              open_run=args.open_run, workspace=args.workspace)
    return app.run(spec, open_run=args.open_run, workspace=args.workspace)
