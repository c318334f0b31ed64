"""pipeline.memory (issue 18): the heap trim that the memory-heavy stages call."""

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
