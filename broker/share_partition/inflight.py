"""Share-partition leader in-flight state (KIP-932), sans-IO.

One `ShareInFlight` per (share group, topic-partition). It tracks the records between the share-partition
start offset (SPSO) and end offset (SPEO, exclusive: the next offset never fetched yet) as pieces: runs of
offsets with one state, owner, delivery count and lock deadline (see pieces.py). A fetch acquires one piece;
pieces split only where acknowledgements, releases or lock expiries differ inside them, so an ack costs
O(log n + pieces touched) and a whole-batch ack touches one piece whatever the window size. Lock expiry and
"lowest available record" use heaps with lazy invalidation (entries carry the piece version they were
pushed for) instead of scans.

Time is injected: every time-dependent method takes `now_ms`. Durable state follows Kafka's
PersisterStateBatch (0 Available, 2 Acknowledged, 4 Archived): acquisitions are not written (as in Kafka),
so an acquired record's durable view is Available with its count before this acquisition, unless
`persist_acquisitions` is set. Every mutation is applied in memory at once; the caller takes the changed
batches with `take_dirty()` and writes them (WriteShareGroupState) before answering the client.
"""

from __future__ import annotations

import heapq
import itertools
from bisect import bisect_left
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from operator import itemgetter
from typing import NamedTuple

from broker.share_coordinator.persister import StateBatch
from broker.share_partition.pieces import Piece, PieceIndex
from protocol.errors import ErrorCode

# Record states, with Kafka's ids (RecordState / PersisterStateBatch.deliveryState).
AVAILABLE = 0
ACQUIRED = 1
ACKNOWLEDGED = 2
ARCHIVED = 4
STATE_NAMES = {AVAILABLE: "AVAILABLE", ACQUIRED: "ACQUIRED", ACKNOWLEDGED: "ACKNOWLEDGED", ARCHIVED: "ARCHIVED"}

# Acknowledge types on the wire (ShareFetch/ShareAcknowledge AcknowledgeTypes; RENEW from v2).
ACK_GAP = 0
ACK_ACCEPT = 1
ACK_RELEASE = 2
ACK_REJECT = 3
ACK_RENEW = 4

# Kafka defaults: group.share.partition.max.record.locks, group.share.delivery.count.limit,
# group.share.record.lock.duration.ms.
DEFAULT_MAX_IN_FLIGHT_RECORDS = 2000
DEFAULT_DELIVERY_COUNT_LIMIT = 5
DEFAULT_LOCK_DURATION_MS = 30_000

_TERMINAL = (ACKNOWLEDGED, ARCHIVED)
_LAST = itemgetter(1)  # a batch's (first, last) -> last
_COMPACT_SLACK = 64


class AcquiredRange(NamedTuple):  # built per acquisition: tuples build faster than frozen dataclasses
    first_offset: int
    last_offset: int
    delivery_count: int


class StateDelta(NamedTuple):
    """What to send in WriteShareGroupState. `full`: replace all stored batches (after a reset)."""

    state_epoch: int
    start_offset: int
    state_batches: list[StateBatch]
    full: bool = False
    # Records above the start offset already acknowledged or archived (KIP-1226: lag = end - start - this).
    delivery_complete_count: int = -1


AckRange = tuple[int, int, Sequence[int]]

# Why records were archived undelivered (KIP-1191: these go to the group's dead-letter queue).
DEAD_REJECTED = "rejected"
DEAD_DELIVERY_LIMIT = "delivery limit"


@dataclass(frozen=True, slots=True)
class DeadLetter:
    """Records archived because the consumer rejected them or they reached the delivery count limit."""

    first_offset: int
    last_offset: int
    delivery_count: int
    reason: str


