"""One log segment: `<base offset:020d>.log` plus its `.index`, `.timeindex` and `.txnindex` (aborted transactions,
created by its first entry).

The `.log` file is written with plain `os.write` (O_APPEND; durability is the flusher's job) and read with
`os.pread`. Batches are never decoded here: only their 61-byte headers are read. Descriptors come from the shared
`FileCache` for the duration of one operation, so an idle segment holds no open file.
"""

from __future__ import annotations

import os
import time
from bisect import bisect_left, bisect_right
from collections.abc import Callable, Iterator
from pathlib import Path

from crc32c import crc32c

from broker.log.config import LogConfig
from broker.log.files import INDEX_FLAGS, LOG_FLAGS, SHARED, FileCache
from broker.log.index import OffsetIndex, TimeIndex, _IndexFile
from broker.log.txn_index import CorruptTxnIndexError, TxnIndex
from protocol.records import (
    BATCH_BOUNDS,
    HEADER_SIZE,
    LOG_OVERHEAD,
    MAGIC,
    MIN_BATCH_LENGTH,
    BatchHeader,
    is_control_at,
    read_header,
)

SCAN_CHUNK = 64 * 1024  # header scans read this much at a time
# Header scans in worker threads read this much at a time. Each pread releases and retakes the GIL; at one every
# millisecond or so the loop thread, which only forces a GIL switch after 5 ms without one, is starved for the whole
# scan (a 564 ms loop stall over a 400 000-batch producer state scan). Fewer, larger reads let it in every 5 ms.
THREAD_SCAN_CHUNK = 1 << 20
_RECOVERY_CHUNK = 1 << 20  # CRC checks on recovery read this much at a time
_READ_SLACK = 1024  # extra bytes read past the index interval hoping to catch the target batch in one pread
# Above this look-ahead (batches of ~128 KiB and more) a read finds its first batch and its cut from the headers
# instead, reading _HEADER_CHUNK bytes per header (one pread per batch: between two index entries lie few of them).
_MAX_READ_AHEAD = 256 * 1024
_HEADER_CHUNK = 4096
_MAX_REL_OFFSET = (1 << 31) - 1

# an append's batches: (position inside the appended bytes, size, last offset, max timestamp)
BatchEntry = tuple[int, int, int, int]
# a read batch (see Segment.read): (position in the data read, base offset, last offset, size, attributes)
BatchBound = tuple[int, int, int, int, int]
# what an append that fails puts back (see Segment._tracking_state)
_TrackingState = tuple[int, int, int, int | None, int, int, int, int, int, int]


class LogCorruptionError(Exception):
    """Recovery found invalid bytes that are not a torn tail, in a log that must not be truncated past them."""


class RollbackFailedError(OSError):
    """A failed append could not be undone: the segment's files no longer match what the log knows."""


def segment_name(base_offset: int) -> str:
    return f"{base_offset:020d}"


def _pread_exact(fd: int, size: int, position: int) -> bytes:
    data = os.pread(fd, size, position)
    if len(data) == size or not data:
        return data
    parts = [data]
    got = len(data)
    while got < size:
        more = os.pread(fd, size - got, position + got)
        if not more:
            break
        parts.append(more)
        got += len(more)
    return b"".join(parts)


# index.interval.bytes's default (the topic table's): a segment opened only to be read or deleted
DEFAULT_INDEX_INTERVAL = LogConfig().index_interval_bytes


