"""pipeline.memory (issue 18): the heap trim that the memory-heavy stages call."""

import platform

import pytest

from pipeline.memory import release_free_memory

ON_GLIBC = platform.system() == "Linux" and platform.libc_ver()[0] == "glibc"


def test_release_free_memory_trims_on_glibc_and_does_nothing_elsewhere():
    assert release_free_memory() is ON_GLIBC


@pytest.mark.skipif(not ON_GLIBC, reason="malloc_trim is glibc's")
def test_freed_pages_inside_the_heap_go_back_to_the_system():
    """200 MiB of 64 KiB blocks, each followed by a small block that stays: freeing the large ones alone returns
    nothing (they are not at the top of the heap); the trim returns their pages."""

    def resident_mib() -> float:
        with open("/proc/self/status") as status:
            return next(int(line.split()[1]) for line in status if line.startswith("VmRSS")) / 1024

    kept, blocks = [], []
    for _ in range(200 * 16):
        blocks.append(bytearray(65536))
        kept.append(bytearray(600))  # above pymalloc's 512 bytes: malloc's heap, between the large blocks
    held = resident_mib()
    del blocks
    freed_only = resident_mib()
    if freed_only < held - 100:  # e.g. MALLOC_MMAP_THRESHOLD_ or another allocator preloaded: free gave them back
        pytest.skip("this process's allocator returned the blocks at free; there is nothing left to trim")
    release_free_memory()
    assert resident_mib() < freed_only - 100
    assert len(kept) == 200 * 16