class ShareInFlight:
    def __init__(
        self,
        start_offset: int = 0,
        *,
        state_epoch: int = 0,
        max_in_flight_records: int = DEFAULT_MAX_IN_FLIGHT_RECORDS,
        delivery_count_limit: int = DEFAULT_DELIVERY_COUNT_LIMIT,
        lock_duration_ms: int = DEFAULT_LOCK_DURATION_MS,
        persist_acquisitions: bool = False,
    ) -> None:
        if start_offset < 0:
            raise ValueError("start offset must be resolved (share.auto.offset.reset) before use")
        self.state_epoch = state_epoch
        self.max_in_flight_records = max_in_flight_records
        self.delivery_count_limit = delivery_count_limit
        self.lock_duration_ms = lock_duration_ms
        self.persist_acquisitions = persist_acquisitions
        self._start = start_offset
        self._end = start_offset
        self._index = PieceIndex()
        self._seq = itertools.count()
        self._expiry: list[tuple[int, int, Piece, int]] = []  # (deadline, seq, piece, version)
        self._avail: list[tuple[int, int, Piece, int]] = []  # (first offset, seq, piece, version)
        self._avail_live = 0  # AVAILABLE pieces alive, to know when the heap is mostly stale
        self._owned: dict[str, set[Piece]] = {}
        self._owned_live = 0
        self._counts = [0] * 5  # records per state, indexed by state id
        self._dirty: set[Piece] = set()
        self._start_dirty = False
        self._full_dirty = False
        self.acquired_total = 0  # record acquisitions (deliveries) ever (monotonic, for metrics)
        self.acknowledged_total = 0  # records ever accepted (monotonic, for metrics)
        self.archived_total = 0  # records ever archived (monotonic, for metrics)
        self.expired_total = 0  # records whose acquisition lock expired (monotonic, for metrics)
        self._dead: list[DeadLetter] = []
        self.ops = 0  # pieces visited or split: the scaling tests count this, not time

    # ------------------------------------------------------------------ construction from durable state
    @classmethod
    def load(cls, start_offset: int, state_batches: Iterable[StateBatch], **config: object) -> ShareInFlight:
        """Rebuild after a restart or leader move (ReadShareGroupState). Nothing comes back acquired.

        Offsets between SPSO and the last batch that no batch mentions were never durably delivered:
        they come back AVAILABLE with delivery count 0.
        """
        sp = cls(start_offset, **config)  # type: ignore[arg-type]
        for b in sorted(state_batches, key=lambda b: b.first_offset):
            first = max(b.first_offset, sp._end)
            if b.first_offset < sp._end and b.first_offset >= start_offset:
                raise ValueError(f"overlapping state batches at offset {b.first_offset}")
            if b.last_offset < first:
                continue  # entirely below SPSO: stale, the start offset already covers it
            if b.delivery_state not in (AVAILABLE, ACKNOWLEDGED, ARCHIVED):
                raise ValueError(f"invalid persisted delivery state {b.delivery_state}")
            if first > sp._end:
                sp._add(Piece(sp._end, first - 1, AVAILABLE))
            sp._add(Piece(first, b.last_offset, b.delivery_state, count=b.delivery_count))
            sp._end = b.last_offset + 1
        sp._dirty.clear()
        sp._advance_start()
        return sp

    # ------------------------------------------------------------------ read-only views
    @property
    def start_offset(self) -> int:
        return self._start

    @property
    def end_offset(self) -> int:
        """SPEO, exclusive: where the caller reads new batches from."""
        return self._end

    @property
    def next_fetch_offset(self) -> int:
        """Where the next acquisition starts (Kafka's nextFetchOffset): the first available record, else SPEO."""
        p = self._peek_available()
        return self._end if p is None else p.first

    @property
    def in_flight_count(self) -> int:
        return self._end - self._start

    @property
    def acquired_count(self) -> int:
        return self._counts[ACQUIRED]

    @property
    def available_count(self) -> int:
        return self._counts[AVAILABLE]

    @property
    def acknowledged_count(self) -> int:
        return self._counts[ACKNOWLEDGED]

    @property
    def archived_count(self) -> int:
        """Archived records still inside the window (see `archived_total` for the counter)."""
        return self._counts[ARCHIVED]

    @property
    def piece_count(self) -> int:
        return len(self._index)

    def can_acquire(self) -> bool:
        """True if an acquire could return something: released records, or room for new ones."""
        return self._peek_available() is not None or self.in_flight_count < self.max_in_flight_records

    def next_deadline(self) -> int | None:
        heap = self._expiry
        while heap and not self._valid(heap[0]):
            heapq.heappop(heap)
        return heap[0][0] if heap else None

    def iter_records(self) -> Iterator[tuple[int, int, str | None, int, int]]:
        """(offset, state, owner, delivery count, deadline) for every in-window offset. O(window): tests."""
        for p in self._index:
            for off in range(p.first, p.last + 1):
                yield off, p.state, p.owner, p.count, p.deadline

    def iter_pieces(self) -> Iterator[Piece]:
        return iter(self._index)

    # ------------------------------------------------------------------ acquire
    def acquire(
        self,
        member_id: str,
        batches: Sequence[tuple[int, int]],
        max_records: int,
        now_ms: int,
        archived: Sequence[tuple[int, int]] = (),
    ) -> list[AcquiredRange]:
        """Acquire records for `member_id`: released/expired in-flight records first, lowest offsets first,
        then new records from `batches` (the log's batch boundaries, ascending, read from SPEO; batches
        ending before SPEO are skipped and the first one is clipped to SPEO).

        `max_records` is exact for re-acquired records and soft for new ones: like Kafka, new records are
        taken up to the end of the log batch holding the max_records-th offset. New records are only taken
        while fewer than `max_in_flight_records` offsets lie between SPSO and SPEO, and at most that many
        (again rounded up to a batch end). Offsets missing between batches (compaction) are acquired too;
        the client acknowledges them as gaps.

        `archived` (ascending, disjoint from `batches`): offsets among the new ones that are archived instead of
        acquired (read_committed: aborted transactions' batches and control batches). They join the window
        ARCHIVED with delivery count 0, are never delivered, and do not count against `max_records`.
        """
        self.expire_locks(now_ms)
        out: list[AcquiredRange] = []
        if max_records <= 0:
            return out
        remaining = max_records
        deadline = now_ms + self.lock_duration_ms
        while remaining > 0:
            p = self._peek_available()
            if p is None:
                break
            heapq.heappop(self._avail)
            if p.count >= self.delivery_count_limit:
                # Only possible after a load or a lowered limit: Kafka archives at release time.
                self._dead.append(DeadLetter(p.first, p.last, p.count, DEAD_DELIVERY_LIMIT))
                self._set_state(p, ARCHIVED)
                self._dirty.add(p)
                continue
            if p.size > remaining:
                self._split(p, p.first + remaining)
            p.count += 1
            self._set_state(p, ACQUIRED, owner=member_id, deadline=deadline)
            if self.persist_acquisitions:
                self._dirty.add(p)
            _append(out, p)
            remaining -= p.size

        self._advance_start()  # archiving above may have freed the head of the window
        room = self.max_in_flight_records - self.in_flight_count
        if remaining > 0 and room > 0:
            for p in self._acquire_new(member_id, batches, min(remaining, room), deadline, archived):
                _append(out, p)
            if archived:
                self._advance_start()  # an archived run at the head of the window moves SPSO on
        return out

    def _acquire_new(
        self, member_id: str, batches: Sequence[tuple[int, int]], cap: int, deadline: int,
        archived: Sequence[tuple[int, int]] = (),
    ) -> list[Piece]:
        """Take new offsets from SPEO up to the end of the batch reaching `cap` acquired offsets: one ACQUIRED
        piece per run between `archived` ranges, one ARCHIVED piece per archived range."""
        first = self._end
        last: int | None = None
        cuts: list[tuple[int, int]] = []
        if not archived:
            # The common case, by bisection: the first batch ending at or after SPEO, then the one reaching `cap`.
            i = bisect_left(batches, first, key=_LAST)
            if i == len(batches):
                return []
            if batches[i][0] > first and not self._index:
                # Nothing in flight and the log has nothing at SPEO (deleted or compacted away): move on.
                self._start = self._end = first = batches[i][0]
                self._start_dirty = True
            last = batches[min(bisect_left(batches, first + cap - 1, lo=i, key=_LAST), len(batches) - 1)][1]
        else:
            skipped = 0  # archived offsets in [first, last]: not counted against the cap
            for (b_first, b_last), is_archived in heapq.merge(((b, False) for b in batches),
                                                              ((a, True) for a in archived)):
                if b_last < self._end:
                    continue
                if last is None and b_first > first and not self._index:
                    self._start = self._end = first = b_first  # as above: nothing at SPEO
                    self._start_dirty = True
                if is_archived:
                    a = max(b_first, first)
                    cuts.append((a, b_last))
                    skipped += b_last - a + 1
                last = b_last
                if not is_archived and last - first + 1 - skipped >= cap:
                    break
            if last is None:
                return []
        out: list[Piece] = []
        at = first
        for a, b in cuts + [(last + 1, last)]:
            if a > at:  # the run before this archived range (or before the end) is acquired
                p = Piece(at, a - 1, ACQUIRED, count=1, owner=member_id, deadline=deadline)
                self._add(p)
                self.acquired_total += p.size
                if self.persist_acquisitions:
                    self._dirty.add(p)
                out.append(p)
            if b >= a:
                q = Piece(a, b, ARCHIVED)
                self._add(q)
                self.archived_total += q.size
                self._dirty.add(q)
            at = b + 1
        self._end = last + 1
        return out

    # ------------------------------------------------------------------ acknowledge
    def acknowledge(self, member_id: str, ranges: Sequence[AckRange], now_ms: int) -> list[int]:
        """Apply acknowledgements [(first, last, ack_types)], all or nothing.

        ack_types holds one type for the whole range or one per offset. Returns one error code per range;
        the request was applied iff every code is 0 (Kafka answers one error per partition: use the first
        non-zero). INVALID_REQUEST: malformed or unsorted/overlapping ranges, unknown type, offsets at or
        past SPEO. INVALID_RECORD_STATE: an offset is not acquired by this member (also after its lock
        expired). Offsets below SPSO are skipped, as Kafka does: they are already archived.
        """
        self.expire_locks(now_ms)
        if len(ranges) == 1:
            # The common case: one acquisition (one piece) acknowledged whole with one type; the general path
            # below gives the same result with two more walks over the pieces.
            first, last, types = ranges[0]
            if len(types) == 1 and ACK_GAP <= types[0] <= ACK_RENEW and self._start <= first <= last < self._end:
                p = self._index.floor(first)
                if p is not None and p.first == first and p.last == last and p.state == ACQUIRED \
                        and p.owner == member_id:
                    self.ops += 1
                    self._apply_ack(p, types[0], now_ms)
                    self._advance_start()
                    return [0]
        errors: list[int] = []
        plan: list[tuple[int, int, Sequence[int]]] = []
        prev_last: int | None = None
        for first, last, types in ranges:
            err = self._validate_ack(member_id, first, last, types, prev_last)
            errors.append(err)
            if err == 0 and last >= self._start:
                a = max(first, self._start)
                plan.append((a, last, types if len(types) == 1 else types[a - first:]))
            if first <= last:
                prev_last = last if prev_last is None else max(prev_last, last)
        if any(errors):
            return errors
        for a, b, types in plan:
            for ra, rb, t in _runs(a, b, types):
                for p in self._pieces_in(ra, rb):
                    self._apply_ack(p, t, now_ms)
        self._advance_start()
        return errors

    def refusal_message(self, member_id: str, ranges: Sequence[AckRange]) -> str | None:
        """Kafka's message for the first refused range of an acknowledgement that `acknowledge` refused (it
        changed nothing): SharePartition's wording for offsets past the acquired records and for records that
        are not acquired by this member; None for a malformed request (Kafka refuses those without one)."""
        prev_last: int | None = None
        for first, last, types in ranges:
            err = self._validate_ack(member_id, first, last, types, prev_last)
            if err == ErrorCode.INVALID_REQUEST:
                if first <= last and last >= self._end and (prev_last is None or first > prev_last):
                    where = "first" if first >= self._end else "last"
                    return f"Batch record not found. The {where} offset in request is past acquired records."
                return None
            if err == ErrorCode.INVALID_RECORD_STATE:
                for p in self._overlapping(max(first, self._start), last):
                    whole = p.first == first and p.last == last and len(types) == 1
                    if p.state == ACQUIRED and p.owner != member_id:
                        return "Member is not the owner of batch record" if whole else \
                            "Member is not the owner of offset"
                    if p.state != ACQUIRED:
                        if whole:
                            return "The batch cannot be acknowledged. The batch is not in the acquired state."
                        return "The batch cannot be acknowledged. The subset batch is not in the acquired state."
                return None
            if first <= last:
                prev_last = last if prev_last is None else max(prev_last, last)
        return None

    def _validate_ack(
        self, member_id: str, first: int, last: int, types: Sequence[int], prev_last: int | None
    ) -> int:
        if first > last or first < 0 or not types or len(types) not in (1, last - first + 1):
            return ErrorCode.INVALID_REQUEST
        if prev_last is not None and first <= prev_last:
            return ErrorCode.INVALID_REQUEST
        if min(types) < ACK_GAP or max(types) > ACK_RENEW:
            return ErrorCode.INVALID_REQUEST
        if last < self._start:
            return 0
        if last >= self._end:
            return ErrorCode.INVALID_REQUEST
        for p in self._overlapping(max(first, self._start), last):
            if p.state != ACQUIRED or p.owner != member_id:
                return ErrorCode.INVALID_RECORD_STATE
        return 0

    def _apply_ack(self, p: Piece, ack_type: int, now_ms: int) -> None:
        if ack_type == ACK_RENEW:
            p.deadline = now_ms + self.lock_duration_ms
            p.version += 1
            self._push_expiry(p)
            return
        if ack_type == ACK_ACCEPT:
            self._set_state(p, ACKNOWLEDGED)
        elif ack_type == ACK_RELEASE:
            self._release(p)
        else:  # REJECT, or GAP: the offset holds no record (compacted, control batch)
            if ack_type == ACK_REJECT:
                self._dead.append(DeadLetter(p.first, p.last, p.count, DEAD_REJECTED))
            self._set_state(p, ARCHIVED)
        self._dirty.add(p)

    # ------------------------------------------------------------------ release and expiry
    def release_member(self, member_id: str, now_ms: int) -> int:
        """Release everything `member_id` holds (session close, leave, member expiry). Returns records."""
        pieces = self._owned.get(member_id)
        if not pieces:
            return 0
        released = 0
        for p in list(pieces):
            released += p.size
            self._release(p)
        self._advance_start()
        return released

    def expire_locks(self, now_ms: int) -> int:
        """Release acquired records whose lock deadline is <= now_ms. Returns records released."""
        heap = self._expiry
        released = 0
        while heap and heap[0][0] <= now_ms:
            entry = heapq.heappop(heap)
            if self._valid(entry):
                p = entry[2]
                released += p.size
                self._release(p)
        if released:
            self.expired_total += released
            self._advance_start()
        return released

    def _release(self, p: Piece) -> None:
        # Kafka archives instead of making available once the delivery count reached the limit.
        if p.count >= self.delivery_count_limit:
            self._dead.append(DeadLetter(p.first, p.last, p.count, DEAD_DELIVERY_LIMIT))
            self._set_state(p, ARCHIVED)
        else:
            self._set_state(p, AVAILABLE)
        self._dirty.add(p)
        self.ops += 1

    # ------------------------------------------------------------------ window moves
    def archive_range(self, first: int, last: int) -> int:
        """Archive offsets without delivering them (aborted transactions, control batches).

        Available and acquired records in the range become ARCHIVED; offsets from SPEO up to `last` join
        the window already archived (so a control batch at SPEO moves SPSO on). Returns records archived.
        """
        a = max(first, self._start)
        if last < a:
            return 0
        if a > self._end:
            raise ValueError(f"archive_range must start at or before SPEO ({self._end}), got {first}")
        archived = 0
        if a < self._end:
            for p in self._pieces_in(a, min(last, self._end - 1)):
                if p.state in (AVAILABLE, ACQUIRED):
                    archived += p.size
                    self._set_state(p, ARCHIVED)
                    self._dirty.add(p)
        if last >= self._end:
            p = Piece(self._end, last, ARCHIVED)
            self._add(p)
            self.archived_total += p.size
            archived += p.size
            self._dirty.add(p)
            self._end = last + 1
        self._advance_start()
        return archived

    def advance_log_start(self, log_start_offset: int) -> int:
        """The log start moved (retention, DeleteRecords): forget everything below it. Returns offsets
        dropped. Unlike Kafka, acquired records below it are dropped too (their data is gone); acks for
        them are then skipped as below SPSO."""
        if log_start_offset <= self._start:
            return 0
        dropped = min(log_start_offset, self._end) - self._start
        if log_start_offset >= self._end:
            self._drop_all()
            self._end = log_start_offset
        else:
            p = self._index.floor(log_start_offset)
            if p is not None and p.first < log_start_offset:
                self._split(p, log_start_offset)
            while self._index and self._index.first().first < log_start_offset:  # type: ignore[union-attr]
                self._drop(self._index.pop_first())
        self._start = log_start_offset
        self._start_dirty = True
        self._advance_start()
        return dropped

    def reset_start(self, offset: int) -> None:
        """Set SPSO = SPEO = offset and forget all state (share.auto.offset.reset on first use, or
        AlterShareGroupOffsets on an empty group). The next delta replaces the stored state."""
        if offset < 0:
            raise ValueError("offset must be >= 0")
        self._drop_all()
        self._start = self._end = offset
        self._start_dirty = True
        self._full_dirty = True

    # ------------------------------------------------------------------ durable state
    def state_batches(self) -> list[StateBatch]:
        """The whole durable state (what ReadShareGroupState would return), adjacent equal runs merged."""
        out: list[StateBatch] = []
        for p in self._index:
            _append_batch(out, p, self._durable(p))
        return out

    def take_dead_letters(self) -> list[DeadLetter]:
        """Records archived as rejected or at the delivery limit since the last call (for the DLQ)."""
        dead, self._dead = self._dead, []
        return dead

    def take_dirty(self) -> StateDelta | None:
        """Changed batches since the last call (None if nothing changed). Write them before answering."""
        if not self._dirty and not self._start_dirty:
            return None
        if self._full_dirty:
            batches = self.state_batches()
        else:
            batches = []
            for p in sorted(self._dirty, key=lambda p: p.first):
                if p.alive:
                    _append_batch(batches, p, self._durable(p))
        delta = StateDelta(self.state_epoch, self._start, batches, self._full_dirty,
                           self.acknowledged_count + self.archived_count)
        self._dirty.clear()
        self._start_dirty = self._full_dirty = False
        return delta

    def _durable(self, p: Piece) -> tuple[int, int] | None:
        if p.state == ACQUIRED:
            state, count = AVAILABLE, p.count if self.persist_acquisitions else p.count - 1
        else:
            state, count = p.state, p.count
        if state == AVAILABLE and count == 0:
            return None  # never delivered: identical to not being in the state at all
        return state, count

    # ------------------------------------------------------------------ piece bookkeeping
    def _add(self, p: Piece) -> None:
        self._index.insert(p)
        self._counts[p.state] += p.size
        if p.state == ACQUIRED:
            self._own(p)
            self._push_expiry(p)
        elif p.state == AVAILABLE:
            self._avail_live += 1
            self._push_avail(p)

    def _set_state(self, p: Piece, state: int, *, owner: str | None = None, deadline: int = 0) -> None:
        size = p.size
        self._counts[p.state] -= size
        self._counts[state] += size
        if p.state == ACQUIRED:
            self._disown(p)
        elif p.state == AVAILABLE:
            self._avail_live -= 1
        p.state = state
        p.owner = owner if state == ACQUIRED else None
        p.deadline = deadline if state == ACQUIRED else 0
        p.version += 1
        if state == ACQUIRED:
            self.acquired_total += size
            self._own(p)
            self._push_expiry(p)
        elif state == AVAILABLE:
            self._avail_live += 1
            self._push_avail(p)
        elif state == ARCHIVED:
            self.archived_total += size
        elif state == ACKNOWLEDGED:
            self.acknowledged_total += size

    def _split(self, p: Piece, at: int) -> Piece:
        """Cut p before offset `at`; the right part is a new piece with the same state."""
        q = Piece(at, p.last, p.state, p.count, p.owner, p.deadline)
        p.last = at - 1
        self._index.insert(q)
        if q.state == ACQUIRED:
            self._own(q)
            self._push_expiry(q)  # the left part keeps its own (still valid) entry
        elif q.state == AVAILABLE:
            self._avail_live += 1
            self._push_avail(q)
        if p in self._dirty:
            self._dirty.add(q)
        self.ops += 1
        return q

    def _drop(self, p: Piece) -> None:
        self._counts[p.state] -= p.size
        if p.state == ACQUIRED:
            self._disown(p)
        elif p.state == AVAILABLE:
            self._avail_live -= 1
        p.alive = False
        self._dirty.discard(p)

    def _drop_all(self) -> None:
        for p in self._index:
            p.alive = False
        self._index.clear()
        self._expiry.clear()
        self._avail.clear()
        self._owned.clear()
        self._avail_live = self._owned_live = 0
        self._counts = [0] * 5
        self._dirty.clear()

    def _advance_start(self) -> None:
        """SPSO moves over a prefix of acknowledged/archived records; their state is forgotten."""
        index = self._index
        while index:
            p = index.first()
            assert p is not None
            if p.state not in _TERMINAL:
                return
            index.pop_first()
            self._drop(p)
            self._start = p.last + 1
            self._start_dirty = True
            self.ops += 1
        if self._start != self._end:
            self._start = self._end
            self._start_dirty = True

    def _pieces_in(self, a: int, b: int) -> list[Piece]:
        """The pieces exactly covering [a, b] (inside the window), splitting the boundary pieces."""
        p = self._index.floor(a)
        assert p is not None and p.last >= a, (a, b)
        if p.first < a:
            self._split(p, a)
        out = self._overlapping(a, b)
        if out[-1].last > b:
            self._split(out[-1], b + 1)
        return out

    def _overlapping(self, a: int, b: int) -> list[Piece]:
        out = []
        for p in self._index.iter_from(a):
            if p.first > b:
                break
            if p.last >= a:
                out.append(p)
                self.ops += 1
        return out

    def _own(self, p: Piece) -> None:
        assert p.owner is not None
        self._owned.setdefault(p.owner, set()).add(p)
        self._owned_live += 1

    def _disown(self, p: Piece) -> None:
        assert p.owner is not None
        pieces = self._owned[p.owner]
        pieces.discard(p)
        if not pieces:
            del self._owned[p.owner]
        self._owned_live -= 1

    # ------------------------------------------------------------------ lazy heaps
    @staticmethod
    def _valid(entry: tuple[int, int, Piece, int]) -> bool:
        p = entry[2]
        return p.alive and p.version == entry[3]

    def _push_expiry(self, p: Piece) -> None:
        heapq.heappush(self._expiry, (p.deadline, next(self._seq), p, p.version))
        if len(self._expiry) > 2 * self._owned_live + _COMPACT_SLACK:
            self._expiry = [e for e in self._expiry if self._valid(e)]
            heapq.heapify(self._expiry)

    def _push_avail(self, p: Piece) -> None:
        heapq.heappush(self._avail, (p.first, next(self._seq), p, p.version))
        if len(self._avail) > 2 * self._avail_live + _COMPACT_SLACK:
            self._avail = [e for e in self._avail if self._valid(e)]
            heapq.heapify(self._avail)

    def _peek_available(self) -> Piece | None:
        heap = self._avail
        while heap:
            entry = heap[0]
            if self._valid(entry) and entry[2].state == AVAILABLE:
                return entry[2]
            heapq.heappop(heap)
        return None


