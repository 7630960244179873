"""Cleaning one log, as Kafka's log cleaner does (its `Cleaner`), over the segment files alone.

This module touches no broker state: a `CleanJob` (plain values taken from the live log on the event loop)
describes the segments; a `CleaningSession` reads them and writes cleaned segments as `<base>.log.cleaned` (with
`.index.cleaned`, `.timeindex.cleaned` and, when it keeps an aborted transaction, `.txnindex.cleaned`), fsynced. Swapping them into the live log is the caller's job
(`broker.log.cleaner`). It runs in a cleaner process (`broker.log.cleaner_worker`) so decoding records never
holds the broker's GIL, or in a thread (tests).

One round, given the first dirty offset (the cleaner checkpoint) and the first uncleanable offset (the active
segment, `min.compaction.lag.ms`, the last stable offset):
1. `build_map`: read the dirty records [first dirty, first uncleanable) into a key -> latest offset map, at most
   `max_map_entries` keys; if the map fills up, the round ends where it stopped (`end_offset`).
2. Group every segment below `end_offset` into runs of at most `segment.bytes` (and `segment.index.bytes` of
   index) so cleaned segments do not shrink into many tiny files.
3. `clean_group`: copy each group into one cleaned segment, keeping for every record with a key at or below the
   map's latest offset only the latest one, and everything after it. Offsets are kept (gaps are allowed):
   - a batch whose records all survive is copied byte for byte; otherwise its surviving records are written
     into a new batch with the same base offset, last offset delta, producer id/epoch/base sequence, leader
     epoch, timestamp type and compression codec (Kafka's `MemoryRecords.filterTo`);
   - a tombstone (null value) survives its first cleaning: its batch gets the delete horizon (attribute bit 6,
     base timestamp = now + `delete.retention.ms`, KIP-534); once a cleaning runs after the horizon it goes;
   - a batch left empty is dropped, except the last batch of each active producer (its sequence numbers keep
     idempotence working after a restart) and the batch ending at the first uncleanable offset: those stay as
     record-less batch headers, as Kafka keeps them;
   - records without a key (written before the topic became compacted) are dropped, as Kafka drops them.

Transactions (Kafka's CleanedTransactionMetadata): the first uncleanable offset is never above the partition's last
stable offset (the caller's job), so every transaction met here is decided. The aborted ones are the entries of the
log's `.txnindex` files (`CleanJob.aborted_txns`); walking the batches in offset order, an entry becomes current at
its first offset and ends at its producer's ABORT marker. Then:
   - batches of an aborted transaction add no key to the map, and are removed (all their records; an empty header
     stays when it is the producer's last batch, as above);
   - an ABORT marker whose transaction still had batches in this pass stays, and its `.txnindex` entry is written
     to the cleaned segment's `.txnindex.cleaned` (swapped in with the segment); a COMMIT marker whose transaction
     still had batches stays. A marker whose transaction has no batch left gets the delete horizon (now +
     `delete.retention.ms`, KIP-534) and its index entry is not carried over; once a cleaning runs after the
     horizon, the marker goes.
"""

from __future__ import annotations

import hashlib
import os
import struct
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from broker.durable_files import fsync_file
from broker.log.files import FileCache
from broker.log.segment import Segment, segment_name
from broker.log.txn_index import AbortedTxn, TxnIndex
from protocol import compression as codecs
from protocol import records as rec

CLEANED_SUFFIX = ".cleaned"
SWAP_SUFFIX = ".swap"
# What one map entry costs in this process (a dict slot, a key of up to 16 bytes, an int offset), used to turn
# log.cleaner.dedupe.buffer.size into a number of keys. Kafka's hash table spends 24 bytes per entry.
MAP_ENTRY_BYTES = 120
_HASHED_KEY = 16  # keys this long or longer are stored as their MD5 digest (as Kafka stores every key)
_MAX_INT = (1 << 31) - 1
_CONTROL_ABORT, _CONTROL_COMMIT = 0, 1