class Segment:
    def __init__(self, directory: Path, base_offset: int, *,
                 index_interval_bytes: int = DEFAULT_INDEX_INTERVAL, files: FileCache | None = None,
                 suffix: str = "") -> None:
        """Open (creating if missing) the segment's files. `suffix` names the files of a segment being cleaned
        (`.cleaned`) or swapped in (`.swap`), as Kafka names them; see `change_suffix`."""
        self.directory = directory
        self.base_offset = base_offset
        self.index_interval_bytes = index_interval_bytes
        self.files = files if files is not None else SHARED  # an empty cache is falsy (__len__)
        self.suffix = suffix
        name = segment_name(base_offset)
        self.log_path = directory / f"{name}.log{suffix}"
        self._path = str(self.log_path)
        fd = os.open(self._path, os.O_RDWR | os.O_CREAT, 0o644)  # created if new; not kept open
        try:
            self.size = os.fstat(fd).st_size
        finally:
            os.close(fd)
        self.offset_index = OffsetIndex(str(directory / f"{name}.index{suffix}"), base_offset, self.files)
        self.time_index = TimeIndex(str(directory / f"{name}.timeindex{suffix}"), base_offset, self.files)
        txn_path = str(directory / f"{name}.txnindex{suffix}")
        try:
            self.txn_index = TxnIndex(txn_path, base_offset, self.files)
        except CorruptTxnIndexError:
            # rebuilt from the log by the transaction state scan (as Kafka rebuilds it after its sanity check fails)
            os.unlink(txn_path)
            self.txn_index = TxnIndex(txn_path, base_offset, self.files)
        self.next_offset = base_offset  # last offset + 1; set by recover() / append
        self.max_timestamp = -1
        self.offset_of_max_timestamp = -1  # last offset of the batch holding max_timestamp (as Kafka)
        self.first_batch_timestamp: int | None = None  # for time-based rolling
        self.created_ms = int(time.time() * 1000)
        # Bytes known to be on disk: what was there at open, then what the last successful flush covered. After a
        # failed fsync the file is cut back to it (see PartitionLog.flush).
        self.durable_size = self.size
        self._bytes_since_index = 0
        self.batch_count = 0  # batches tracked since open (all of them for a new or recovered-from-start segment)
        self._tracked_bytes = 0
        # positions of the control batches tracked: all of the segment's when every byte was tracked (see
        # `_free_of_control`)
        self._controls: list[int] = []
        self.closed = False

    def __repr__(self) -> str:
        return f"Segment({self.log_path.name}, size={self.size}, next_offset={self.next_offset})"

    @property
    def empty(self) -> bool:
        return self.size == 0

    def paths(self) -> list[tuple[str, int]]:
        """(path, open flags) of the segment's files."""
        return [(self._path, LOG_FLAGS), (self.offset_index.path, INDEX_FLAGS), (self.time_index.path, INDEX_FLAGS),
                (self.txn_index.path, INDEX_FLAGS)]

    def unflushed_paths(self) -> list[tuple[str, int]]:
        """What a flush of this (appended) segment fsyncs: the log, and the index files changed since the last
        flush. Most appends add no index entry (one per index.interval.bytes), and every fsync of an unchanged
        file would still cost a syscall and a helper thread's wake-up (see fsync_all)."""
        return [(self._path, LOG_FLAGS)] + [(index.path, INDEX_FLAGS) for index in self._indexes()
                                            if index.take_unflushed()]

    def take_created(self) -> bool:
        """True if an index file may have been created since the last call: the directory needs an fsync."""
        return any([index.take_created() for index in self._indexes()])

    def mark_unflushed(self) -> None:
        """A flush that took `unflushed_paths` did not sync them: the next one must."""
        for index in self._indexes():
            index.unflushed = True

    def _indexes(self) -> tuple[_IndexFile, ...]:
        return self.offset_index, self.time_index, self.txn_index

    def _pread(self, size: int, position: int) -> bytes:
        path = self._path
        try:
            fd = self.files.acquire(path, LOG_FLAGS)
        except FileNotFoundError:
            if self._path == path:
                raise
            path = self._path  # renamed by change_suffix (in another thread) since we looked
            fd = self.files.acquire(path, LOG_FLAGS)
        try:
            return _pread_exact(fd, size, position)
        finally:
            self.files.release(path, fd)

    def _truncate_file(self, size: int) -> None:
        os.truncate(self._path, size)

    # --- appends -----------------------------------------------------------------------------------------------
    def can_hold(self, last_offset: int) -> bool:
        return last_offset - self.base_offset <= _MAX_REL_OFFSET

    def append(self, data: bytes | bytearray | memoryview, batches: list[BatchEntry]) -> None:
        """Append whole batches (already offset-patched) and index them.

        All or nothing: if writing the batches or their index entries fails (a full disk), the files are cut back
        to where they were and the in-memory state restored before the OSError is raised, so no partial batch can
        later be read or recovered as valid. If that undo fails too, RollbackFailedError is raised (the segment's
        state is then unknown: its directory must go offline)."""
        position = self.size
        # Tracking writes to a file (and so may fail) only when it adds index entries: what to restore then.
        saved = self._tracking_state() if self._bytes_since_index + len(data) > self.index_interval_bytes else None
        fd = self.files.acquire(self._path, LOG_FLAGS)
        try:
            written = os.write(fd, data)
            if written < len(data):  # a short write (a signal, a full pipe of a FUSE mount...): write the rest
                view = memoryview(data)
                while written < len(view):
                    written += os.write(fd, view[written:])
            for rel, size, last_offset, max_ts in batches:
                self._track(position + rel, size, last_offset, max_ts, is_control_at(data, rel))
        except BaseException as err:
            try:
                os.ftruncate(fd, position)
                if saved is not None:
                    self._restore(saved)
            except OSError as undo:
                raise RollbackFailedError(f"{self.log_path}: cannot undo a failed append ({undo!r})") from err
            raise
        finally:
            self.files.release(self._path, fd)
        self.size = position + written

    def _tracking_state(self) -> _TrackingState:
        return (self.next_offset, self.max_timestamp, self.offset_of_max_timestamp, self.first_batch_timestamp,
                self._bytes_since_index, self.batch_count, self._tracked_bytes, len(self.offset_index),
                len(self.time_index), len(self._controls))

    def _restore(self, saved: _TrackingState) -> None:
        (self.next_offset, self.max_timestamp, self.offset_of_max_timestamp, self.first_batch_timestamp,
         self._bytes_since_index, self.batch_count, self._tracked_bytes, offsets, times, controls) = saved
        del self._controls[controls:]
        self.offset_index.rollback(offsets)
        self.time_index.rollback(times)

    def _track(self, position: int, size: int, last_offset: int, max_timestamp: int, control: bool) -> None:
        if control:
            self._controls.append(position)
        if self.first_batch_timestamp is None:
            self.first_batch_timestamp = max_timestamp
        if max_timestamp > self.max_timestamp:
            self.max_timestamp = max_timestamp
            self.offset_of_max_timestamp = last_offset
        if self._bytes_since_index > self.index_interval_bytes:
            self.offset_index.append(last_offset, position)
            if self.max_timestamp >= 0:
                self.time_index.maybe_append(self.max_timestamp, self.offset_of_max_timestamp)
            self._bytes_since_index = 0
        self._bytes_since_index += size
        self.next_offset = last_offset + 1
        self.batch_count += 1
        self._tracked_bytes += size

    @property
    def average_batch_size(self) -> int:
        return self._tracked_bytes // self.batch_count if self.batch_count else 0

    def seal(self) -> None:
        """Called when the segment stops being active: make the time index end with the segment's max."""
        if self.max_timestamp >= 0:
            self.time_index.maybe_append(self.max_timestamp, self.offset_of_max_timestamp)

    # --- reads -------------------------------------------------------------------------------------------------
    def read_bytes(self, position: int, size: int) -> bytes:
        return self._pread(size, position)

    def iter_headers(self, start: int = 0, chunk: int = SCAN_CHUNK) -> Iterator[tuple[int, BatchHeader]]:
        """(position, header) of each whole batch from `start` (a batch boundary), reading `chunk` bytes at a time
        (64 KiB; THREAD_SCAN_CHUNK in worker threads)."""
        end = self.size
        pos = start
        buf = b""
        buf_start = pos
        while pos + HEADER_SIZE <= end:
            off = pos - buf_start
            if off + HEADER_SIZE > len(buf):
                buf = self._pread(min(chunk, end - pos), pos)
                buf_start, off = pos, 0
                if len(buf) < HEADER_SIZE:
                    return
            header = read_header(buf, off)
            if header.batch_length < MIN_BATCH_LENGTH or pos + header.batch_length + LOG_OVERHEAD > end:
                return
            yield pos, header
            pos += header.batch_length + LOG_OVERHEAD

    def find_batch(self, offset: int, start: int | None = None) -> tuple[int, BatchHeader] | None:
        """Position and header of the first batch whose last offset >= `offset`."""
        if start is None:
            start = self.offset_index.lookup(offset)[1]
        for pos, header in self.iter_headers(start):
            if header.base_offset + header.last_offset_delta >= offset:
                return pos, header
        return None

    def find_by_timestamp(self, timestamp: int, min_offset: int) -> tuple[int, BatchHeader] | None:
        """The first batch with maxTimestamp >= `timestamp` and last offset >= `min_offset`."""
        start = self.offset_index.lookup(min_offset)[1]
        before = self.time_index.lookup_before(timestamp)
        if before is not None:
            start = max(start, self.offset_index.lookup(before)[1])
        for pos, header in self.iter_headers(start):
            if header.max_timestamp >= timestamp and header.base_offset + header.last_offset_delta >= min_offset:
                return pos, header
        return None

    def read(self, offset: int, max_bytes: int, min_one_batch: bool, bounds: list[BatchBound] | None = None,
             run_records: int = 0) -> tuple[bytes | memoryview, int, int]:
        """Whole batches starting with the batch holding `offset`, at most `max_bytes` unless the first batch is
        bigger and `min_one_batch` (KIP-74). Returns (data, position, first batch base offset or -1). `bounds`
        receives (position in data, base offset, last offset, size, attributes) of each batch returned; with
        `run_records`, one such entry for all of them (attributes 0) when none is a control batch and they span
        fewer than `run_records` offsets (a share acquisition takes them whole: it need not walk each batch).

        Usually one pread: from the index entry at or before `offset`, read max_bytes + index interval + slack,
        walk the headers in memory to the target batch, then cut at the last whole batch within max_bytes. With
        large batches, the headers are read first and then only the batches returned (`_read_large`).
        """
        end = self.size
        _, start = self.offset_index.lookup(offset)
        if start >= end:
            return b"", end, -1
        # the target batch usually starts within an index interval plus one batch of the entry found
        ahead = self.index_interval_bytes + 2 * self.average_batch_size + _READ_SLACK
        if ahead > _MAX_READ_AHEAD:
            return self._read_large(offset, start, max_bytes, min_one_batch, bounds)
        found: tuple[int, BatchHeader] | None = None
        buf = self._pread(min(end - start, max_bytes + ahead), start)
        off = 0
        while off + HEADER_SIZE <= len(buf):
            header = read_header(buf, off)
            if header.batch_length < MIN_BATCH_LENGTH:
                return b"", start + off, -1
            if header.base_offset + header.last_offset_delta >= offset:
                found = start + off, header
                break
            off += header.batch_length + LOG_OVERHEAD
        if found is None and start + off < end:
            found = self.find_batch(offset, start + off)
        if found is None:
            return b"", end, -1
        first_pos, first = found
        first_size = first.batch_length + LOG_OVERHEAD
        if first_size > max_bytes:
            if not min_one_batch:
                return b"", first_pos, first.base_offset
            limit = first_pos + first_size
        else:
            limit = min(end, first_pos + max_bytes)
        if start + len(buf) >= limit and first_pos >= start:
            region, region_start = buf, start
        else:
            region, region_start = self._pread(limit - first_pos, first_pos), first_pos
        if bounds is None:
            q = self._cut(region, region_start, self._cut_start(first_pos, limit), limit)[0]
        elif run_records > 0 and self._tracks_controls():
            walk = self._cut_start(first_pos, limit)
            q, last = self._cut(region, region_start, walk, limit)
            if last < 0:  # the indexed batch there runs past the limit: from the one before it (ends before it)
                q, last = self._cut(region, region_start, self._cut_start(first_pos, walk), limit)
            # a control batch past the cut (one that does not fit) is not part of the read
            if 0 <= last < first.base_offset + run_records and self._free_of_control(first_pos, q):
                bounds.append((0, first.base_offset, last, q - first_pos, 0))
            else:  # too many offsets for one run, or a control batch among them: each batch
                q = self._cut(region, region_start, first_pos, limit, bounds)[0]
        else:
            q = self._cut(region, region_start, first_pos, limit, bounds)[0]
        lo, hi = first_pos - region_start, q - region_start
        # a view of the read, not a copy: the batches are sent as they are (the read stays alive meanwhile)
        data = region if (lo == 0 and hi == len(region)) else memoryview(region)[lo:hi]
        return data, first_pos, first.base_offset

    def _cut_start(self, first_pos: int, limit: int) -> int:
        """Where to walk from to find the cut at `limit`: the last indexed batch starting inside it (batches
        before it lie whole before it), not the first batch of the read."""
        positions = self.offset_index.pos
        i = bisect_right(positions, limit - HEADER_SIZE) - 1
        return positions[i] if i >= 0 and positions[i] > first_pos else first_pos

    @staticmethod
    def _cut(region: bytes, region_start: int, q: int, limit: int, bounds: list[BatchBound] | None = None
             ) -> tuple[int, int]:
        """Walk whole batches from position `q` (a batch start) up to `limit`: (the position after the last
        whole one, its last offset or -1 when none fits). `bounds` receives each batch's (position from the
        walk's start, base offset, last offset, size, attributes)."""
        first_pos, last = q, -1
        unpack = BATCH_BOUNDS.unpack_from
        while q + HEADER_SIZE <= limit:
            base, length, attributes, delta = unpack(region, q - region_start)
            size = length + LOG_OVERHEAD
            if size < HEADER_SIZE or q + size > limit:
                break
            last = base + delta
            if bounds is not None:  # where each batch is and which offsets it holds
                bounds.append((q - first_pos, base, last, size, attributes))
            q += size
        return q, last

    def _tracks_controls(self) -> bool:
        """Every byte of the segment went through `_track` (written since it was opened, or recovered from its
        start), so it knows where all its control batches are."""
        return self._tracked_bytes == self.size

    def _free_of_control(self, start: int, end: int) -> bool:
        """True when positions [start, end) are known to hold no control batch (see `_tracks_controls`)."""
        if not self._tracks_controls():
            return False
        controls = self._controls
        return not controls or bisect_left(controls, start) == bisect_left(controls, end)

    def _read_large(self, offset: int, start: int, max_bytes: int, min_one_batch: bool, bounds: list[BatchBound] | None
                    ) -> tuple[bytes | memoryview, int, int]:
        """`read` among large batches (1 MB producer batches): one walk over the headers from the index entry
        (a _HEADER_CHUNK pread per batch) finds the first batch and the cut, then exactly the whole batches
        returned are read. Reading an index interval and two batches ahead, and past the cut, would read
        megabytes only to drop them."""
        taken: list[tuple[int, BatchHeader]] = []
        for pos, header in self.iter_headers(start, _HEADER_CHUNK):
            if header.base_offset + header.last_offset_delta < offset:
                continue  # before the batch holding `offset`
            first_pos = taken[0][0] if taken else pos
            if pos + header.batch_length + LOG_OVERHEAD - first_pos > max_bytes and (taken or not min_one_batch):
                if not taken:
                    return b"", pos, header.base_offset  # the first batch is larger than max_bytes
                break
            taken.append((pos, header))
        if not taken:
            return b"", self.size, -1
        (first_pos, first), (last_pos, last) = taken[0], taken[-1]
        data = self._pread(last_pos + last.batch_length + LOG_OVERHEAD - first_pos, first_pos)
        if bounds is not None:
            bounds.extend((pos - first_pos, h.base_offset, h.base_offset + h.last_offset_delta,
                           h.batch_length + LOG_OVERHEAD, h.attributes) for pos, h in taken)
        return data, first_pos, first.base_offset

    # --- recovery and truncation -------------------------------------------------------------------------------
    def recover(self, *, strict: bool = False, last: bool = True) -> int:
        """Validate the tail batch by batch (CRC-32C) from the last trustworthy index entry, truncate a torn or
        corrupt tail with its index entries, and rebuild the in-memory state. Returns bytes truncated.

        `strict`: only a torn tail (see `_torn_tail`) of the `last` segment may be truncated; any other invalid
        data raises LogCorruptionError and the file is left untouched."""
        size = os.stat(self._path).st_size
        self.size = size
        index = self.offset_index
        index.truncate_to_position(size)
        i = len(index) - 1
        start_header: BatchHeader | None = None
        start_pos = 0
        while i >= 0:
            entry_offset, entry_pos = index.entry_at(i)
            raw = self._pread(HEADER_SIZE, entry_pos)
            if len(raw) == HEADER_SIZE:
                h = read_header(raw)
                if (h.magic == MAGIC and h.batch_length >= MIN_BATCH_LENGTH
                        and h.base_offset + h.last_offset_delta == entry_offset
                        and entry_pos + h.batch_length + LOG_OVERHEAD <= size):
                    start_header, start_pos = h, entry_pos
                    break
            i -= 1
        index.truncate_entries(i + 1)
        self._bytes_since_index = 0
        self.batch_count = self._tracked_bytes = 0
        self._controls = []
        self.first_batch_timestamp = None
        # The time index is cut only after the scan, past the last valid offset: its entries for offsets still in
        # the log stay, the last one (the max timestamp written when the segment was sealed) included. Cutting it
        # back to the offset index's last entry first would rewrite every sealed segment's .timeindex at each
        # start. The scan's own entries are added only above the kept ones (TimeIndex.maybe_append).
        if start_header is None:
            self.max_timestamp, self.offset_of_max_timestamp = -1, -1
            self.next_offset = self.base_offset
        else:
            start_last = start_header.base_offset + start_header.last_offset_delta
            self.max_timestamp, self.offset_of_max_timestamp = (
                self.time_index.last_at_or_before(start_last) or (-1, -1))
            self.next_offset = start_header.base_offset
            first = self._pread(HEADER_SIZE, 0)
            if len(first) == HEADER_SIZE:
                self.first_batch_timestamp = read_header(first).max_timestamp
        valid_end = self._scan_valid(start_pos, size)
        if valid_end < size and strict and not (last and self._torn_tail(valid_end, size)):
            raise LogCorruptionError(
                f"{self.log_path}: invalid record batch at position {valid_end} with {size - valid_end} more bytes "
                "after it (not a torn tail); refusing to truncate")
        if valid_end < size:
            self._truncate_file(valid_end)
            self.size = valid_end
        self.time_index.truncate_after_offset(self.next_offset - 1)
        # aborted transactions whose marker was cut off with a torn tail go too (the scan of the transaction
        # state adds back entries missing for markers still in the log)
        self.txn_index.truncate_to(self.next_offset)
        self.durable_size = self.size
        return size - valid_end

    def _torn_tail(self, pos: int, size: int) -> bool:
        """What an interrupted append leaves: a partial header, a last batch that reaches (or would run past) the
        end of the file, or zeros to the end of the file."""
        raw = self._pread(HEADER_SIZE, pos)
        if len(raw) < HEADER_SIZE:
            return True
        header = read_header(raw)
        if header.batch_length >= MIN_BATCH_LENGTH and pos + header.batch_length + LOG_OVERHEAD >= size:
            return True
        while pos < size:
            chunk = self._pread(min(_RECOVERY_CHUNK, size - pos), pos)
            if not chunk or chunk.count(0) != len(chunk):
                return False
            pos += len(chunk)
        return True

    def _scan_valid(self, pos: int, size: int) -> int:
        buf = b""
        buf_start = pos
        while pos < size:
            off = pos - buf_start
            if off + HEADER_SIZE > len(buf):
                buf = self._pread(min(_RECOVERY_CHUNK, size - pos), pos)
                buf_start, off = pos, 0
                if len(buf) < HEADER_SIZE:
                    return pos
            h = read_header(buf, off)
            batch_size = h.batch_length + LOG_OVERHEAD
            if (h.magic != MAGIC or h.batch_length < MIN_BATCH_LENGTH or pos + batch_size > size
                    or h.last_offset_delta < 0 or h.base_offset < self.next_offset
                    or not self.can_hold(h.base_offset + h.last_offset_delta)):
                return pos
            if off + batch_size > len(buf):
                buf = self._pread(max(batch_size, min(_RECOVERY_CHUNK, size - pos)), pos)
                buf_start, off = pos, 0
                if len(buf) < batch_size:
                    return pos
            if crc32c(memoryview(buf)[off + 21:off + batch_size]) != h.crc:
                return pos
            self._track(pos, batch_size, h.base_offset + h.last_offset_delta, h.max_timestamp, h.is_control)
            pos += batch_size
        return pos

    def truncate_to_offset(self, offset: int) -> None:
        """Drop the batch holding `offset` and everything after it."""
        found = self.find_batch(offset)
        if found is None:
            return
        position = found[0]
        self._truncate_file(position)
        self.offset_index.truncate_to_position(position)
        self.time_index.truncate_after_offset(offset - 1)
        self.recover()

    # --- lifecycle ---------------------------------------------------------------------------------------------
    def largest_timestamp_ms(self) -> int:
        """Largest record timestamp, or the file's modification time when no batch carries one (as Kafka)."""
        if self.max_timestamp >= 0:
            return self.max_timestamp
        if self.closed:
            return self.created_ms
        try:
            return int(os.stat(self._path).st_mtime * 1000)
        except FileNotFoundError:
            return self.created_ms

    def change_suffix(self, suffix: str, after_log: Callable[[], None] | None = None) -> None:
        """Rename the segment's files to end in `suffix` (the log file first, as Kafka), while readers may use it
        from another thread: the log's descriptor stays pinned in the cache under its old name until the new name
        is published, so a reader holding either name reads the same file. An index file that does not exist
        (never written) is skipped."""
        if suffix == self.suffix:
            return
        old = self._path
        new = old[:len(old) - len(self.suffix)] + suffix
        fd = self.files.acquire(old, LOG_FLAGS)
        try:
            os.rename(old, new)
            self._path = new
            self.log_path = Path(new)
            self.files.forget(old)
        finally:
            self.files.release(old, fd)
        if after_log is not None:
            after_log()
        for index in (self.offset_index, self.time_index, self.txn_index):
            target = index.path[:len(index.path) - len(self.suffix)] + suffix
            try:
                os.rename(index.path, target)
            except FileNotFoundError:  # an empty index has no file: no stale one may stand in for it
                Path(target).unlink(missing_ok=True)
            self.files.forget(index.path)
            index.path = target
        self.suffix = suffix

    def close(self) -> None:
        if self.closed:
            return
        self.closed = True
        self.offset_index.close()
        self.time_index.close()
        self.txn_index.close()
        self.files.forget(self._path)

    def delete(self) -> None:
        self.close()
        for path in (self.log_path, Path(self.offset_index.path), Path(self.time_index.path),
                     Path(self.txn_index.path)):
            path.unlink(missing_ok=True)
