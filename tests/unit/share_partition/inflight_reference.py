"""Per-offset reference model of the share-partition in-flight state, written for clarity, not speed.

It states the rules of broker/share_partition/inflight.py one offset at a time; the property test drives both and
compares them offset by offset.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from broker.share_partition.inflight import (
    ACK_ACCEPT,
    ACK_GAP,
    ACK_RELEASE,
    ACK_RENEW,
    ACKNOWLEDGED,
    ACQUIRED,
    ARCHIVED,
    AVAILABLE,
)
from protocol.errors import ErrorCode


@dataclass
class Rec:
    state: int = AVAILABLE
    owner: str | None = None
    count: int = 0
    deadline: int = 0


class Reference:
    def __init__(self, start: int, *, max_in_flight: int, limit: int, lock_ms: int,
                 persist_acquisitions: bool = False) -> None:
        self.start = self.end = start
        self.recs: dict[int, Rec] = {}
        self.max_in_flight, self.limit, self.lock_ms = max_in_flight, limit, lock_ms
        self.persist_acquisitions = persist_acquisitions

    # durable view ------------------------------------------------------------
    def durable(self) -> dict[int, tuple[int, int]]:
        out = {}
        for off, r in self.recs.items():
            if r.state == ACQUIRED:
                d = (AVAILABLE, r.count if self.persist_acquisitions else r.count - 1)
            else:
                d = (r.state, r.count)
            if d != (AVAILABLE, 0):
                out[off] = d
        return out

    def reload(self, start: int, durable: dict[int, tuple[int, int]]) -> None:
        self.start = start
        kept = {o: d for o, d in durable.items() if o >= start}
        self.end = max(kept, default=start - 1) + 1
        self.end = max(self.end, start)
        self.recs = {}
        for off in range(self.start, self.end):
            st, cnt = kept.get(off, (AVAILABLE, 0))
            self.recs[off] = Rec(st, None, cnt, 0)
        self.advance()

    # rules ---------------------------------------------------------------------
    def advance(self) -> None:
        while self.start < self.end and self.recs[self.start].state in (ACKNOWLEDGED, ARCHIVED):
            del self.recs[self.start]
            self.start += 1

    def release(self, r: Rec) -> None:
        r.state = ARCHIVED if r.count >= self.limit else AVAILABLE
        r.owner, r.deadline = None, 0

    def expire(self, now: int) -> int:
        n = 0
        for r in self.recs.values():
            if r.state == ACQUIRED and r.deadline <= now:
                self.release(r)
                n += 1
        self.advance()
        return n

    def acquire(self, member: str, batches: Sequence[tuple[int, int]], max_records: int,
                now: int) -> list[tuple[int, int]]:
        """Returns [(offset, delivery_count)] acquired, ascending."""
        self.expire(now)
        got: list[tuple[int, int]] = []
        if max_records <= 0:
            return got
        for off in range(self.start, self.end):
            if len(got) >= max_records:
                break
            r = self.recs[off]
            if r.state != AVAILABLE:
                continue
            if r.count >= self.limit:
                r.state = ARCHIVED
                continue
            r.state, r.owner, r.count, r.deadline = ACQUIRED, member, r.count + 1, now + self.lock_ms
            got.append((off, r.count))
        self.advance()
        remaining = max_records - len(got)
        room = self.max_in_flight - (self.end - self.start)
        if remaining > 0 and room > 0:
            cap = min(remaining, room)
            first, last = self.end, None
            for bf, bl in batches:
                if bl < self.end:
                    continue
                if last is None and bf > first and self.start == self.end:
                    self.start = self.end = first = bf
                last = bl
                if last - first + 1 >= cap:
                    break
            if last is not None:
                for off in range(first, last + 1):
                    self.recs[off] = Rec(ACQUIRED, member, 1, now + self.lock_ms)
                    got.append((off, 1))
                self.end = last + 1
        return got

    def acknowledge(self, member: str, ranges: Sequence[tuple[int, int, Sequence[int]]], now: int) -> list[int]:
        self.expire(now)
        errors = []
        prev_last = None
        todo: list[tuple[int, int]] = []
        for first, last, types in ranges:
            err = 0
            if first > last or first < 0 or not types or len(types) not in (1, last - first + 1) or prev_last is not None and first <= prev_last or any(t < 0 or t > 4 for t in types):
                err = ErrorCode.INVALID_REQUEST
            elif last < self.start:
                err = 0
            elif last >= self.end:
                err = ErrorCode.INVALID_REQUEST
            else:
                for off in range(max(first, self.start), last + 1):
                    r = self.recs[off]
                    if r.state != ACQUIRED or r.owner != member:
                        err = ErrorCode.INVALID_RECORD_STATE
                        break
                if not err:
                    for off in range(max(first, self.start), last + 1):
                        todo.append((off, types[0] if len(types) == 1 else types[off - first]))
            errors.append(err)
            if first <= last:
                prev_last = last if prev_last is None else max(prev_last, last)
        if any(errors):
            return errors
        for off, t in todo:
            r = self.recs[off]
            if t == ACK_RENEW:
                r.deadline = now + self.lock_ms
            elif t == ACK_ACCEPT:
                r.state, r.owner, r.deadline = ACKNOWLEDGED, None, 0
            elif t == ACK_RELEASE:
                self.release(r)
            else:
                assert t in (ACK_GAP, 3)
                r.state, r.owner, r.deadline = ARCHIVED, None, 0
        self.advance()
        return errors

    def release_member(self, member: str) -> int:
        n = 0
        for r in self.recs.values():
            if r.state == ACQUIRED and r.owner == member:
                self.release(r)
                n += 1
        self.advance()
        return n

    def archive_range(self, first: int, last: int) -> int:
        a = max(first, self.start)
        n = 0
        for off in range(a, last + 1):
            if off >= self.end:
                self.recs[off] = Rec(ARCHIVED, None, 0, 0)
                n += 1
            elif self.recs[off].state in (AVAILABLE, ACQUIRED):
                r = self.recs[off]
                r.state, r.owner, r.deadline = ARCHIVED, None, 0
                n += 1
        self.end = max(self.end, last + 1)
        self.advance()
        return n

    def advance_log_start(self, lso: int) -> None:
        if lso <= self.start:
            return
        for off in range(self.start, min(lso, self.end)):
            del self.recs[off]
        self.start = lso
        self.end = max(self.end, lso)
        self.advance()

    def records(self) -> list[tuple[int, int, str | None, int, int]]:
        return [(o, r.state, r.owner, r.count, r.deadline) for o, r in sorted(self.recs.items())]
