"""PartitionLog: one partition's log, a list of segments in `<log.dir>/<topic>-<partition>/`.

A log is opened (and recovered) by its constructor, which may run in a worker thread; after that all methods
except `flush()` run on the event loop. `flush()` may run in a worker thread concurrently with appends, rolls and
retention: under a short lock it takes the set of segments written since the last flush and pins their file
descriptors in the shared `FileCache`, then fsyncs them without the lock (a segment closed or deleted in the
meantime is harmless: a pinned descriptor stays open until released).
"""

from __future__ import annotations

import os
import random
import threading
import time
from bisect import bisect_right
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

import structlog

from broker import durable_files
from broker.log import swap
from broker.log.config import LogConfig
from broker.log.dir_failure import KafkaStorageError, LogDirFailureChannel, is_transient
from broker.log.files import SHARED, FileCache
from broker.log.fsync import fsync_all
from broker.log.segment import BatchBound, BatchEntry, LogCorruptionError, RollbackFailedError, Segment
from broker.log.txn_index import AbortedTxn, collect_across_segments
from protocol import records as rec

log = structlog.get_logger(__name__)


class OffsetOutOfRangeError(Exception):
    """A read or DeleteRecords offset outside [log start offset, log end offset] (OFFSET_OUT_OF_RANGE)."""


@dataclass(slots=True)
class AppendInfo:
    base_offset: int
    last_offset: int
    log_append_time: int  # -1 unless LogAppendTime was applied
    max_timestamp: int
    offset_of_max_timestamp: int  # last offset of the batch holding max_timestamp
    log_start_offset: int
    size: int  # bytes appended
    batches: int


@dataclass(slots=True)
class ReadResult:
    data: bytes | memoryview  # whole batches (a view of the read); b"" when nothing fits or nothing is there
    first_offset: int = -1  # base offset of the first batch returned (may be < the offset asked for)
    segment_base_offset: int = -1
    position: int = -1  # file position of `data` in the segment (for sendfile)
    high_watermark: int = -1
    log_start_offset: int = -1


