"""The C allocator's thresholds, set for a broker's large, short-lived buffers (glibc only).

Every log read returns a new bytes object (a Fetch or ShareFetch reads 1-50 MiB of batches) that lives until its
response is written. glibc's thresholds adapt by default, so whether such a buffer reuses heap pages or gets
fresh ones depended on the heap's layout in that run: in some runs each freed read buffer went back to the kernel
and the next read faulted its pages in again (~71 000 minor faults per 128 MiB a ShareConsumer read, and three
times the broker CPU per MiB of the other runs). Fixed thresholds keep buffers below MMAP_THRESHOLD on the heap and
up to TRIM_THRESHOLD of freed heap for the next ones.
"""

from __future__ import annotations

import ctypes
import os
import platform

M_TRIM_THRESHOLD = -1  # mallopt parameters (glibc's malloc.h)
M_MMAP_THRESHOLD = -3
MMAP_THRESHOLD = 32 << 20  # the largest value glibc's adaptive threshold reaches on 64-bit platforms
TRIM_THRESHOLD = 64 << 20
# Set by the user, the allocator's own settings win.
OVERRIDES = ("MALLOC_TRIM_THRESHOLD_", "MALLOC_MMAP_THRESHOLD_", "MALLOC_TOP_PAD_", "GLIBC_TUNABLES")


def tune_allocator() -> bool:
    """Fix the heap's mmap and trim thresholds, unless the environment sets the allocator's settings or the C
    library is not glibc. True if they were set."""
    if any(name in os.environ for name in OVERRIDES) or platform.libc_ver()[0] != "glibc":
        return False
    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):
        return False
    mallopt.argtypes = (ctypes.c_int, ctypes.c_int)
    mallopt.restype = ctypes.c_int
    # mallopt answers 1 when it took the value
    return mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD) == 1 and mallopt(M_TRIM_THRESHOLD, TRIM_THRESHOLD) == 1
