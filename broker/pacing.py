"""Work that grows with what clients made (groups, members, topics, partitions) shares the one event loop.

Kafka serves each request on one of several handler threads, so a describe of thousands of groups slows only its
own client. Shoal has one loop: a handler that builds such an answer in one go stops every other connection for
as long as it takes (12.5 s for a fuzzed ConsumerGroupDescribe). Two tools keep each hold short:

- `Pacer`: a builder calls `await pacer.pace()` between items; it yields to the loop (`asyncio.sleep(0)`, one
  iteration: ready callbacks and socket events run) once `slice_s` of loop time has passed since the last yield.
  The check is a clock read, so small answers pay nothing noticeable and never yield. Items are built from
  immutable snapshots or one item at a time, so a yield never shows a half-changed item.
- `heavy(response)`: whether a response dict has so many elements that encoding it would hold the loop; the
  router then encodes it in a worker thread (the loop keeps the GIL for its own callbacks: the interpreter
  switches threads every few milliseconds).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Iterable
from typing import Any, TypeVar

T = TypeVar("T")

SLICE_S = 0.005  # the longest a paced builder holds the loop between two yields
HEAVY_ELEMENTS = 2_000  # array elements in a response above which it is encoded off the loop


class Pacer:
    __slots__ = ("slice_s", "_since", "yields")

    def __init__(self, slice_s: float = SLICE_S) -> None:
        self.slice_s = slice_s
        self._since = time.perf_counter()
        self.yields = 0

    def due(self) -> bool:
        return time.perf_counter() - self._since >= self.slice_s

    async def pace(self) -> None:
        """Yield to the loop if this builder has held it for `slice_s` or more."""
        if time.perf_counter() - self._since >= self.slice_s:
            await asyncio.sleep(0)
            self.yields += 1
            self._since = time.perf_counter()


async def paced(items: Iterable[T], pacer: Pacer | None = None) -> AsyncIterator[T]:
    """`items`, yielding to the loop between them whenever `pacer` says the slice is used up."""
    pacer = pacer or Pacer()
    for item in items:
        yield item
        await pacer.pace()


def heavy(response: dict[str, Any], limit: int = HEAVY_ELEMENTS) -> bool:
    """True if the arrays and structs in `response`, at any depth, hold more than `limit` elements in all. Stops
    counting at `limit`, so it costs at most `limit` element visits whatever the response's size."""
    budget = [limit]

    def over(value: Any) -> bool:  # responses are dicts and lists (isinstance on them is a C check, no ABC)
        if isinstance(value, list):
            budget[0] -= len(value)
            if budget[0] < 0:
                return True
            return any(over(item) for item in value if isinstance(item, dict | list))
        if isinstance(value, dict):
            budget[0] -= 1  # a struct counts too: deep structs of short arrays stay bounded
            if budget[0] < 0:
                return True
            return any(over(item) for item in value.values() if isinstance(item, dict | list))
        return False

    return over(response)