class PartitionLog:
    def __init__(
        self,
        directory: Path | str,
        config: LogConfig | Mapping[str, object] | None = None,
        *,
        log_start_offset: int = 0,
        clock: Callable[[], float] = time.time,
        leader_epoch: int | None = None,
        on_log_start_offset_change: Callable[[PartitionLog], None] | None = None,
        delete_segment: Callable[[Segment], None] | None = None,
        strict_recovery: bool = False,
        files: FileCache | None = None,
        failures: LogDirFailureChannel | None = None,
    ) -> None:
        """Open (recovering) or create the log in `directory`. `log_start_offset` is the checkpointed value.

        `strict_recovery` (the metadata journal): recovery truncates only a torn tail of the last segment; any
        other invalid data raises LogCorruptionError and nothing is truncated or deleted. `failures` is the log
        directory's failure channel (shared by every log in it): once it is offline, append, read and flush
        raise KafkaStorageError."""
        self.directory = Path(directory)
        self.config = LogConfig.coerce(config)
        self._clock = clock
        self._random = random.Random()
        self._jitter = (-1, 0)  # (base offset of the active segment, its roll jitter in ms): see roll_jitter_ms
        self.leader_epoch = leader_epoch
        self.on_log_start_offset_change = on_log_start_offset_change
        # removes a (closed) segment dropped by retention or DeleteRecords; LogManager's moves the unlinks off
        # the event loop
        self._delete_segment = delete_segment or Segment.delete
        self._lock = threading.Lock()
        self._dirty: set[Segment] = set()
        self._dir_dirty = False
        self._parent_dirty = False  # the directory's own entry, in the log directory, needs an fsync
        # Whether this directory's entries and its entry in the log directory are on disk is not known at open: it
        # was just made, or a process that crashed may have made it without fsyncs. The first append has the flush
        # that makes it durable fsync both; a log never written costs nothing (flushing thousands of empty new
        # partitions at shutdown would cost two fsyncs each for nothing).
        self._dir_new = True
        self.closed = False
        self.directory.mkdir(parents=True, exist_ok=True)
        self._segments: list[Segment] = []
        self._bases: list[int] = []
        self._strict = strict_recovery
        self.files = files if files is not None else SHARED  # an empty cache is falsy (__len__)
        self.cleaning = False  # the log cleaner is working on it: retention waits (as Kafka's pauses)
        self.failures = failures or LogDirFailureChannel(str(self.directory))
        try:
            self._open_segments(log_start_offset)
        except BaseException:
            for segment in self._segments:
                segment.close()
            raise
        # some segment has (or had) a .txnindex entry: read_committed fetches must look them up (a flag, never
        # reset, so logs that never saw an abort skip the walk over their segments)
        self.has_aborted_txns = any(len(s.txn_index) for s in self._segments)
        self.log_start_offset = max(log_start_offset, self._segments[0].base_offset)
        if self.log_start_offset > self.log_end_offset:
            self.log_start_offset = self.log_end_offset

    # --- opening and recovery ----------------------------------------------------------------------------------
    def _open_segments(self, log_start_offset: int) -> None:
        if not self._strict:  # the metadata journal is never cleaned
            swap.complete_interrupted_swaps(self.directory, self.files)
        bases = []
        for path in self.directory.iterdir():
            if path.suffix == ".log" and path.stem.isdigit():
                bases.append(int(path.stem))
            elif path.suffix in (".deleted", ".cleaned", ".swap") or path.name.endswith(".tmp"):
                path.unlink(missing_ok=True)
        bases.sort()
        interval = self.config.index_interval_bytes
        for i, base in enumerate(bases):
            segment = Segment(self.directory, base, index_interval_bytes=interval, files=self.files)
            try:
                truncated = segment.recover(strict=self._strict, last=i + 1 == len(bases))
            except BaseException:
                segment.close()
                raise
            if self._strict and self._segments and segment.base_offset < self._segments[-1].next_offset:
                segment.close()
                raise LogCorruptionError(f"{segment.log_path} overlaps the segment before it; refusing to drop it")
            if self._segments and segment.base_offset < self._segments[-1].next_offset:
                log.warning("segment overlaps its predecessor; dropping it and later segments",
                            dir=str(self.directory), segment=segment.log_path.name)
                segment.delete()
                self._drop_files(bases[i + 1:])
                break
            self._segments.append(segment)
            if truncated:
                log.warning("truncated torn log tail", dir=str(self.directory), segment=segment.log_path.name,
                            bytes=truncated, next_offset=segment.next_offset)
                if i + 1 < len(bases):
                    # offsets after a hole cannot be trusted: later segments go (as Kafka's recovery does)
                    self._drop_files(bases[i + 1:])
                    break
        # stray index files without a .log
        live = {s.base_offset for s in self._segments}
        for path in self.directory.iterdir():
            if path.suffix in (".index", ".timeindex", ".txnindex") and path.stem.isdigit() and int(path.stem) not in live:
                path.unlink(missing_ok=True)
        # An empty segment (one the cleaner emptied) stays: it holds the log start offset where it was.
        if not self._segments:
            self._segments.append(Segment(self.directory, max(0, log_start_offset), index_interval_bytes=interval,
                                          files=self.files))
        self._bases = [s.base_offset for s in self._segments]

    def _drop_files(self, bases: list[int]) -> None:
        for base in bases:
            Segment(self.directory, base, files=self.files).delete()

    # --- offsets -----------------------------------------------------------------------------------------------
    @property
    def active(self) -> Segment:
        return self._segments[-1]

    @property
    def log_end_offset(self) -> int:
        return self._segments[-1].next_offset

    @property
    def high_watermark(self) -> int:
        return self._segments[-1].next_offset

    @property
    def size_bytes(self) -> int:
        segments = self._segments
        return segments[0].size if len(segments) == 1 else sum(s.size for s in segments)

    @property
    def segments(self) -> list[Segment]:
        return list(self._segments)

    def reconfigure(self, config: LogConfig | Mapping[str, object]) -> None:
        self.config = LogConfig.coerce(config, self.config)
        for segment in self._segments:
            segment.index_interval_bytes = self.config.index_interval_bytes

    # --- append ------------------------------------------------------------------------------------------------
    def append(
        self,
        batches: bytes | bytearray | memoryview,
        *,
        log_append_time: int | None = None,
        headers: list[rec.BatchHeader] | None = None,
    ) -> AppendInfo:
        """Validate (unless `headers` from validate_batches are given), assign offsets and append.

        Raises protocol.records.CorruptRecordError / InvalidRecordError. Control batches are accepted (the
        client check belongs to the produce path). Not fsynced: see flush() and GroupCommitFlusher.
        """
        if self.closed:
            raise ValueError("log is closed")
        self.failures.check()
        buf = bytearray(batches)
        if headers is None:
            headers = rec.validate_batches(buf, allow_control=True)
        if not headers:
            raise rec.InvalidRecordError("no record batch to append")
        first = offset = self.log_end_offset
        pos = 0
        entries: list[BatchEntry] = []
        max_ts, offset_of_max = -1, -1
        epoch = self.leader_epoch
        for h in headers:
            size = h.batch_length + rec.LOG_OVERHEAD
            if epoch is not None:
                rec.patch_base_offset_and_leader_epoch(buf, pos, offset, h.batch_length, epoch)
            else:
                rec.patch_base_offset(buf, pos, offset)
            ts = h.max_timestamp
            if log_append_time is not None:
                rec.patch_log_append_time(buf, pos, log_append_time)
                ts = log_append_time
            last = offset + h.last_offset_delta
            if ts > max_ts:
                max_ts, offset_of_max = ts, last
            entries.append((pos, size, last, ts))
            offset = last + 1
            pos += size
        if pos != len(buf):
            raise rec.CorruptRecordError("headers do not match the appended bytes")
        try:
            self._maybe_roll(len(buf), offset - 1, max_ts)
            segment = self.active
            segment.append(buf, entries)
        except OSError as err:
            if isinstance(err, RollbackFailedError) or not is_transient(err):
                self.failures.fail(f"append to {self.directory} failed", err)
                raise KafkaStorageError(f"append to {self.directory} failed: {err!r}") from err
            # undone by Segment.append: the log is as it was and later appends may succeed
            log.warning("append failed and was undone", dir=str(self.directory), error=repr(err))
            raise
        with self._lock:
            self._dirty.add(segment)
            if self._dir_new:
                self._dir_dirty = self._parent_dirty = True
                self._dir_new = False
        return AppendInfo(first, offset - 1, -1 if log_append_time is None else log_append_time, max_ts,
                          offset_of_max, self.log_start_offset, len(buf), len(headers))

    def _maybe_roll(self, incoming: int, last_offset: int, max_ts: int) -> None:
        segment = self.active
        if segment.empty:
            return
        cfg = self.config
        roll = segment.size + incoming > cfg.segment_bytes or not segment.can_hold(last_offset)
        if not roll:
            if segment.first_batch_timestamp is not None and segment.first_batch_timestamp >= 0 and max_ts >= 0:
                waited = max_ts - segment.first_batch_timestamp
            else:
                waited = int(self._clock() * 1000) - segment.created_ms
            roll = waited > cfg.max_segment_ms - self.roll_jitter_ms()
        if roll:
            self.roll()

    def roll_jitter_ms(self) -> int:
        """How much before the max segment time the active segment rolls (Kafka's rollJitterMs): drawn once per
        segment, uniformly below min(segment.jitter.ms, segment.ms), so partitions created together do not all roll
        at once."""
        base = self.active.base_offset
        if self._jitter[0] != base:
            jitter = min(self.config.segment_jitter_ms, self.config.segment_ms)
            self._jitter = (base, self._random.randrange(jitter) if jitter > 0 else 0)
        return self._jitter[1]

    def roll(self) -> Segment:
        """Start a new active segment at the log end offset (no-op if the active one is empty)."""
        current = self.active
        if current.empty:
            return current
        current.seal()
        segment = Segment(self.directory, self.log_end_offset, index_interval_bytes=self.config.index_interval_bytes,
                          files=self.files)
        segment.created_ms = int(self._clock() * 1000)
        self._segments.append(segment)
        self._bases.append(segment.base_offset)
        with self._lock:
            self._dirty.add(current)
            self._dir_dirty = True
        return segment

    # --- reads -------------------------------------------------------------------------------------------------
    def _segment_for(self, offset: int) -> int:
        return max(0, bisect_right(self._bases, offset) - 1)

    def read(self, offset: int, max_bytes: int, *, min_one_batch: bool = True, bounds: list[BatchBound] | None = None,
             run_records: int = 0) -> ReadResult:
        """Whole batches from the batch holding `offset`, up to `max_bytes` (more for a single first batch if
        `min_one_batch`, KIP-74), from one segment. Raises OffsetOutOfRangeError outside [start, end], and
        KafkaStorageError once the log directory is offline. `bounds` and `run_records`: see Segment.read (a
        share acquisition needs the batches' offsets)."""
        self.failures.check()
        if offset < self.log_start_offset or offset > self.log_end_offset:
            raise OffsetOutOfRangeError(
                f"offset {offset} is outside [{self.log_start_offset}, {self.log_end_offset}]")
        hw, start = self.high_watermark, self.log_start_offset
        i = self._segment_for(offset)
        while i < len(self._segments):
            segment = self._segments[i]
            if offset < segment.next_offset:
                data, position, first = segment.read(offset, max_bytes, min_one_batch, bounds, run_records)
                if first >= 0:
                    return ReadResult(data, first, segment.base_offset, position, hw, start)
                # nothing at or after `offset` here: a compacted segment's tail (or all of it) was removed
            i += 1
        return ReadResult(b"", -1, -1, -1, hw, start)

    def batch_position(self, offset: int) -> tuple[int, int] | None:
        """(segment base offset, file position) of the batch holding `offset` (or the first one after it in that
        segment), or None when the segment has none."""
        segment = self._segments[self._segment_for(offset)]
        found = segment.find_batch(offset)
        return None if found is None else (segment.base_offset, found[0])

    def fetch_upper_bound(self, segment_base: int, position: int, size: int) -> int:
        """An offset above everything in the `size` bytes read at `position` of the segment starting at
        `segment_base` (Kafka's LogSegment.fetchUpperBoundOffset: the first offset-index entry past them), else the
        segment's next offset."""
        segment = self._segments[self._segment_for(segment_base)]
        index = segment.offset_index
        i = bisect_right(index.pos, position + size - 1)
        if i < len(index.pos):
            return segment.base_offset + index.rel[i]
        return segment.next_offset

    # --- aborted transactions (.txnindex) ----------------------------------------------------------------------
    def collect_aborted_txns(self, fetch_offset: int, upper_bound_offset: int) -> list[AbortedTxn]:
        """The aborted transactions overlapping [fetch_offset, upper_bound_offset) (Kafka's
        LocalLog.collectAbortedTransactions: the segment holding `fetch_offset` and the later ones, until an
        entry's LSO reaches the upper bound)."""
        if not self.has_aborted_txns:
            return []
        i = self._segment_for(fetch_offset)
        return collect_across_segments((s.txn_index.entries for s in self._segments[i:]), fetch_offset,
                                       upper_bound_offset)

    def append_aborted_txn(self, txn: AbortedTxn) -> None:
        """Add an aborted transaction to the `.txnindex` of the segment holding its marker (flushed with the
        segment). Raises OSError if the write fails."""
        segment = self._segments[self._segment_for(txn.last_offset)]
        segment.txn_index.append(txn)
        self.has_aborted_txns = True
        with self._lock:
            self._dirty.add(segment)

    def iter_batch_headers(self, start_offset: int | None = None) -> Iterator[rec.BatchHeader]:
        """Headers of all batches from the one holding `start_offset` (default: log start offset).
        KafkaStorageError once the log directory is offline (checked when iteration starts)."""
        self.failures.check()
        offset = self.log_start_offset if start_offset is None else start_offset
        for segment in list(self._segments):
            if segment.next_offset <= offset:
                continue
            found = segment.find_batch(offset)
            if found is None:
                continue
            for _pos, header in segment.iter_headers(found[0]):
                yield header

    def offset_for_timestamp(self, timestamp: int) -> tuple[int, int] | None:
        """(offset, timestamp) of the first record at or after the log start offset with timestamp >= `timestamp`,
        searched as Kafka's UnifiedLog.fetchOffsetByTimestamp: in the first segment whose largest timestamp is >=
        `timestamp` only (None if that segment has no such record), from the batch the time index points to.

        A batch that cannot be decoded (stored before produce checked records) answers with its first offset and
        maxTimestamp. KafkaStorageError once the log directory is offline.
        """
        self.failures.check()
        start = self.log_start_offset
        for segment in self._segments:
            if segment.next_offset <= start or segment.max_timestamp < timestamp:
                continue
            found = segment.find_by_timestamp(timestamp, start)
            if found is None:
                return None
            for pos, header in segment.iter_headers(found[0]):
                if header.max_timestamp < timestamp or header.base_offset + header.last_offset_delta < start:
                    continue
                records = self._records(segment, pos, header)
                if not records:
                    return max(header.base_offset, start), header.max_timestamp
                for record in records:
                    if record.offset >= start and record.timestamp is not None and record.timestamp >= timestamp:
                        return record.offset, record.timestamp
            return None
        return None

    def max_timestamp_offset(self) -> tuple[int, int] | None:
        """(offset, timestamp) of the record with the largest timestamp (the first such record) in the segments
        kept, or None. As Kafka's, the log start offset is not looked at: after DeleteRecords the record may be
        below it. KafkaStorageError once the log directory is offline."""
        self.failures.check()
        best: Segment | None = None
        for segment in self._segments:
            if segment.max_timestamp >= 0 and (best is None or segment.max_timestamp > best.max_timestamp):
                best = segment
        if best is None:
            return None
        ts, last = best.max_timestamp, best.offset_of_max_timestamp
        found = best.find_batch(last)
        if found is not None:
            pos, header = found
            for record in self._records(best, pos, header):
                if record.timestamp == ts:
                    return record.offset, ts
        return last, ts

    def _records(self, segment: Segment, pos: int, header: rec.BatchHeader) -> list[rec.Record]:
        """The batch's records, or [] (logged) when they cannot be decoded."""
        batch = segment.read_bytes(pos, header.batch_length + rec.LOG_OVERHEAD)
        try:
            return rec.decode_records(batch)
        except rec.RecordError as err:
            log.warning("undecodable batch; answering at batch granularity", dir=str(self.directory),
                        offset=header.base_offset, error=str(err))
            return []

    # --- compaction --------------------------------------------------------------------------------------------
    def install_cleaned(self, cleaned: Segment, olds: list[Segment]) -> bool:
        """Serve `cleaned` in place of `olds` (consecutive segments of this log, the first with the same base
        offset). False, changing nothing, if they are no longer all there (deleted by retention, log closed)."""
        if self.closed or not olds or cleaned.base_offset != olds[0].base_offset:
            return False
        try:
            i = next(n for n, s in enumerate(self._segments) if s is olds[0])
        except StopIteration:
            return False
        if i + len(olds) >= len(self._segments) or any(
                a is not b for a, b in zip(self._segments[i:i + len(olds)], olds, strict=True)):
            return False  # gone, or would include the active segment
        self._segments[i:i + len(olds)] = [cleaned]
        self._bases = [s.base_offset for s in self._segments]
        with self._lock:
            for old in olds:
                self._dirty.discard(old)
            self._dir_dirty = True
        return True

    def roll_if_idle(self, now_ms: int) -> bool:
        """Roll a non-empty active segment older than max segment time, without waiting for an append (so the
        records of a quiet compacted topic become cleanable). True if it rolled."""
        segment = self.active
        if segment.empty:
            return False
        start = segment.first_batch_timestamp
        if start is None or start < 0:
            start = segment.created_ms
        if now_ms - start <= self.config.max_segment_ms - self.roll_jitter_ms():
            return False
        self.roll()
        return True

    # --- retention ---------------------------------------------------------------------------------------------
    def delete_records_before(self, offset: int) -> int:
        """Advance the log start offset to `offset` (DeleteRecords); whole segments below it are deleted.
        Returns the new log start offset."""
        if offset > self.log_end_offset or offset < 0:
            raise OffsetOutOfRangeError(f"offset {offset} is outside [0, {self.log_end_offset}]")
        self.failures.check()
        if offset <= self.log_start_offset:
            return self.log_start_offset
        self.log_start_offset = offset
        if not self.cleaning:  # else the next retention pass deletes them
            self._delete_segments_below_start()
        if self.on_log_start_offset_change is not None:
            self.on_log_start_offset_change(self)
        return self.log_start_offset

    def _delete_segments_below_start(self) -> int:
        n = 0
        while len(self._segments) > 1 and self._segments[1].base_offset <= self.log_start_offset:
            self._delete_oldest()
            n += 1
        return n

    def _delete_oldest(self) -> None:
        segment = self._segments.pop(0)
        self._bases.pop(0)
        with self._lock:
            self._dirty.discard(segment)
            self._dir_dirty = True
            segment.close()
        self._delete_segment(segment)
        self.log_start_offset = max(self.log_start_offset, self._segments[0].base_offset)

    def apply_retention(self, now_ms: int | None = None) -> int:
        """Delete old segments by retention.ms and retention.bytes (never the active one). Returns how many."""
        if now_ms is None:
            now_ms = int(self._clock() * 1000)
        if self.cleaning or self.failures.offline:
            return 0  # next time: the cleaner is replacing segments of this log (or never: offline)
        deleted = self._delete_segments_below_start()
        retention_ms = self.config.retention_ms
        if retention_ms >= 0:
            while len(self._segments) > 1 and now_ms - self._segments[0].largest_timestamp_ms() > retention_ms:
                self._delete_oldest()
                deleted += 1
        retention_bytes = self.config.retention_bytes
        if retention_bytes >= 0:
            excess = self.size_bytes - retention_bytes
            while len(self._segments) > 1 and excess - self._segments[0].size >= 0:
                excess -= self._segments[0].size
                self._delete_oldest()
                deleted += 1
        if deleted:
            log.info("retention deleted segments", dir=str(self.directory), segments=deleted,
                     log_start_offset=self.log_start_offset)
        return deleted

    def truncate_to(self, offset: int) -> None:
        """Remove everything at and after `offset` (tools and tests; replicas would use this)."""
        if offset >= self.log_end_offset:
            return
        while len(self._segments) > 1 and self._segments[-1].base_offset >= offset:
            segment = self._segments.pop()
            self._bases.pop()
            with self._lock:
                self._dirty.discard(segment)
                self._dir_dirty = True
                segment.close()
            segment.delete()
        segment = self.active
        segment.truncate_to_offset(offset)
        with self._lock:
            self._dirty.add(segment)
        self.log_start_offset = min(self.log_start_offset, self.log_end_offset)

    # --- durability and lifecycle ------------------------------------------------------------------------------
    @property
    def dirty(self) -> bool:
        return bool(self._dirty) or self._dir_dirty or self._parent_dirty

    def flush(self) -> None:
        """fsync the segments written since the last flush, the directory after files were made or removed in it,
        and the log directory (this directory's name) with the first append after the log was opened.
        Safe to call from a worker thread; returns at once when nothing is dirty.

        A failed fsync is never retried: Linux may have dropped the pages it could not write while still serving
        them from the cache, so a later fsync could "succeed" without them. The log directory goes offline and
        every segment is cut back to what the last successful flush covered (a restart then recovers from bytes
        that really are on disk); KafkaStorageError is raised to everyone waiting on this flush."""
        self.failures.check()
        with self._lock:
            if not self._dirty and not self._dir_dirty and not self._parent_dirty:
                return
            segments = list(self._dirty)
            sizes = [(segment, segment.size) for segment in segments]  # what this flush will cover
            # an index file made by its first entry is a new name in the directory too
            dir_dirty = any([segment.take_created() for segment in segments]) or self._dir_dirty
            parent_dirty = self._parent_dirty
            self._dirty.clear()
            self._dir_dirty = self._parent_dirty = False
            pinned: list[tuple[str, int]] = []
            dir_fds: list[int] = []
            try:
                for segment in segments:
                    if not segment.closed:
                        for path, flags in segment.unflushed_paths():
                            try:
                                pinned.append((path, self.files.acquire(path, flags)))
                            except FileNotFoundError:
                                if path == str(segment.log_path):
                                    raise  # an index file not written yet has nothing to sync
                if dir_dirty:
                    dir_fds.append(os.open(self.directory, os.O_RDONLY))
                if parent_dirty:
                    dir_fds.append(os.open(self.directory.parent, os.O_RDONLY))
            except OSError:
                self._requeue_locked(segments, dir_dirty, parent_dirty)
                self._unpin(pinned, dir_fds)
                raise
        try:
            # all at once (the filesystem shares one journal commit between them), the directories too: the data
            # is acknowledged only once all of them are done, so their order does not matter
            fsync_all([fd for _path, fd in pinned] + dir_fds)
        except OSError as err:
            self.failures.fail(f"fsync in {self.directory} failed", err)
            self._discard_unflushed()
            raise KafkaStorageError(f"fsync in {self.directory} failed: {err!r}") from err
        finally:
            self._unpin(pinned, dir_fds)
        for segment, size in sizes:
            segment.durable_size = max(segment.durable_size, size)

    def _discard_unflushed(self) -> None:
        """Cut every segment back to its durable size (best effort: the directory is offline already)."""
        for segment in list(self._segments):
            try:
                if os.stat(segment.log_path).st_size > segment.durable_size:
                    os.truncate(segment.log_path, segment.durable_size)
                    log.warning("unflushed bytes discarded after a failed fsync", segment=str(segment.log_path),
                                durable_size=segment.durable_size)
            except OSError as err:
                log.error("cannot discard unflushed bytes", segment=str(segment.log_path), error=repr(err))

    def _unpin(self, pinned: list[tuple[str, int]], dir_fds: list[int]) -> None:
        for path, fd in pinned:
            self.files.release(path, fd)
        for fd in dir_fds:
            os.close(fd)

    def _requeue_locked(self, segments: list[Segment], dir_dirty: bool, parent_dirty: bool) -> None:
        for segment in segments:
            segment.mark_unflushed()
        self._dirty.update(s for s in segments if not s.closed)
        self._dir_dirty = self._dir_dirty or dir_dirty
        self._parent_dirty = self._parent_dirty or parent_dirty

    def close(self) -> None:
        if self.closed:
            return
        try:
            if not self.failures.offline:  # an offline log is left as the failure left it
                try:
                    self.active.seal()
                except OSError as err:  # a full disk: the time index lacks its last entry (an optimisation)
                    log.warning("cannot seal the active segment", dir=str(self.directory), error=repr(err))
                self.flush()
        finally:
            self._close_segments()

    def _close_segments(self) -> None:
        # under the lock, so a flush running in a worker thread sees either the open segments or none
        with self._lock:
            self.closed = True
            self._dirty.clear()
            self._dir_dirty = self._parent_dirty = False
            for segment in self._segments:
                segment.close()

    def delete(self, *, sync_parent: bool = True) -> None:
        """Close and remove the partition directory; with `sync_parent`, durably (blocking: an fsync of the log
        directory; callers removing many logs pass False and fsync it once)."""
        self._close_segments()
        durable_files.remove_tree(self.directory, sync_parent=sync_parent)
