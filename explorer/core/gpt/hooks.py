"""The one way to hook a model: forward and pre-forward hooks attached by module name,
all removed together — as TransformerLens's ``hooks()`` does.

- ``hooks(model, forward=[(name, fn)], pre=[(name, fn)], pre_kwargs=[(name, fn)])`` is a
  context manager: the hooks live while the ``with`` block runs and are removed in
  ``finally``, also when attaching one fails or the forward pass raises or is stopped.
- ``HookSet`` is the base of objects that hook a model for a ``with`` block and keep
  what they see (capture, the step recorder, the stop check).
- ``attach`` keeps hooks for good; it is for a throwaway copy of a model whose change
  is a hook (a mutation of the divergence finder), never for the loaded model.

A name is a module path of the model (``trf_blocks.3.add2``; ``""`` is the model itself).
The hooks that change what a node passes on, used by more than one feature, are here
too: ``shortcut_removed`` makes an add return only its branch.
"""

from __future__ import annotations

from contextlib import contextmanager
from typing import Callable, Iterable, Iterator

from torch import nn

Hook = tuple[str, Callable]


def attach(model: nn.Module, forward: Iterable[Hook] = (), pre: Iterable[Hook] = (),
           pre_kwargs: Iterable[Hook] = ()) -> list:
    """Register the hooks and return their handles; on any failure none stays."""
    modules = dict(model.named_modules())
    handles: list = []
    try:
        for name, fn in forward:
            handles.append(modules[name].register_forward_hook(fn))
        for name, fn in pre:
            handles.append(modules[name].register_forward_pre_hook(fn))
        for name, fn in pre_kwargs:
            handles.append(modules[name].register_forward_pre_hook(fn, with_kwargs=True))
    except BaseException:
        detach(handles)
        raise
    return handles


def detach(handles: list) -> None:
    for handle in handles:
        handle.remove()


@contextmanager
def hooks(model: nn.Module, forward: Iterable[Hook] = (), pre: Iterable[Hook] = (),
          pre_kwargs: Iterable[Hook] = ()) -> Iterator[None]:
    """The hooks, for the duration of the ``with`` block."""
    handles = attach(model, forward, pre, pre_kwargs)
    try:
        yield
    finally:
        detach(handles)


class HookSet:
    """Hooks on named modules, attached on ``__enter__`` and all removed on ``__exit__``.
    Subclasses say which in ``_hooks()`` (name -> hook); ``pre`` makes them pre-forward
    hooks; ``_forget()`` drops per-pass state once they are gone."""

    pre = False

    def __init__(self, model: nn.Module) -> None:
        self.model = model
        self._handles: list = []

    def _hooks(self) -> dict[str, Callable]:
        raise NotImplementedError

    def __enter__(self):
        items = list(self._hooks().items())
        self._handles = attach(self.model, pre=items) if self.pre else attach(self.model, items)
        return self

    def __exit__(self, *exc) -> None:
        self.remove()

    def remove(self) -> None:
        handles, self._handles = self._handles, []
        detach(handles)
        self._forget()

    def _forget(self) -> None:
        """Drop per-pass state once the hooks are gone."""


def shortcut_removed(add: str, branch: str) -> list[Hook]:
    """Forward hooks that make the add ``add`` return only its branch (the output of the
    module ``branch``, the dropout before it): the residual connection taken away."""
    seen: dict = {}
    return [(branch, lambda module, inputs, out: seen.__setitem__("x", out)),
            (add, lambda module, inputs, out: seen.pop("x"))]