_HEADER = rec.HEADER
_U32 = struct.Struct(">I")
_I16 = struct.Struct(">h")


class CleaningAborted(Exception):
    """The round was stopped (broker shutting down, log deleted); nothing it wrote is in use."""


class CorruptLogError(Exception):
    """The log holds bytes the cleaner cannot read; the log is left alone (Kafka marks it uncleanable)."""


@dataclass(frozen=True, slots=True)
class SegmentSpec:
    base_offset: int
    size: int  # bytes of whole batches when the job was made (a non-active segment no longer changes)
    offset_index_bytes: int = 0
    time_index_bytes: int = 0


@dataclass(frozen=True, slots=True)
class CleanJob:
    directory: str
    segments: tuple[SegmentSpec, ...]  # every segment below the first uncleanable offset, in order
    first_dirty_offset: int
    first_uncleanable_offset: int
    now_ms: int
    # the log's settings (its LogConfig) and the cleaner's (CleanerConfig), as the cleaner passes them
    delete_retention_ms: int
    segment_bytes: int
    segment_index_bytes: int
    index_interval_bytes: int
    max_map_entries: int
    io_buffer_bytes: int
    max_io_bytes_per_second: float
    producer_expiration_ms: int
    dirty_start_position: int = 0  # in the segment holding first_dirty_offset (from its offset index)
    # producer id -> last offset of its last data batch (producers expired already left out); None: the cleaner
    # finds them in the batch headers of `segments` + `tail_segments` (the rest of the log up to its end)
    producer_last_offsets: dict[int, int] | None = None
    tail_segments: tuple[SegmentSpec, ...] = ()
    # the `.txnindex` entries of the log's segments whose transaction starts below the first uncleanable offset
    aborted_txns: tuple[AbortedTxn, ...] = ()


@dataclass(slots=True)
class Stats:
    bytes_read: int = 0
    bytes_written: int = 0
    records_read: int = 0
    records_retained: int = 0
    batches_read: int = 0
    batches_retained: int = 0
    map_records: int = 0
    map_bytes: int = 0
    seconds: float = 0.0

    def add(self, other: Stats) -> None:
        for name in self.__slots__:
            setattr(self, name, getattr(self, name) + getattr(other, name))


@dataclass(frozen=True, slots=True)
class Plan:
    end_offset: int  # the next round starts here (the new cleaner checkpoint)
    groups: tuple[tuple[int, ...], ...]  # base offsets of the segments cleaned into one, in order
    map_keys: int
    stats: Stats


@dataclass(frozen=True, slots=True)
class GroupResult:
    base_offset: int  # the cleaned segment `<base>.log.cleaned` replaces the group's segments
    sources: tuple[int, ...]
    size: int
    stats: Stats = field(default_factory=Stats)


# --- the key -> offset map ---------------------------------------------------------------------------------------
class OffsetMap:
    """Latest offset of each key of the dirty section. Long keys are kept as MD5 digests (16 bytes), short ones
    as they are (fewer than 16 bytes, so they can never equal a digest)."""

    def __init__(self, max_entries: int) -> None:
        self.max_entries = max(1, max_entries)
        self._map: dict[bytes, int] = {}
        self.latest_offset = -1

    def __len__(self) -> int:
        return len(self._map)

    @property
    def full(self) -> bool:
        return len(self._map) >= self.max_entries

    @staticmethod
    def slot(key: bytes) -> bytes:
        return key if len(key) < _HASHED_KEY else hashlib.md5(key, usedforsecurity=False).digest()

    def put(self, key: bytes, offset: int) -> None:
        self._map[key if len(key) < _HASHED_KEY else hashlib.md5(key, usedforsecurity=False).digest()] = offset
        self.latest_offset = offset

    def get(self, key: bytes) -> int:
        return self._map.get(key if len(key) < _HASHED_KEY else hashlib.md5(key, usedforsecurity=False).digest(),
                             -1)


