"""Acquiring the next micro-batch's records while Spark runs the current one (runner process).

Without it every micro-batch waits for its ShareFetch in `latestOffset` (a quarter of a steady batch with 100 B
records) while the executors idle. `AcquireAhead.start(acks, max_records, max_bytes)` runs one acquisition in a
background thread (carrying the ACCEPTs of the batch Spark has just committed); the next `latestOffset` takes its
records with `take(max_records)`, waiting for the thread if it is still at work. Records acquired ahead are
locked to this member like those of a batch in progress: the lock keeper renews them (`held()`), `stop()`
releases them, and a crash leaves them to the broker, which delivers them again. Nothing here ACCEPTs on its
own: the acknowledgements it sends are the caller's. Records held when their share session is lost (a broker
restart or failover, a broken connection) are dropped at the next `take`: that broker released them with the
session, and handing them to Spark would only make duplicates. Records from the other brokers' sessions stay.

What the thread acquires is bounded by what the broker's per-partition lock limit leaves beside the batch in
progress, so it only overlaps when micro-batches hold at most about half of that capacity.
"""

from __future__ import annotations

import dataclasses
import threading
import time
from collections.abc import Callable

from shoal_client import Acquired

# acquire(acknowledgements, max_records, max_bytes) -> what was acquired
AcquireFn = Callable[[dict, int, int], list[Acquired]]
# -> whether what an acquisition handed over was released since, its share session lost (not
# ShareGroupMember.still_held)
StaleFn = Callable[[Acquired], bool]


def split(acquired: list[Acquired], max_records: int) -> tuple[list[Acquired], list[Acquired]]:
    """The first `max_records` acquired offsets and the rest (a partition's share cut inside its ranges; both
    halves keep the whole record batches, the decoder only takes the offsets of its ranges)."""
    taken: list[Acquired] = []
    rest: list[Acquired] = []
    room = max_records
    for a in acquired:
        if room <= 0:
            rest.append(a)
            continue
        if a.count <= room:
            taken.append(a)
            room -= a.count
            continue
        head: list[tuple[int, int, int]] = []
        tail: list[tuple[int, int, int]] = []
        for first, last, delivery in a.ranges:
            n = last - first + 1
            if room >= n:
                head.append((first, last, delivery))
                room -= n
            elif room > 0:
                head.append((first, first + room - 1, delivery))
                tail.append((first + room, last, delivery))
                room = 0
            else:
                tail.append((first, last, delivery))
        taken.append(dataclasses.replace(a, ranges=head))
        rest.append(dataclasses.replace(a, ranges=tail))
    return taken, rest


class AcquireAhead:
    def __init__(self, acquire: AcquireFn, stale: StaleFn = lambda a: False) -> None:
        self._acquire = acquire
        self._stale = stale
        self._lock = threading.Lock()
        self._held: list[Acquired] = []
        self.dropped = 0  # records dropped because their session was lost
        self._thread: threading.Thread | None = None
        self._error: BaseException | None = None
        self.renewed_at = time.monotonic()  # when the locks of what is held were last taken or renewed

    def start(self, acks: dict, max_records: int, max_bytes: int) -> None:
        """Send `acks` and acquire up to `max_records`/`max_bytes` more in the background."""
        self.wait()
        self._error = None
        self._thread = threading.Thread(target=self._run, args=(acks, max_records, max_bytes),
                                        name="shoal-acquire-ahead", daemon=True)
        self._thread.start()

    def _run(self, acks: dict, max_records: int, max_bytes: int) -> None:
        try:
            got = self._acquire(acks, max_records, max_bytes)
        except BaseException as err:  # surfaces in take(): the engine call that needs the records
            self._error = err
            return
        if got:
            with self._lock:
                self._drop_stale()
                if not self._held:
                    self.renewed_at = time.monotonic()
                self._held += got

    def _drop_stale(self) -> None:
        """Forget what is held from a share session lost since (caller holds _lock)."""
        stale = [a for a in self._held if self._stale(a)]
        if stale:
            self.dropped += sum(a.count for a in stale)
            self._held = [a for a in self._held if not self._stale(a)]

    def wait(self, timeout_s: float | None = None) -> bool:
        """Wait for the acquisition in progress (if any); False if it is still running after `timeout_s`."""
        thread = self._thread
        if thread is not None:
            thread.join(timeout_s)
            if thread.is_alive():
                return False
            self._thread = None
        return True

    def take(self, max_records: int) -> list[Acquired]:
        """Up to `max_records` of what was acquired ahead (after waiting for the acquisition in progress); the
        rest stays held. Raises what the acquisition raised (what was held before it stays held)."""
        self.wait()
        error, self._error = self._error, None
        if error is not None:
            raise error
        with self._lock:
            self._drop_stale()
            taken, self._held = split(self._held, max_records)
        return taken

    def held(self) -> list[Acquired]:
        """What is held right now (for renewing or releasing its locks)."""
        with self._lock:
            return list(self._held)

    def clear(self) -> list[Acquired]:
        """Hand over and forget everything held (to release it; `wait()` first for an acquisition in progress)."""
        with self._lock:
            held, self._held = self._held, []
        return held

    @property
    def count(self) -> int:
        with self._lock:
            return sum(a.count for a in self._held)

    @property
    def bytes(self) -> int:
        with self._lock:
            return sum(len(a.records) for a in self._held)