def _append(out: list[AcquiredRange], p: Piece) -> None:
    # Coalesce contiguous ranges with the same delivery count: fewer AcquiredRecords on the wire.
    if out and out[-1].last_offset + 1 == p.first and out[-1].delivery_count == p.count:
        out[-1] = AcquiredRange(out[-1].first_offset, p.last, p.count)
    else:
        out.append(AcquiredRange(p.first, p.last, p.count))


def _append_batch(out: list[StateBatch], p: Piece, durable: tuple[int, int] | None) -> None:
    if durable is None:
        return
    state, count = durable
    prev = out[-1] if out else None
    if prev and prev.last_offset + 1 == p.first and (prev.delivery_state, prev.delivery_count) == durable:
        out[-1] = StateBatch(prev.first_offset, p.last, state, count)
    else:
        out.append(StateBatch(p.first, p.last, state, count))


def _runs(a: int, b: int, types: Sequence[int]) -> Iterable[tuple[int, int, int]]:
    """Split [a, b] into maximal runs of one acknowledge type."""
    if len(types) == 1:
        return ((a, b, types[0]),)
    return _typed_runs(a, types)


def _typed_runs(a: int, types: Sequence[int]) -> Iterator[tuple[int, int, int]]:
    start = a
    for i in range(1, len(types) + 1):
        if i == len(types) or types[i] != types[i - 1]:
            yield start, a + i - 1, types[i - 1]
            start = a + i
