"""shoal_spark.memory: a micro-batch's buffers reuse memory instead of faulting fresh pages in (glibc)."""

from __future__ import annotations

import subprocess
import sys

ROUNDS = """
import resource, sys
if sys.argv[1] == "keep":
    from shoal_spark.memory import keep_freed_memory
    keep_freed_memory()
size = 64 << 20
data = bytes(size)
before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
for _ in range(8):  # a response received, then copied into a pickle
    buf = bytearray(size)
    buf[:] = data
    copy = bytes(buf)
    del buf, copy
print(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)
"""


def page_faults(mode: str) -> int:
    out = subprocess.run([sys.executable, "-c", ROUNDS, mode], capture_output=True, text=True, check=True)
    return int(out.stdout)


def test_freed_buffers_are_reused() -> None:
    usual, kept = page_faults("usual"), page_faults("keep")
    assert usual > 8 * 2 * (64 << 20) // 4096 // 2  # fresh pages every round (at least half of them)
    assert kept < usual / 4  # the first round's pages, reused
