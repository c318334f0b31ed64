"""pipeline.memory (issue 18): the heap trim that the memory-heavy stages call, and one heap for every thread."""

import json
import platform
import subprocess
import sys

import pytest

from pipeline.memory import release_free_memory

ON_GLIBC = platform.system() == "Linux" and platform.libc_ver()[0] == "glibc"

#: Run in a fresh interpreter (a test worker's heap, fragmented by earlier tests, would serve the blocks from its own
#: free chunks): 200 MiB of 64 KiB blocks, each followed by a small block that stays; resident MiB when held, after
#: freeing the large ones, after the trim.
SCENARIO = """
import json
from pipeline.memory import release_free_memory

def resident_mib():
    with open("/proc/self/status") as status:
        return next(int(line.split()[1]) for line in status if line.startswith("VmRSS")) / 1024

kept, blocks = [], []
for _ in range(200 * 16):
    blocks.append(bytearray(65536))
    kept.append(bytearray(600))  # above pymalloc's 512 bytes: malloc's heap, between the large blocks
held = resident_mib()
del blocks
freed = resident_mib()
release_free_memory()
print(json.dumps({"held": held, "freed": freed, "trimmed": resident_mib(), "kept": len(kept)}))
"""


def test_release_free_memory_trims_on_glibc_and_does_nothing_elsewhere():
    assert release_free_memory() is ON_GLIBC


@pytest.mark.skipif(not ON_GLIBC, reason="malloc_trim is glibc's")
def test_freed_pages_inside_the_heap_go_back_to_the_system():
    """Freeing blocks that are not at the top of the heap returns nothing by itself; the trim returns their pages."""
    completed = subprocess.run([sys.executable, "-c", SCENARIO], capture_output=True, text=True, timeout=120)
    assert completed.returncode == 0, completed.stderr[-2000:]
    figures = json.loads(completed.stdout.strip().splitlines()[-1])
    if figures["freed"] < figures["held"] - 100:  # e.g. MALLOC_MMAP_THRESHOLD_ or a preloaded allocator
        pytest.skip("this interpreter's allocator returned the blocks at free; there is nothing left to trim")
    assert figures["trimmed"] < figures["freed"] - 100
    assert figures["kept"] == 200 * 16


#: In a fresh interpreter: a second thread allocates 100 MiB of 64 KiB blocks, each followed by a small block that
#: stays, and frees the large ones (its heap keeps their pages: they are not at its top); then this thread allocates
#: 100 MiB of the same blocks. Resident MiB at the end, with or without share_one_heap first.
THREADS_SCENARIO = """
import json, sys, threading
from pipeline.memory import share_one_heap

if sys.argv[1] == "shared":
    assert share_one_heap()

def resident_mib():
    with open("/proc/self/status") as status:
        return next(int(line.split()[1]) for line in status if line.startswith("VmRSS")) / 1024

kept = []
def other_thread():
    blocks = []
    for _ in range(100 * 16):
        blocks.append(bytearray(65536))
        kept.append(bytearray(600))
    del blocks

start = resident_mib()
thread = threading.Thread(target=other_thread)
thread.start()
thread.join()
mine = [bytearray(65536) for _ in range(100 * 16)]
print(json.dumps({"grown": resident_mib() - start}))
"""


def test_share_one_heap_is_glibcs_and_leaves_a_users_malloc_arena_max_alone():
    import os

    environment = {k: v for k, v in os.environ.items() if k != "MALLOC_ARENA_MAX"}
    script = "from pipeline.memory import share_one_heap; print(share_one_heap())"
    completed = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120, env=environment)
    assert completed.stdout.strip() == str(ON_GLIBC), completed.stderr[-2000:]
    environment["MALLOC_ARENA_MAX"] = "4"
    completed = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120, env=environment)
    assert completed.stdout.strip() == "False", completed.stderr[-2000:]


@pytest.mark.skipif(not ON_GLIBC, reason="heap arenas are glibc's")
def test_with_one_heap_a_thread_reuses_what_another_thread_freed():
    """Without share_one_heap the second thread allocates from an arena of its own, whose freed pages this thread's
    allocations cannot use (about 200 MiB resident); with it, the same 100 MiB serve both (about 100 MiB)."""
    import os

    environment = {k: v for k, v in os.environ.items() if k != "MALLOC_ARENA_MAX"}
    grown = {}
    for mode in ("default", "shared"):
        completed = subprocess.run(
            [sys.executable, "-c", THREADS_SCENARIO, mode], capture_output=True, text=True, timeout=120, env=environment
        )
        assert completed.returncode == 0, completed.stderr[-2000:]
        grown[mode] = json.loads(completed.stdout.strip().splitlines()[-1])["grown"]
    if grown["default"] < 150:  # e.g. MALLOC_ARENA_MAX=1 in the environment or a preloaded allocator
        pytest.skip(f"this interpreter's allocator shares freed memory between threads already ({grown})")
    assert grown["shared"] < grown["default"] - 60, grown