# --- reading segments --------------------------------------------------------------------------------------------
class _Throttle:
    """Keep the bytes read plus written under a rate (log.cleaner.io.max.bytes.per.second)."""

    def __init__(self, rate: float) -> None:
        self.rate = rate
        self.start = time.monotonic()
        self.done = 0

    def __call__(self, n: int) -> None:
        if self.rate == float("inf") or self.rate <= 0:
            return
        self.done += n
        ahead = self.done / self.rate - (time.monotonic() - self.start)
        if ahead > 0.01:
            time.sleep(ahead)
        if time.monotonic() - self.start > 10:  # a fresh window, so an idle spell is not saved up
            self.start, self.done = time.monotonic(), 0


def _iter_batches(path: Path, start: int, end: int, chunk: int, account: Callable[[int], None]
                  ) -> Iterator[tuple[int, rec.BatchHeader, memoryview]]:
    """(position, header, batch bytes) of each whole batch in [start, end) of a segment file."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except FileNotFoundError:
        raise CleaningAborted(f"{path.name} was deleted (retention, DeleteRecords or topic deletion)") from None
    try:
        pos = start
        while pos < end:
            buf = os.pread(fd, min(chunk, end - pos), pos)
            if len(buf) < rec.HEADER_SIZE:
                raise CorruptLogError(f"{path}: {len(buf)} bytes at position {pos}, not a batch")
            mv = memoryview(buf)
            off = 0
            while off + rec.HEADER_SIZE <= len(buf):
                header = rec.read_header(buf, off)
                size = header.batch_length + rec.LOG_OVERHEAD
                if header.batch_length < rec.MIN_BATCH_LENGTH or header.magic != rec.MAGIC or pos + off + size > end:
                    raise CorruptLogError(f"{path}: no valid batch at position {pos + off}")
                if off + size > len(buf):
                    if off == 0:  # a batch bigger than the buffer: read it whole
                        buf = os.pread(fd, size, pos)
                        if len(buf) != size:
                            raise CorruptLogError(f"{path}: short read at position {pos}")
                        yield pos, header, memoryview(buf)
                        off = size
                    break
                yield pos + off, header, mv[off:off + size]
                off += size
            account(off)
            pos += off
    finally:
        os.close(fd)


def _payload(header: rec.BatchHeader, batch: memoryview) -> memoryview | bytearray:
    body = batch[rec.HEADER_SIZE:]
    compression = header.attributes & rec.COMPRESSION_MASK
    if compression == rec.COMPRESSION_NONE:
        return body
    try:
        return codecs.decompress(compression, body, rec.MAX_DECOMPRESSED_BYTES)
    except codecs.CompressionError as err:
        raise CorruptLogError(f"batch at offset {header.base_offset}: {err}") from None


def _varint(buf: rec.Buffer, p: int) -> tuple[int, int]:
    b = buf[p]
    if b < 0x80:
        return (b >> 1) ^ -(b & 1), p + 1
    result = b & 0x7F
    shift = 7
    p += 1
    while True:
        b = buf[p]
        p += 1
        result |= (b & 0x7F) << shift
        if b < 0x80:
            return (result >> 1) ^ -(result & 1), p
        shift += 7
        if shift > 63:
            raise CorruptLogError("varint longer than 10 bytes")


def _records(payload: rec.Buffer, count: int) -> Iterator[tuple[int, int, int, bytes | None, bool, int, int]]:
    """(attributes, timestamp delta, offset delta, key, has value, position after the timestamp delta, record end)
    of each record; the framing was proven when the records were produced. One-byte varints (most of them) are
    decoded inline: this loop is most of the cleaner's time."""
    pos = 0
    end = len(payload)
    varint = _varint
    try:
        for _ in range(count):
            b = payload[pos]
            if b < 0x80:
                length, p = (b >> 1) ^ -(b & 1), pos + 1
            elif payload[pos + 1] < 0x80:
                u = (b & 0x7F) | (payload[pos + 1] << 7)
                length, p = (u >> 1) ^ -(u & 1), pos + 2
            else:
                length, p = varint(payload, pos)
            stop = p + length
            attributes = payload[p]
            b = payload[p + 1]
            if b < 0x80:
                ts_delta, p = (b >> 1) ^ -(b & 1), p + 2
            else:
                ts_delta, p = varint(payload, p + 1)
            rest = p
            b = payload[p]
            if b < 0x80:
                offset_delta, p = (b >> 1) ^ -(b & 1), p + 1
            else:
                offset_delta, p = varint(payload, p)
            b = payload[p]
            if b < 0x80:
                key_len, p = (b >> 1) ^ -(b & 1), p + 1
            else:
                key_len, p = varint(payload, p)
            if key_len >= 0:
                key: bytes | None = bytes(payload[p:p + key_len])
                p += key_len
            else:
                key = None
            b = payload[p]
            if b < 0x80:
                value_len, p = (b >> 1) ^ -(b & 1), p + 1
            elif payload[p + 1] < 0x80:
                u = (b & 0x7F) | (payload[p + 1] << 7)
                value_len, p = (u >> 1) ^ -(u & 1), p + 2
            else:
                value_len, p = varint(payload, p)
            if stop > end or p + max(value_len, 0) > stop:
                raise CorruptLogError("record runs past its batch")
            yield attributes, ts_delta, offset_delta, key, value_len >= 0, rest, stop
            pos = stop
    except IndexError:
        raise CorruptLogError("record runs past its batch") from None


