"""Slow first uses done on a thread once the window is on screen, so that the window
answers keys and clicks meanwhile (the thread hands the GIL back every millisecond):
GPT-2's vocabulary (read and checked: ~0.25 s) for the prompt's token chips, then
pyqtgraph (0.3–0.7 s to import) for the first view that plots, and the modules of the
views the window shows first (20–40 ms each, which would otherwise be in the turn that
builds the view); then the statistics' compiled kernels begin on a thread of their own
(``core.run.fused``: seconds, and the views do not wait for them).

A tokenizer asked for before the window paints (the prompt's chips, on a machine slow to
paint) is read on a thread of its own (``read_soon``), never on the GUI thread.

The GUI thread never imports these modules while the thread does: everything that is
about to import one calls ``wait()`` first, so no two threads hold import locks the
other needs. The vocabulary is read under its own lock (``get_encoding``)."""

from __future__ import annotations

import importlib
import threading

from ...core.gpt.tokenizer import get_encoding

MODULES = ("pyqtgraph",)

_thread: threading.Thread | None = None


def _run(modules: tuple[str, ...]) -> None:
    # a failure here is left to the GUI thread's own first use, which raises it again
    # where it is shown to the user
    try:
        get_encoding()
    except Exception:  # noqa: BLE001
        pass
    for name in modules:
        try:
            importlib.import_module(name)
        except Exception:  # noqa: BLE001
            return
    from ...core.run import fused  # noqa: PLC0415 - torch: not for the commands that import this

    fused.warm(wait=False)  # the statistics' compiled kernels, on a thread of their own


def start(modules: tuple[str, ...] = MODULES) -> None:
    """Begin reading the vocabulary and importing ``modules`` on a daemon thread (once;
    later calls do nothing)."""
    global _thread
    if _thread is None:
        _thread = threading.Thread(target=_run, args=(modules,), name="preload", daemon=True)
        _thread.start()


_reader: threading.Thread | None = None  # a tokenizer read before the thread begins


def read_soon(load) -> None:
    """Read a tokenizer (``load``: its ``load`` method) on a thread of its own, for a caller
    that needs it before the start-up thread begins (a window slow to paint): never on the
    GUI thread, whose first paint would wait for it (once; ``busy`` says while)."""
    global _reader
    if _reader is None:
        _reader = threading.Thread(target=_quietly, args=(load,), name="tokenizer", daemon=True)
        _reader.start()


def _quietly(load) -> None:
    try:
        load()
    except Exception:  # noqa: BLE001 - the caller's own read raises it again, shown
        pass


def busy() -> bool:
    """Whether the thread, or a tokenizer's reader, is still at work."""
    return any(t is not None and t.is_alive() for t in (_thread, _reader))


def started() -> bool:
    """Whether the start-up thread has begun (the window's first paint begins it)."""
    return _thread is not None


def wait() -> None:
    """Block until the imports have ended (at once if they never began or are done); a
    module that failed to import is imported again by the caller, which sees its error."""
    if _thread is not None:
        _thread.join()
