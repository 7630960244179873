"""Reads of whole batches for share acquisition (the share-partition leader's reads of a partition's log).

Batch bounds from the share-partition end offset (SPEO) within a record and a byte budget, read as a plain Fetch
reads them (whole batches up to a byte limit, `PartitionLog.read` reporting each batch's bounds); under
read_committed, the batches up to the LSO with their fate (aborted transactions archived) from batch headers and
the `.txnindex` only; the bytes of whole batches holding acquired ranges (re-delivered records); the bytes
acquirable from SPEO (MinBytes). Batches stay bytes: the acquired ones are served as views of the reads (one slice
per read, several reads as BytesParts), never copied or decoded.
"""

from __future__ import annotations

from bisect import bisect_left
from collections import deque
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from itertools import takewhile
from operator import itemgetter
from typing import TYPE_CHECKING, Any, NamedTuple, Protocol

from broker.log.partition_log import OffsetOutOfRangeError
from broker.log.read_committed import Fate, classify_batches
from protocol.primitives import BytesParts
from protocol.records import BatchHeader, iter_batches

if TYPE_CHECKING:
    from broker.log.partition_log import PartitionLog

_BOUND_LAST = itemgetter(2)  # a batch bound (position, base offset, last offset, size, attributes) -> last offset
# Acquired ranges closer than this (estimated bytes between them) are served from one log read.
COALESCE_GAP_BYTES = 8192
# Read past the estimated bytes of new records, so that a batch straddling the estimate still comes in one read.
_READ_SLACK_BYTES = 16384


class OffsetRange(Protocol):
    """Offsets first..last of a log (an acquired range, a dead letter)."""

    @property
    def first_offset(self) -> int: ...

    @property
    def last_offset(self) -> int: ...


@dataclass(frozen=True, slots=True)
class Span:
    """A log batch seen while acquiring: base offset, last offset, size in bytes."""

    base: int
    last: int
    size: int


@dataclass(slots=True)
class _Budget:
    """The record and byte budgets of one read_committed acquisition, spent batch by batch (`new_batches` spends
    the same budgets inline: its loop runs once per batch of every ShareFetch)."""

    room: int  # records the acquisition may take: MaxRecords within the in-flight limit
    max_bytes: int
    min_one: bool  # the first batch is taken even when larger than max_bytes
    strict: bool  # record_limit mode: the last batch is cut to the room left
    records: int = 0
    size: int = 0

    def take(self, first: int, last: int, batch_size: int, first_batch: bool) -> tuple[int, int] | None:
        """Spend on offsets first..last of a batch of `batch_size` bytes: the range to acquire (cut in
        record_limit mode), or None when the batch does not fit the bytes left (the first batch always fits
        with `min_one`; nothing is spent before it, so `size` is 0 then)."""
        if self.size + batch_size > self.max_bytes and not (first_batch and self.min_one):
            return None
        self.records += last - first + 1
        self.size += batch_size
        if self.strict and self.records > self.room:
            last -= self.records - self.room  # the client filters by ranges
            self.records = self.room
        return first, last

    @property
    def spent(self) -> bool:
        return self.records >= self.room


def _spans_bytes(spans: Sequence[Span], first: int, last: int) -> int | None:
    """Bytes of the batches holding offsets first..last if `spans` (batches just scanned, consecutive in the
    file) cover them, else None."""
    i = next((k for k, sp in enumerate(spans) if sp.base <= first <= sp.last), None)
    if i is None:
        return None
    total = 0
    for span in spans[i:]:
        total += span.size
        if span.last >= last:
            return total
    return None


class _BatchCursor:
    """Walks whole batches of a log forward from the offsets asked for, keeping the unused rest of each read
    so that a following range in the same region needs no second read."""

    def __init__(self, plog: PartitionLog) -> None:
        self._plog = plog
        self._pending: deque[tuple[BatchHeader, memoryview, int]] = deque()

    def batch_at(self, offset: int, want_bytes: int) -> tuple[BatchHeader, memoryview, int] | None:
        """The batch a log read at `offset` would start with (header, the read, its position in the read),
        reading `want_bytes` if the buffered batches do not reach it."""
        pending = self._pending
        while pending and pending[0][0].last_offset < offset:
            pending.popleft()  # a batch between acquired ranges: not served
        if not pending:
            try:
                data = memoryview(self._plog.read(offset, max(1, want_bytes), min_one_batch=True).data)
            except OffsetOutOfRangeError:  # retention moved the log start: nothing left to serve
                return None
            pending.extend((h, data, at) for at, h in iter_batches(data))
            while pending and pending[0][0].last_offset < offset:
                pending.popleft()
        return pending[0] if pending else None

    def take(self) -> tuple[BatchHeader, memoryview, int]:
        return self._pending.popleft()


