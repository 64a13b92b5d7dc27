"""Training in a process of its own: ``train`` run in a child (multiprocessing, spawn),
its events sent back through a pipe. The window's threads never share a GIL with the
trainer's Python, so the window answers as quickly while a model trains. The child
stops as ``train`` does (saving where it is) when ``should_stop()`` turns true."""

from __future__ import annotations

import multiprocessing as mp
import os
from enum import StrEnum

from .training import train

POLL_S = 0.1  # how often the parent looks for an event or a stop
NICE = 10  # the trainer's lower scheduling priority (Unix nice increment)


class Message(StrEnum):
    """What the child sends, with its value: an event, the last one at the end, or why
    it failed."""
    EVENT = "event"
    DONE = "done"
    FAILED = "failed"


def lower_priority(pid: int) -> None:
    """The child's scheduling priority lowered by NICE from the parent, right after it
    starts, so that its start-up (importing torch, reading the text: a second of CPU)
    already yields to the window's threads."""
    try:
        os.setpriority(os.PRIO_PROCESS, pid, os.getpriority(os.PRIO_PROCESS, 0) + NICE)
    except (AttributeError, OSError):  # not on this system (Windows), or not allowed
        pass


def _child(text_path, settings, out_dir: str, conn, stop) -> None:
    try:
        last = train(text_path, settings, out_dir, lambda e: conn.send((Message.EVENT, e)), stop.is_set)
        conn.send((Message.DONE, last))
    except (ValueError, OSError, MemoryError) as exc:  # bad input, said in its own words
        conn.send((Message.FAILED, str(exc) or type(exc).__name__))
    except BaseException as exc:  # anything else: named, never a silent end
        conn.send((Message.FAILED, f"{type(exc).__name__}: {exc}"))
    finally:
        conn.close()


def train_in_process(text_path: str | None, settings, out_dir, report, should_stop=None) -> str:
    """``train(text_path, settings, out_dir, report, should_stop)`` in a child process;
    returns the last checkpoint's path, raises ``ValueError`` with the child's message."""
    ctx = mp.get_context("spawn")
    receive, send = ctx.Pipe(duplex=False)
    stop = ctx.Event()
    child = ctx.Process(target=_child, args=(text_path, settings, str(out_dir), send, stop),
                        name="training", daemon=True)
    child.start()
    lower_priority(child.pid)
    send.close()  # the child's end: when the child is gone, reading ends
    try:
        while True:
            if should_stop is not None and should_stop():
                stop.set()  # it saves before its next step and says done
            if not receive.poll(POLL_S):
                if not child.is_alive() and not receive.poll(0):
                    raise ValueError(f"training ended without a word (exit code "
                                     f"{child.exitcode}): out of memory, or killed")
                continue
            try:
                kind, value = receive.recv()
            except EOFError:
                raise ValueError(f"training ended without a word (exit code "
                                 f"{child.exitcode})") from None
            if kind == Message.EVENT:
                report(value)
            elif kind == Message.DONE:
                return value
            else:
                raise ValueError(value)
    finally:
        stop.set()
        child.join(10)
        if child.is_alive():
            child.kill()
            child.join()
        receive.close()
