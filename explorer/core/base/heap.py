"""The C heap under torch's CPU tensors (glibc's malloc; elsewhere nothing is changed).

A pass over a long prompt makes and frees many large temporaries: at 1024 tokens each
block's attention score matrices are 48 MiB apiece. glibc gives every block above its
mmap threshold (at most 32 MiB by default) fresh pages and returns them when freed, so the
next one faults in page by page as it is first written: 700,000-870,000 page faults in a
gpt2-small pass with attention's steps kept, about a quarter of its time.
``reuse_freed_memory`` lets the heap keep freed blocks for the next ones, and keep them
until asked: glibc otherwise hands back the top of its heap whenever 128 KiB of it is free
at once, which is every pass (the pass's last large blocks are at the top), and the next
pass faults it all in again. ``give_back_freed_memory`` returns what is free to the
system: the window's engine does it once no job has run for a while. Imports no torch
(the command line calls it before anything is loaded)."""

from __future__ import annotations

_LIBC: list = []  # glibc, found once (None elsewhere)
M_TRIM_THRESHOLD, M_MMAP_THRESHOLD = -1, -3  # glibc's mallopt parameters
LARGEST = 1 << 30  # blocks up to this size come from the heap (larger ones are mapped apart)
NEVER = -1  # M_TRIM_THRESHOLD's value for "never give the heap's top back on free"


def _libc():
    if not _LIBC:
        import ctypes
        try:  # the process's own symbols: libc's, without looking for it (a subprocess)
            libc = ctypes.CDLL(None)
            _LIBC.append(libc if hasattr(libc, "mallopt") and hasattr(libc, "malloc_trim") else None)
        except OSError:  # not glibc: its allocator keeps and gives pages back itself
            _LIBC.append(None)
    return _LIBC[0]


def reuse_freed_memory() -> bool:
    """Let blocks up to LARGEST come from the heap and freed ones stay there for the next,
    until ``give_back_freed_memory``; True where the C library took it. The price is
    resident memory: between passes the process holds what its largest pass used, as it
    did during that pass. (gpt2-small, 1024 tokens, every tensor and attention's steps
    of every block kept: giving the top back once 256 MiB of it was free, 420,000-520,000
    page faults and 2.2-2.4 s a pass; keeping it, none after the first pass and 1.9 s.)"""
    libc = _libc()
    if libc is None:
        return False
    return bool(libc.mallopt(M_MMAP_THRESHOLD, LARGEST)) and \
        bool(libc.mallopt(M_TRIM_THRESHOLD, NEVER))


def give_back_freed_memory() -> None:
    """Return the C heap's freed pages to the system (glibc's ``malloc_trim``; nothing
    elsewhere). Passes whose temporaries grow step by step (Recompute all: T + k
    positions at step k) leave each freed buffer too small for the next, and without
    this the process keeps them resident: 1.3 GB where 1.0 GB is in use after 40 steps
    of gpt2-small."""
    libc = _libc()
    if libc is not None:
        libc.malloc_trim(0)
