"""The memory pool for received requests (Kafka's `queued.max.request.bytes`), sans-IO.

Every connection is charged for the request bytes it buffers. When it is in the middle of a frame it is charged
for the whole frame its size prefix declares, as Kafka allocates a request's buffer from its pool once the size is
read: a connection whose frame got that reservation reads on to the frame's end. A new reservation is granted
while the pool is not exhausted (Kafka's non-strict pool: one request may take it past its capacity); once it is
exhausted the server stops reading from every connection that holds no reservation, until requests are dispatched
(or connections close) and the pool has room again. So thousands of connections each sending part of a large
frame hold at most about the capacity, instead of each its own buffer.

`give_back_memory` returns freed heap pages to the operating system after a burst: CPython's buffers for large
frames come from malloc, whose freed pages otherwise stay in the process (glibc keeps its heap and raises its mmap
threshold after large frees).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools

# A burst counts when the pool held at least this much; memory goes back once it has drained to an eighth of that.
TRIM_AFTER_BYTES = 16 * 1024 * 1024


class RequestMemoryPool:
    def __init__(self, capacity: int) -> None:
        self.capacity = capacity if capacity > 0 else None  # None: unbounded (Kafka's -1)
        self.used = 0
        self.high_water = 0  # most bytes held since memory was last given back
        # Set when the pool is exhausted; cleared once an eighth of it is free again, so a pool hovering at its
        # capacity does not pause and resume every connection on each request.
        self.muting = False

    def charge(self, before: int, after: int) -> None:
        """A connection's charge moved from `before` to `after` bytes."""
        used = self.used = self.used + after - before
        if used > self.high_water:
            self.high_water = used
        capacity = self.capacity
        if capacity is None:
            return
        if used >= capacity:
            self.muting = True
        elif self.muting and used <= capacity - capacity // 8:
            self.muting = False

    def drained_after_burst(self) -> bool:
        """True once after a burst has drained: time to give memory back (the burst is then forgotten)."""
        if self.high_water >= TRIM_AFTER_BYTES and self.used <= self.high_water // 8:
            self.high_water = self.used
            return True
        return False


@functools.cache
def _malloc_trim():
    name = ctypes.util.find_library("c")
    try:
        return ctypes.CDLL(name).malloc_trim if name else None
    except (OSError, AttributeError):  # not glibc: nothing to trim
        return None


def give_back_memory() -> bool:
    """Return free heap memory to the OS (glibc's malloc_trim); blocking, so run it off the event loop."""
    trim = _malloc_trim()
    if trim is None:
        return False
    trim(0)
    return True