def _keys(payload: rec.Buffer, count: int) -> Iterator[tuple[int, bytes | None]]:
    """(offset delta, key) of each record: what the key map needs."""
    pos = 0
    varint = _varint
    try:
        for _ in range(count):
            b = payload[pos]
            if b < 0x80:
                length, p = (b >> 1) ^ -(b & 1), pos + 1
            elif payload[pos + 1] < 0x80:
                u = (b & 0x7F) | (payload[pos + 1] << 7)
                length, p = (u >> 1) ^ -(u & 1), pos + 2
            else:
                length, p = varint(payload, pos)
            stop = p + length
            b = payload[p + 1]
            p = p + 2 if b < 0x80 else varint(payload, p + 1)[1]
            b = payload[p]
            if b < 0x80:
                offset_delta, p = (b >> 1) ^ -(b & 1), p + 1
            else:
                offset_delta, p = varint(payload, p)
            b = payload[p]
            if b < 0x80:
                key_len, p = (b >> 1) ^ -(b & 1), p + 1
            else:
                key_len, p = varint(payload, p)
            if key_len > stop - p:
                raise CorruptLogError("record key runs past its record")
            yield offset_delta, bytes(payload[p:p + key_len]) if key_len >= 0 else None
            pos = stop
        if pos != len(payload):
            raise CorruptLogError("bytes left after the batch's records")
    except IndexError:
        raise CorruptLogError("record runs past its batch") from None


def _control_type(payload: rec.Buffer) -> int | None:
    """The type (0 abort, 1 commit) in the key of a control batch's record, None when it has none."""
    for _attrs, _tsd, _od, key, _has_value, _rest, _stop in _records(payload, 1):
        if key is not None and len(key) >= 4:
            control_type: int = _I16.unpack_from(key, 2)[0]
            return control_type
    return None


# --- writing batches ---------------------------------------------------------------------------------------------
def _put_varint(out: bytearray, value: int) -> None:
    v = ((value << 1) ^ (value >> 63)) & 0xFFFFFFFFFFFFFFFF
    while v >= 0x80:
        out.append((v & 0x7F) | 0x80)
        v >>= 7
    out.append(v)


def _pack(header: rec.BatchHeader, attributes: int, base_ts: int, max_ts: int, count: int, payload: rec.Buffer) -> bytes:
    out = bytearray(rec.HEADER_SIZE + len(payload))
    _HEADER.pack_into(out, 0, header.base_offset, rec.HEADER_SIZE - rec.LOG_OVERHEAD + len(payload),
                      header.partition_leader_epoch, rec.MAGIC, 0, attributes, header.last_offset_delta, base_ts,
                      max_ts, header.producer_id, header.producer_epoch, header.base_sequence, count)
    out[rec.HEADER_SIZE:] = payload
    _U32.pack_into(out, 17, rec.batch_crc(out, 0, len(out)))
    return bytes(out)