class _Slices:
    """Byte ranges of log reads to answer, in order; ranges adjacent in one read are merged, so that serving
    one read's batches gives one view of it; batches from several reads are served as the views' BytesParts
    (the response encodes them back to back: nothing is copied)."""

    __slots__ = ("_runs",)

    def __init__(self) -> None:
        self._runs: list[list[Any]] = []  # [read, start, end]

    def add(self, data: memoryview, start: int, end: int) -> None:
        runs = self._runs
        if runs and runs[-1][0] is data and runs[-1][2] == start:
            runs[-1][2] = end
        else:
            runs.append([data, start, end])

    def bytes(self) -> bytes | memoryview | BytesParts:
        views = [data[start:end] for data, start, end in self._runs]
        if not views:
            return b""
        return views[0] if len(views) == 1 else BytesParts(views)


class NewRecords:
    """The log reads of an acquisition from SPEO, each with the bounds of its batches (see PartitionLog.read): what
    it acquires is served as slices of them."""

    __slots__ = ("reads",)

    def __init__(self) -> None:
        self.reads: list[tuple[memoryview, list[tuple[int, int, int, int, int]]]] = []

    def served(self, first: int, last: int) -> bytes | memoryview | BytesParts:
        """The bytes of the batches holding offsets first..last (those acquired): of each read, the batches from
        the one holding `first` to the one holding `last`, which lie back to back in it (one slice, no copy)."""
        out = _Slices()
        if last >= first:
            for data, bounds in self.reads:
                i = bisect_left(bounds, first, key=_BOUND_LAST)
                j = bisect_left(bounds, last, key=_BOUND_LAST)
                if j == len(bounds) or bounds[j][1] > last:
                    j -= 1  # `last` is past this read, or in a gap before its batch j
                if i <= j:
                    out.add(data, bounds[i][0], bounds[j][0] + bounds[j][3])
        return out.bytes()


class NewBatches(NamedTuple):  # one per acquisition: a tuple builds faster than a dataclass
    """What a look for new records from SPEO found: the batches to acquire (offset ranges, ascending), the ranges
    of aborted transactions to archive (read_committed), and what was read to find them: the plain reads, whose
    slices serve the acquired batches (read_uncommitted, `new_batches`), or the batches walked, which size the
    read of the acquired ones (read_committed, `committed_batches`)."""

    batches: list[tuple[int, int]]
    archived: Sequence[tuple[int, int]] = ()
    reads: NewRecords | None = None
    spans: Sequence[Span] = ()


def classified(plog: PartitionLog, start: int, end: int) -> Iterator[tuple[BatchHeader, Fate]]:
    """The batches holding offsets [start, end) (`end` the LSO: a batch boundary), with their read_committed
    fate: headers only, as a read_committed Fetch (the aborted transactions come from the `.txnindex`)."""
    headers = takewhile(lambda h: h.base_offset < end, plog.iter_batch_headers(start))
    return classify_batches(headers, plog.collect_aborted_txns(start, end))


def committed_batches(plog: PartitionLog, start: int, end: int, room: int, max_bytes: int, min_one: bool,
                       strict: bool, spans: list[Span]) -> tuple[list[tuple[int, int]], list[tuple[int, int]]]:
    """read_committed `new_batches`: (batches to acquire, ranges to archive) from `start` (SPEO) up to `end`
    (the LSO), at most `room` records. Batches of aborted transactions are archived wherever they are (one range
    per run of batches, never per offset) and count against neither budget; control batches (transaction
    markers) are acquired with the data around them, as Kafka acquires them (the consumer skips their records
    and acknowledges their offsets). Every batch passed is appended to `spans` (they are consecutive in the
    file)."""
    budget = _Budget(room, max_bytes, min_one, strict)
    if budget.room <= 0 or start >= end:
        return [], []
    out: list[tuple[int, int]] = []
    archive: list[tuple[int, int]] = []
    for header, fate in classified(plog, start, end):
        first, last = max(header.base_offset, start), header.last_offset
        if last < start:
            continue
        if last >= end:
            break  # defensive: the LSO is the first offset of an open transaction's batch
        if fate is Fate.ABORTED:
            spans.append(Span(header.base_offset, last, header.size))
            if archive and archive[-1][1] + 1 == first:
                archive[-1] = (archive[-1][0], last)
            else:
                archive.append((first, last))
            continue
        taken = budget.take(first, last, header.size, not out)
        if taken is None:
            break
        spans.append(Span(header.base_offset, last, header.size))
        out.append(taken)
        if budget.spent:
            break
    return out, archive


