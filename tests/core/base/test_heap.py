"""The C heap keeps freed blocks for reuse (``heap.reuse_freed_memory``, which the command
line and the app set first): a long prompt's next 48 MiB score matrix is written into a
freed one's pages instead of fresh pages faulted in one by one (without it, glibc maps
every block over 32 MiB apart and unmaps it when freed)."""

import ctypes
import resource
import sys

import pytest

from explorer.core.base.heap import give_back_freed_memory, reuse_freed_memory

BLOCK = 48 * 2**20  # a 12 × 1024 × 1024 float32 score matrix


def faults_writing_a_block(libc, size: int = BLOCK) -> int:
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    block = libc.malloc(ctypes.c_size_t(size))
    assert block
    ctypes.memset(block, 1, size)
    faults = resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before
    libc.free(ctypes.c_void_p(block))
    return faults


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's heap")
def test_a_freed_large_block_is_written_again_without_faulting_its_pages_in():
    libc = ctypes.CDLL(None)
    libc.malloc.restype = ctypes.c_void_p
    pages = BLOCK // resource.getpagesize()
    try:
        assert reuse_freed_memory()
        faults_writing_a_block(libc)  # the first one is fresh memory
        again = [faults_writing_a_block(libc) for _ in range(3)]
        assert max(again) < pages // 20, (again, pages)  # reused: not 12,288 faults each
    finally:
        give_back_freed_memory()


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's heap")
def test_a_pass_worth_of_freed_memory_stays_until_given_back():
    """300 MiB freed at the heap's top (a pass's last blocks) is kept for the next pass:
    glibc would give it back on free, and the next pass fault it in again, page by page;
    ``give_back_freed_memory`` returns it."""
    libc = ctypes.CDLL(None)
    libc.malloc.restype = ctypes.c_void_p
    size = 300 * 2**20
    pages = size // resource.getpagesize()
    try:
        assert reuse_freed_memory()
        faults_writing_a_block(libc, size)
        again = faults_writing_a_block(libc, size)
        assert again < pages // 20, (again, pages)
        give_back_freed_memory()
        assert faults_writing_a_block(libc, size) > pages // 2  # given back: fresh pages
    finally:
        give_back_freed_memory()
