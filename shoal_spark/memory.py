"""Keeping freed memory for reuse in the source's processes (glibc's malloc; elsewhere nothing happens).

Every micro-batch moves tens of MB through fresh buffers: in the runner the ShareFetch response and the pickled
InputPartitions, in the Python worker the partition's bytes as PySpark hands them over. glibc serves allocations
that large with mmap and unmaps them when freed, so each buffer is new memory whose every 4 KiB page faults on first
touch: on a VM, where a page fault costs microseconds, that was most of the runner's CPU for 1 KiB records (a 64 MB
response received and pickled took 130 ms, 35 ms with this). `keep_freed_memory()` makes malloc serve them from
its heap instead and keep up to KEEP_BYTES of freed memory there, so the next micro-batch reuses pages already
mapped, and from one arena: the runner receives in threads (acquiring ahead), whose own arenas map and unmap
their heaps (4x the page faults of the main thread in a test). The cost is memory: a process keeps up to
KEEP_BYTES it no longer uses.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import logging

log = logging.getLogger("shoal_spark")

KEEP_BYTES = 512 << 20
_M_TRIM_THRESHOLD = -1  # mallopt parameters (malloc.h)
_M_MMAP_MAX = -4
_M_ARENA_MAX = -8

_done = False


def keep_freed_memory() -> None:
    """Once per process: no mmap for large allocations, one arena, no trimming of the heap below KEEP_BYTES free."""
    global _done
    if _done:
        return
    _done = True
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        mallopt = libc.mallopt
    except (OSError, AttributeError):  # not glibc: leave the allocator as it is
        return
    mallopt.argtypes = (ctypes.c_int, ctypes.c_int)
    if not (mallopt(_M_MMAP_MAX, 0) and mallopt(_M_TRIM_THRESHOLD, KEEP_BYTES) and mallopt(_M_ARENA_MAX, 1)):
        log.debug("shoal: mallopt refused; freed memory is returned to the system as usual")