def new_batches(plog: PartitionLog, start: int, end: int, room: int, max_bytes: int, min_one: bool,
                 strict: bool) -> tuple[list[tuple[int, int]], NewRecords]:
    """Batch boundaries from `start` (SPEO) up to `end`: whole data batches up to the record (`room`) and byte
    budgets, read once as a plain Fetch reads them (whole batches up to a byte limit); the acquired ones are
    served as slices of that read (see `NewRecords`). Control batches (transaction markers) are acquired like the others, as
    Kafka acquires them: the consumer skips their records and acknowledges their offsets."""
    # The budgets (as `_Budget`'s) are spent inline: this loop runs once per batch of every ShareFetch.
    new = NewRecords()
    if room <= 0 or start >= end:
        return [], new
    taken = spent_bytes = 0  # records and bytes acquired so far
    out: list[tuple[int, int]] = []
    # Each read asks for about what the records left to take need, not for the bytes left (MaxBytes is often
    # 50 MiB: a read of all of it to take one more batch cost a 1 MiB-batch topic 20 ms per ShareFetch): the
    # log's average bytes per offset, with slack. A read returns at least its first batch (the budget decides
    # whether that fits), so a short guess costs one more read, never an empty one.
    offsets = plog.log_end_offset - plog.log_start_offset
    per_offset = plog.size_bytes / offsets if offsets > 0 else 1024.0
    # rounded up to whole batches of the average size, and half a batch more for batches above the average,
    # when it is known (a read cut inside a batch it needs takes one more read), else a quarter more; reads
    # of large batches stop at the last whole one (Segment.read), so asking more costs them nothing
    batch = plog.active.average_batch_size
    offset = speo = start
    while True:
        left = max_bytes - spent_bytes
        if left <= 0:
            break
        need = (room - taken) * per_offset
        need = -(-need // batch) * batch + batch // 2 if batch else need * 1.25
        want = min(left, int(need) + _READ_SLACK_BYTES)
        bounds: list[tuple[int, int, int, int, int]] = []
        try:
            # the batches as one bound when they hold no control batch and fit the records left
            found = plog.read(offset, max(1, want), min_one_batch=True, bounds=bounds, run_records=room - taken)
        except OffsetOutOfRangeError:  # retention moved the log start: nothing left to read
            break
        data = memoryview(found.data)
        if bounds:
            new.reads.append((data, bounds))
        read_end = offset
        stop = not data
        for _pos, first, last, size, _attributes in bounds:
            read_end = last + 1
            if last < speo:
                continue
            if last >= end:
                stop = True
                break
            if spent_bytes + size > max_bytes and (out or not min_one):
                stop = True  # the first batch always fits with min_one
                break
            if not out:
                first = max(first, speo)  # only the first batch taken may start below SPEO
            taken += last - first + 1
            spent_bytes += size
            if taken >= room:
                if strict:
                    last -= taken - room  # record_limit: cut to the room left (the client filters by ranges)
                out.append((first, last))
                stop = True
                break
            out.append((first, last))
        # want == left: the read held every batch that fits the bytes left
        if stop or want >= left or read_end <= offset or read_end >= end:
            break
        offset = read_end
    return out, new


def read_ranges(plog: PartitionLog, ranges: Sequence[OffsetRange], spans: Sequence[Span] = ()
                 ) -> bytes | memoryview | BytesParts:
    """The whole batches overlapping the acquired ranges, each once, in offset order, and nothing else.

    Reads ask for about the bytes served, not for MaxBytes per range (that read megabytes to serve
    kilobytes): exactly the batches' bytes when this acquisition scanned them (new records), else the log's
    average bytes per offset times the offsets wanted (re-delivered records). Ranges separated by small gaps
    share one read, since every log read costs an index interval of look-ahead anyway.
    """
    ordered = sorted(ranges, key=lambda r: r.first_offset)
    if not ordered:
        return b""
    offsets = plog.log_end_offset - plog.log_start_offset
    per_offset = max(1.0, plog.size_bytes / offsets) if offsets > 0 else 1024.0
    # window_end[i]: last offset of the run of ranges from i whose gaps are cheaper to read through.
    window_end = [r.last_offset for r in ordered]
    for i in range(len(ordered) - 2, -1, -1):
        gap = ordered[i + 1].first_offset - ordered[i].last_offset - 1
        if gap * per_offset <= COALESCE_GAP_BYTES:
            window_end[i] = window_end[i + 1]
    cursor = _BatchCursor(plog)
    chunks = _Slices()
    covered = -1  # last offset already served
    for i, r in enumerate(ordered):
        pos = max(r.first_offset, covered + 1)
        while pos <= r.last_offset:
            want = _spans_bytes(spans, pos, window_end[i])
            if want is None:
                want = int(per_offset * (window_end[i] - pos + 1))
            got = cursor.batch_at(pos, want)
            if got is None or got[0].base_offset > r.last_offset:
                break  # nothing more in the log, or pos..last is a gap (compaction): the client acks a gap
            header, data, at = cursor.take()
            chunks.add(data, at, at + header.size)
            covered = header.last_offset
            pos = covered + 1
    return chunks.bytes()


def acquirable_bytes(plog: PartitionLog, start: int, end: int, enough: int, read_committed: bool) -> int:
    """Bytes of the batches from `start` (SPEO) below `end` (the LSO under read_committed, else the log end
    offset), counted up to `enough`; under read_committed, aborted transactions' batches do not count."""
    total = 0
    if start >= end:
        return total
    if read_committed:
        for header, fate in classified(plog, start, end):
            if header.last_offset >= start and fate is not Fate.ABORTED:
                total += header.size
                if total >= enough:
                    break
    else:
        for header in plog.iter_batch_headers(start):
            if header.last_offset >= start:
                total += header.size
                if total >= enough:
                    break
    return total
