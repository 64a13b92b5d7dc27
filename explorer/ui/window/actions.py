"""The one list of the window's actions: id, title, menu, shortcut, what it calls. The
menu bar, its shortcuts and Help ▸ Keyboard shortcuts are built from it; the workspaces'
and views' own entries come from ``WORKSPACES`` and ``VIEWS`` into the same list, so that
one test finds any two actions that share a key (``all_actions``), without a window.

A handler is a path on the window, called with no argument (``models.get_gpt2``), or a
callable taking the window; its menu is a path of submenus (``View ▸ Look``)."""

from __future__ import annotations

from dataclasses import dataclass
from operator import attrgetter
from typing import Callable, Union

from ...core.gpt.config import PRESETS
from ...core.sources import ModelSpec
from ..views.registry import SHARED, VIEWS, WORKSPACES, in_workspace
from .workspaces import PROMPT

Handler = Union[str, Callable]


@dataclass(frozen=True)
class Action:
    id: str  # unique; the window keeps each QAction under it (window.actions_by_id)
    title: str  # with & before the mnemonic
    menu: str  # "File", "View ▸ Look", …
    handler: Handler
    shortcuts: tuple[str, ...] = ()  # portable texts ("Ctrl+Shift+G"), or "std:Open"
    tip: str = ""
    everywhere: bool = False  # the shortcut works whatever widget has the focus
    separated: bool = False  # a line above it in its menu

    def call(self, window) -> None:
        if callable(self.handler):
            self.handler(window)
        else:
            attrgetter(self.handler)(window)()


WINDOW_ACTIONS = (
    Action("get_gpt2", "&Get GPT-2…", "File", "models.get_gpt2", ("Ctrl+Shift+G",),
           "Download GPT-2 (124M to 1.5B) from the Hugging Face Hub, with progress and resume"),
    Action("choose_model", "&Choose model…", "File", "models.choose_model", ("Ctrl+M",),
           "GPT-2 from the Hugging Face cache, a checkpoint, or a random preset"),
    Action("open_checkpoint", "&Open checkpoint…", "File", "models.open_checkpoint", ("std:Open",),
           "Load a checkpoint file (.pth, .safetensors, .bin, model.ckpt.index)"),
    Action("open_folder", "Open &folder…", "File", "models.open_folder", ("Ctrl+Shift+O",),
           "Load a model folder: the book's gpt2/124M or a Hugging Face folder"),
    Action("save_run", "&Save run…", "File", lambda w: w.run_files.save(), ("std:Save",),
           "Save the prompt, the tokens and every node's statistics to a file"),
    Action("open_run", "Open &run…", "File", lambda w: w.run_files.open(), ("Ctrl+Shift+R",),
           "Open a saved run: run again with its model, or read-only"),
    *(Action(f"preset.{name}", name, "File ▸ Random &preset (untrained)",
             lambda w, n=name: w.models.load(ModelSpec(preset=n))) for name in PRESETS),
    Action("default_model", "&Default model", "File", lambda w: w.models.load(ModelSpec())),
    Action("quit", "&Quit", "File", "close", ("std:Quit",), separated=True),
    Action("generate", "&Generate", "Run", "prompt.request_run", ("Ctrl+Return", "Ctrl+Enter"),
           "Run the prompt through the model and generate", everywhere=True),
    Action("stop", "&Stop", "Run", "stop", ("Esc",), "Stop before the next token", everywhere=True),
)

HELP_ACTIONS = (
    Action("tour", "&Tour", "Help", "tour", (), "What is where in the window"),
    Action("shortcuts", "&Keyboard shortcuts", "Help", "show_shortcuts", ("Ctrl+/",)),
    Action("about", "&About", "Help", lambda w: _about(w)),
)


def _about(window) -> None:
    from .help import about
    about(window)


def view_actions() -> tuple[Action, ...]:
    """The View menu: a submenu per workspace (show it, then each of its views), any view
    opened in the shown workspace, the prompt, show large, reset."""
    out = []
    for ws in WORKSPACES:
        out.append(Action(f"workspace.{ws.key}", f"Show {ws.title}", f"View ▸ {ws.title}",
                          lambda w, k=ws.key: w.workspaces.show(k), (ws.shortcut,), ws.task))
        out += [Action(f"view.{spec.key}", spec.title, f"View ▸ {ws.title}",
                       lambda w, k=spec.key: w.show_view(k),
                       (spec.shortcut,) if spec.shortcut else (), spec.tour, separated=i == 0)
                for i, spec in enumerate(in_workspace(ws.key))]
    out += [Action(f"here.{spec.key}", spec.title, "View ▸ Open in this workspace",
                   lambda w, k=spec.key: w.workspaces.open_here(k),
                   tip=f"{spec.title} as a tab of the shown workspace")
            for spec in VIEWS if spec.group != SHARED]
    prompt = next(v for v in VIEWS if v.key == PROMPT)
    out += [
        Action(f"view.{PROMPT}", prompt.title, "View", lambda w: w.show_view(PROMPT),
               (prompt.shortcut,) if prompt.shortcut else (), separated=True),
        Action("large", "Show the front tab &large", "View", "toggle_large", ("F11",),
               "The right-hand tab in front takes the centre; F11 again puts it back",
               everywhere=True),
        Action("reset_layout", "&Reset layout", "View", "reset_layout",
               tip="The shown workspace's docks as they first were"),
    ]
    return tuple(out)


def all_actions() -> tuple[Action, ...]:
    """Every action of the menu bar, in menu order: File, Run, View, Help."""
    return WINDOW_ACTIONS + view_actions() + HELP_ACTIONS
