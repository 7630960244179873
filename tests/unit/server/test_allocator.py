"""The broker fixes glibc's heap thresholds at start, so that large read buffers reuse heap pages."""

from __future__ import annotations

import json
import os
import platform
import subprocess
import sys

import pytest

from broker import allocator

GLIBC = platform.libc_ver()[0] == "glibc"

# In a fresh process: hold a 20 MB buffer, free it; report glibc's mmapped bytes while it is held and the heap's
# free bytes after (mallinfo2 from glibc 2.33, else mallinfo: its int fields hold these sizes).
PROBE = """
import ctypes, json, sys
from broker.allocator import tune_allocator
libc = ctypes.CDLL(None)
wide = hasattr(libc, "mallinfo2")
class MallInfo(ctypes.Structure):
    _fields_ = [(name, ctypes.c_size_t if wide else ctypes.c_int) for name in
                ("arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks", "uordblks", "fordblks",
                 "keepcost")]
mallinfo2 = libc.mallinfo2 if wide else libc.mallinfo
mallinfo2.restype = MallInfo
tuned = tune_allocator() if sys.argv[1] == "tune" else False
buf = bytes(20 << 20)
held = mallinfo2().hblkhd
del buf
print(json.dumps({"tuned": tuned, "mmapped_while_held": held, "free_heap_after": mallinfo2().fordblks}))
"""


def probe(mode: str, env: dict[str, str] | None = None) -> dict:
    out = subprocess.run([sys.executable, "-c", PROBE, mode], capture_output=True, text=True, check=True,
                         env={**os.environ, **(env or {})})
    return json.loads(out.stdout)


@pytest.mark.skipif(not GLIBC, reason="mallopt thresholds are glibc's")
def test_large_buffers_come_from_the_heap_and_stay_there_for_reuse() -> None:
    default = probe("default")
    assert not default["tuned"]
    assert default["mmapped_while_held"] >= 20 << 20  # glibc's default: a fresh 20 MB buffer is its own mapping
    tuned = probe("tune")
    assert tuned["tuned"]
    assert tuned["mmapped_while_held"] < 1 << 20  # from the heap
    assert tuned["free_heap_after"] >= 20 << 20  # kept for the next read, not trimmed back to the kernel


@pytest.mark.skipif(not GLIBC, reason="mallopt thresholds are glibc's")
def test_the_allocators_own_settings_win() -> None:
    assert not probe("tune", {"MALLOC_TRIM_THRESHOLD_": "131072"})["tuned"]
    assert not probe("tune", {"GLIBC_TUNABLES": "glibc.malloc.trim_threshold=131072"})["tuned"]


def test_without_glibc_nothing_is_set(monkeypatch) -> None:
    monkeypatch.setattr(allocator.platform, "libc_ver", lambda: ("musl", "1.2"))
    assert not allocator.tune_allocator()
