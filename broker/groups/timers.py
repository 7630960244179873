"""Keyed one-shot timers for the sans-IO group state machines (Kafka's CoordinatorTimer, without threads).

`schedule(key, deadline)` replaces any timer with the same key; `cancel(key)` drops it; `pop_expired(now)`
returns the keys whose deadline has passed, earliest first. A heap with lazy deletion keeps every operation
O(log n); the owner asks `next_deadline()` when to call back.
"""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Hashable
from typing import Generic, TypeVar

K = TypeVar("K", bound=Hashable)


class Timers(Generic[K]):
    """Timers keyed by K (each state machine's own key shape, e.g. ("heartbeat", group, member))."""

    def __init__(self) -> None:
        self._deadline: dict[K, tuple[int, int]] = {}  # key -> (deadline, sequence)
        self._heap: list[tuple[int, int, K]] = []
        self._seq = itertools.count()

    def schedule(self, key: K, deadline_ms: int) -> None:
        entry = (deadline_ms, next(self._seq))
        self._deadline[key] = entry
        heapq.heappush(self._heap, (entry[0], entry[1], key))

    def cancel(self, key: K) -> None:
        self._deadline.pop(key, None)

    def deadline(self, key: K) -> int | None:
        entry = self._deadline.get(key)
        return None if entry is None else entry[0]

    def __contains__(self, key: K) -> bool:
        return key in self._deadline

    def __len__(self) -> int:
        return len(self._deadline)

    def _drop_stale(self) -> None:
        heap = self._heap
        while heap and self._deadline.get(heap[0][2]) != (heap[0][0], heap[0][1]):
            heapq.heappop(heap)

    def next_deadline(self) -> int | None:
        self._drop_stale()
        return self._heap[0][0] if self._heap else None

    def pop_expired(self, now_ms: int) -> list[K]:
        out: list[K] = []
        while True:
            self._drop_stale()
            if not self._heap or self._heap[0][0] > now_ms:
                return out
            _, _, key = heapq.heappop(self._heap)
            del self._deadline[key]
            out.append(key)

    def pop_one_expired(self, now_ms: int) -> K | None:
        """The earliest expired key (removed), or None: lets the caller re-check after each timer fires,
        since handling one timer may reschedule or cancel others."""
        self._drop_stale()
        if not self._heap or self._heap[0][0] > now_ms:
            return None
        _, _, key = heapq.heappop(self._heap)
        del self._deadline[key]
        return key