def empty_batch(header: rec.BatchHeader) -> bytes:
    """A batch header with no records keeping the batch's offsets and producer state (Kafka's writeEmptyHeader):
    no compression, base and max timestamp both the batch's max timestamp."""
    attributes = header.attributes & (rec.ATTR_LOG_APPEND_TIME | rec.ATTR_TRANSACTIONAL | rec.ATTR_CONTROL)
    return _pack(header, attributes, header.max_timestamp, header.max_timestamp, 0, b"")


def rebuild_batch(header: rec.BatchHeader, payload: rec.Buffer, kept: list[tuple[int, int, int, int]],
                  delete_horizon: int | None) -> tuple[bytes, int]:
    """A batch of the records `kept` ((attributes, timestamp, rest start, record end) in `payload`) with the
    original batch's properties. Each record is re-encoded with its timestamp delta from the new base timestamp
    (the delete horizon when there is one, else the first record's timestamp). Returns (batch, max timestamp)."""
    log_append_time = bool(header.attributes & rec.ATTR_LOG_APPEND_TIME)
    base_ts = delete_horizon if delete_horizon is not None else kept[0][1]
    body = bytearray()
    record = bytearray()
    max_ts = -1
    for attributes, ts, rest, stop in kept:
        record.clear()
        record.append(attributes)
        _put_varint(record, ts - base_ts)
        record += payload[rest:stop]
        _put_varint(body, len(record))
        body += record
        if ts > max_ts:
            max_ts = ts
    if log_append_time:
        max_ts = header.max_timestamp
    compression = header.attributes & rec.COMPRESSION_MASK
    data = body if compression == rec.COMPRESSION_NONE else codecs.compress(compression, body)
    attributes = header.attributes & ~rec.ATTR_DELETE_HORIZON
    if delete_horizon is not None:
        attributes |= rec.ATTR_DELETE_HORIZON
    return _pack(header, attributes, base_ts, max_ts, len(kept), data), max_ts


# --- grouping ----------------------------------------------------------------------------------------------------
def group_segments(segments: list[SegmentSpec], max_bytes: int, max_index_bytes: int,
                   first_uncleanable: int) -> list[tuple[int, ...]]:
    """Runs of consecutive segments cleaned into one: at most `max_bytes` of log, `max_index_bytes` of each
    index, and an offset range a segment can hold (Kafka's groupSegmentsBySize)."""
    groups: list[tuple[int, ...]] = []
    i = 0
    while i < len(segments):
        first = segments[i]
        group = [first.base_offset]
        log_bytes, offset_bytes, time_bytes = first.size, first.offset_index_bytes, first.time_index_bytes
        i += 1
        while i < len(segments):
            seg = segments[i]
            # the last offset this segment may hold: the next base offset - 1 (or the first uncleanable - 1)
            last = segments[i + 1].base_offset - 1 if i + 1 < len(segments) else first_uncleanable - 1
            if (log_bytes + seg.size > max_bytes or offset_bytes + seg.offset_index_bytes > max_index_bytes
                    or time_bytes + seg.time_index_bytes > max_index_bytes
                    or (seg.size and last - first.base_offset > _MAX_INT)):
                break
            group.append(seg.base_offset)
            log_bytes += seg.size
            offset_bytes += seg.offset_index_bytes
            time_bytes += seg.time_index_bytes
            i += 1
        groups.append(tuple(group))
    return groups


# --- one round ---------------------------------------------------------------------------------------------------
class CleanedTransactionMetadata:
    """Kafka's CleanedTransactionMetadata: which batches belong to an aborted transaction, and which markers may go,
    from the aborted transactions of the log (its `.txnindex` entries) and the batches read so far, in order."""

    def __init__(self, aborted: tuple[AbortedTxn, ...] | list[AbortedTxn]) -> None:
        self._pending = sorted(aborted, key=lambda t: t.first_offset)  # Kafka's min-heap by first offset
        self._next = 0
        self.ongoing_committed: set[int] = set()  # producer ids with a transactional batch not (yet) aborted
        # producer id -> (its aborted transaction, whether a batch of it was read in this pass)
        self.ongoing_aborted: dict[int, tuple[AbortedTxn, bool]] = {}
        self.cleaned_index: TxnIndex | None = None  # the cleaned segment's `.txnindex` (None while mapping)

    def _consume_up_to(self, offset: int) -> None:
        pending = self._pending
        while self._next < len(pending) and pending[self._next].first_offset <= offset:
            txn = pending[self._next]
            self._next += 1
            self.ongoing_aborted.setdefault(txn.producer_id, (txn, False))

    def on_batch(self, header: rec.BatchHeader) -> bool:
        """A data batch was read: True if it belongs to an aborted transaction (it may be discarded)."""
        self._consume_up_to(header.base_offset + header.last_offset_delta)
        if not header.attributes & rec.ATTR_TRANSACTIONAL:
            return False
        aborted = self.ongoing_aborted.get(header.producer_id)
        if aborted is not None:
            self.ongoing_aborted[header.producer_id] = (aborted[0], True)
            return True
        self.ongoing_committed.add(header.producer_id)
        return False

    def on_marker(self, header: rec.BatchHeader, payload: rec.Buffer) -> bool:
        """A control batch was read: True if it may be discarded (its transaction has no batch left). An ABORT
        marker kept has its transaction's entry written to the cleaned index."""
        self._consume_up_to(header.base_offset + header.last_offset_delta)
        if header.records_count == 0:
            return True  # a marker emptied by an earlier cleaning
        kind = _control_type(payload)
        pid = header.producer_id
        if kind == _CONTROL_ABORT:
            aborted = self.ongoing_aborted.pop(pid, None)
            if aborted is not None and aborted[1]:
                if self.cleaned_index is not None:
                    self.cleaned_index.append(aborted[0])
                return False
            return True
        if kind == _CONTROL_COMMIT:
            if pid in self.ongoing_committed:
                self.ongoing_committed.discard(pid)
                return False
            return True
        return False


class CleaningSession:
    """One cleaning round of one log. `check()` is called often and may raise CleaningAborted."""

    def __init__(self, job: CleanJob, *, check: Callable[[], None] = lambda: None,
                 files: FileCache | None = None) -> None:
        self.job = job
        self.directory = Path(job.directory)
        self.check = check
        self.files = files if files is not None else FileCache(16)
        self.map = OffsetMap(job.max_map_entries)
        self.plan: Plan | None = None
        self._throttle = _Throttle(job.max_io_bytes_per_second)
        self._producers: dict[int, int] | None = job.producer_last_offsets
        self._txns = CleanedTransactionMetadata(job.aborted_txns)  # shared by the groups of the round, as Kafka's
        self._map_txns = CleanedTransactionMetadata(())

    def _path(self, base: int) -> Path:
        return self.directory / f"{segment_name(base)}.log"

    def _batches(self, spec: SegmentSpec, start: int = 0) -> Iterator[tuple[int, rec.BatchHeader, memoryview]]:
        return _iter_batches(self._path(spec.base_offset), start, spec.size, self.job.io_buffer_bytes,
                             self._throttle)

    # --- step 1 ----------------------------------------------------------------------------------------------
    def build_map(self) -> Plan:
        job = self.job
        started = time.monotonic()
        stats = Stats()
        first_dirty, upper = job.first_dirty_offset, job.first_uncleanable_offset
        segments = job.segments
        dirty = [i for i, s in enumerate(segments)
                 if s.base_offset < upper and (i + 1 == len(segments) or segments[i + 1].base_offset > first_dirty)]
        # the aborted transactions overlapping the dirty range (Kafka's collectAbortedTransactions(start, end)):
        # one that ended before it would otherwise never see its marker and hide its producer's later batches
        self._map_txns = CleanedTransactionMetadata(
            [t for t in job.aborted_txns if t.last_offset >= first_dirty and t.first_offset < upper])
        full = False
        for n, i in enumerate(dirty):
            spec = segments[i]
            next_start = segments[dirty[n + 1]].base_offset if n + 1 < len(dirty) else upper
            start = job.dirty_start_position if spec.base_offset <= first_dirty else 0
            full = self._map_segment(spec, start, stats)
            if full:
                break
            self.map.latest_offset = next_start - 1  # offsets in a gap up to the next segment count as mapped
        end_offset = self.map.latest_offset + 1 if dirty else first_dirty
        cleaned = [s for s in segments if s.base_offset < end_offset]
        groups = group_segments(cleaned, job.segment_bytes, job.segment_index_bytes, upper)
        stats.seconds = time.monotonic() - started
        self.plan = Plan(max(end_offset, first_dirty), tuple(groups), len(self.map), stats)
        return self.plan

    def _map_segment(self, spec: SegmentSpec, start: int, stats: Stats) -> bool:
        """Add the keys of one dirty segment; True if the map filled up (the round stops there)."""
        first_dirty = self.job.first_dirty_offset
        offset_map = self.map
        txns = self._map_txns
        for _pos, header, batch in self._batches(spec, start):
            self.check()
            stats.map_bytes += header.batch_length + rec.LOG_OVERHEAD
            last = header.base_offset + header.last_offset_delta
            if header.attributes & rec.ATTR_CONTROL:
                txns.on_marker(header, _payload(header, batch) if header.records_count else b"")
                aborted = True
            else:
                aborted = txns.on_batch(header)  # an aborted batch's keys do not enter the map
            if last < first_dirty:
                continue
            if not aborted and header.records_count:
                base = header.base_offset
                entries, limit, put = offset_map._map, offset_map.max_entries, offset_map.put
                for offset_delta, key in _keys(_payload(header, batch), header.records_count):
                    offset = base + offset_delta
                    if key is not None and offset >= first_dirty:
                        if len(entries) >= limit:
                            stats.map_records += offset_delta
                            return True
                        put(key, offset)
                stats.map_records += header.records_count
            if last > offset_map.latest_offset:
                offset_map.latest_offset = last
        return False

    # --- step 3 ----------------------------------------------------------------------------------------------
    def producer_last_offsets(self) -> dict[int, int]:
        """Producer id -> last offset of its last batch, for producers not expired (from the batch headers when
        the broker did not know them)."""
        if self._producers is None:
            last: dict[int, tuple[int, int]] = {}
            for spec in self.job.segments + self.job.tail_segments:
                for _pos, header, _batch in self._batches(spec):
                    self.check()
                    if header.producer_id >= 0 and not header.attributes & rec.ATTR_CONTROL:
                        last[header.producer_id] = (header.base_offset + header.last_offset_delta,
                                                    header.max_timestamp)
            horizon = self.job.now_ms - self.job.producer_expiration_ms
            self._producers = {pid: offset for pid, (offset, ts) in last.items() if ts > horizon}
        return self._producers

    def clean_group(self, index: int) -> GroupResult:
        if self.plan is None:
            raise RuntimeError("build_map first")
        started = time.monotonic()
        sources = self.plan.groups[index]
        by_base = {s.base_offset: s for s in self.job.segments}
        producers = self.producer_last_offsets()
        base = sources[0]
        for suffix in (".log", ".index", ".timeindex", ".txnindex"):  # leftovers of an earlier, interrupted attempt
            (self.directory / f"{segment_name(base)}{suffix}{CLEANED_SUFFIX}").unlink(missing_ok=True)
        out = Segment(self.directory, base, index_interval_bytes=self.job.index_interval_bytes, files=self.files,
                      suffix=CLEANED_SUFFIX)
        stats = Stats()
        self._txns.cleaned_index = out.txn_index
        try:
            for source in sources:
                self._clean_into(by_base[source], out, producers, stats)
            out.seal()
            self._fsync(out)
        except BaseException:
            out.delete()
            raise
        finally:
            out.close()
        stats.seconds = time.monotonic() - started
        return GroupResult(base, sources, out.size, stats)

    def _fsync(self, segment: Segment) -> None:
        # the data only: the names become durable when commit_cleaned renames them and fsyncs the directory
        for path, _flags in segment.paths():
            try:
                fsync_file(path)
            except FileNotFoundError:
                continue  # an index never written has nothing to sync

    def _clean_into(self, spec: SegmentSpec, out: Segment, producers: dict[int, int], stats: Stats) -> None:
        job = self.job
        now = job.now_ms
        upper = job.first_uncleanable_offset
        offset_map = self.map
        latest = offset_map.latest_offset
        map_get = offset_map.get
        pending = bytearray()
        entries: list[tuple[int, int, int, int]] = []
        for _pos, header, batch in self._batches(spec):
            self.check()
            size = header.batch_length + rec.LOG_OVERHEAD
            stats.bytes_read += size
            stats.batches_read += 1
            attributes = header.attributes
            control = bool(attributes & rec.ATTR_CONTROL)
            has_horizon = bool(attributes & rec.ATTR_DELETE_HORIZON)
            last = header.base_offset + header.last_offset_delta
            payload = _payload(header, batch) if header.records_count else b""
            if control:
                can_discard = self._txns.on_marker(header, payload)
                discard_records = can_discard and has_horizon and header.base_timestamp <= now
            else:
                # a batch of an aborted transaction loses all its records (Kafka's discardBatchRecords)
                discard_records = self._txns.on_batch(header)
                can_discard = False
            if header.producer_id >= 0 and producers.get(header.producer_id) == last:
                retain_empty = True  # the producer's last batch keeps its sequence numbers
            elif last + 1 == upper:
                retain_empty = True  # keeps the offset the round ended at
            elif discard_records:
                continue
            else:
                retain_empty = False
            kept: list[tuple[int, int, int, int]] = []
            all_kept = True
            tombstones = False
            count = header.records_count
            stats.records_read += count
            if count and not discard_records:
                base_offset, base_ts = header.base_offset, header.base_timestamp
                append_time = header.max_timestamp if attributes & rec.ATTR_LOG_APPEND_TIME else None
                retain_deletes = not has_horizon or now < base_ts
                for rec_attrs, ts_delta, offset_delta, key, has_value, rest, stop in _records(payload, count):
                    offset = base_offset + offset_delta
                    if control or offset > latest:
                        keep = True
                    elif key is None:
                        keep = False
                    else:
                        keep = offset >= map_get(key) and (has_value or retain_deletes)
                    if keep:
                        kept.append((rec_attrs, append_time if append_time is not None else base_ts + ts_delta,
                                     rest, stop))
                        if not has_value:
                            tombstones = True
                    else:
                        all_kept = False
            elif count:
                all_kept = False
            if kept:
                need_horizon = (tombstones or (control and can_discard)) and not has_horizon
                if all_kept and not need_horizon:
                    data, max_ts = bytes(batch), header.max_timestamp
                else:
                    horizon = now + job.delete_retention_ms if need_horizon else (
                        header.base_timestamp if has_horizon else None)
                    data, max_ts = rebuild_batch(header, payload, kept, horizon)
                stats.records_retained += len(kept)
            elif retain_empty:
                data, max_ts = empty_batch(header), header.max_timestamp
            else:
                continue
            entries.append((len(pending), len(data), last, max_ts))
            pending += data
            stats.batches_retained += 1
            if len(pending) >= job.io_buffer_bytes:
                self._write(out, pending, entries, stats)
                pending, entries = bytearray(), []
        if pending:
            self._write(out, pending, entries, stats)

    def _write(self, out: Segment, data: bytearray, entries: list[tuple[int, int, int, int]], stats: Stats) -> None:
        out.append(data, entries)
        stats.bytes_written += len(data)
        self._throttle(len(data))
