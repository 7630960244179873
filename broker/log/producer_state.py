"""Idempotent-producer bookkeeping for one partition, and its recovery from the log.

Kafka keeps, per producer id, the epoch, the last sequence number and the metadata of the last five appended
batches, so a retried batch is answered with its original offsets instead of being appended twice.
`ProducerStateTable` is that state machine, with no I/O: the produce path asks `check()` before appending and
calls `record()` after. `scan_producers` rebuilds a table from a partition log's batch headers (on the loop or,
through `scan_producers_in_thread`, in a worker thread); given a `TxnStateTable` the same scan rebuilds the
partition's transactions too (data batch headers, and the marker of each control batch: 78 bytes read per marker),
and lists the aborted transactions met, to put back into `.txnindex` files that lack them.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from broker.config.components import ComponentConfig, setting
from broker.log.segment import SCAN_CHUNK, THREAD_SCAN_CHUNK
from broker.log.txn_index import AbortedTxn
from broker.log.txn_state import TxnStateTable
from protocol.control_records import read_end_txn_marker
from protocol.errors import ErrorCode
from protocol.records import LOG_OVERHEAD, RecordError

if TYPE_CHECKING:
    from broker.log.partition_log import PartitionLog
    from broker.log.segment import Segment

NO_PRODUCER_ID = -1
NO_SEQUENCE = -1
# How many recent batches per producer are remembered for duplicate detection (Kafka: 5, the maximum number of
# in-flight requests an idempotent producer may have).
CACHED_BATCHES = 5
INT32_MAX = 2**31 - 1


@dataclass(frozen=True)
class ProducerStateManagerConfig(ComponentConfig):
    """Kafka's ProducerStateManagerConfig: how long a silent producer's state is kept, and how often expired
    ones are removed."""

    producer_id_expiration_ms: int = setting("producer.id.expiration.ms")
    producer_id_expiration_check_interval_ms: int = setting("producer.id.expiration.check.interval.ms")


def next_sequence(seq: int, increment: int = 1) -> int:
    """Sequence numbers wrap from Int32.MAX to 0."""
    return (seq + increment) % (INT32_MAX + 1)


@dataclass(frozen=True, slots=True)
class BatchMetadata:
    first_seq: int
    last_seq: int
    base_offset: int
    last_offset: int
    timestamp: int


@dataclass(slots=True)
class ProducerEntry:
    epoch: int
    batches: deque[BatchMetadata] = field(default_factory=lambda: deque(maxlen=CACHED_BATCHES))

    @property
    def last_seq(self) -> int:
        return self.batches[-1].last_seq if self.batches else NO_SEQUENCE


@dataclass(frozen=True, slots=True)
class SequenceCheck:
    """Outcome of checking a batch: append it, answer a duplicate with its old offsets, or fail."""

    error: ErrorCode = ErrorCode.NONE
    duplicate_of: BatchMetadata | None = None


APPEND = SequenceCheck()


class ProducerStateTable:
    """Producer id -> epoch and recent batches, for one partition."""

    def __init__(self) -> None:
        self._producers: dict[int, ProducerEntry] = {}

    def __len__(self) -> int:
        return len(self._producers)

    def entry(self, producer_id: int) -> ProducerEntry | None:
        return self._producers.get(producer_id)

    def items(self) -> list[tuple[int, ProducerEntry]]:
        return list(self._producers.items())

    def last_offsets(self, newer_than_ms: int) -> dict[int, int]:
        """Producer id -> last offset of its last batch, for producers whose last batch is newer than the given
        time (the others count as expired: the log cleaner need not keep their last batch)."""
        return {pid: entry.batches[-1].last_offset for pid, entry in self._producers.items()
                if entry.batches and entry.batches[-1].timestamp > newer_than_ms}

    def remove_expired(self, now_ms: int, expiration_ms: int) -> int:
        """Forget producers whose last batch's timestamp is `expiration_ms` or more before `now_ms`
        (`producer.id.expiration.ms`, as Kafka's ProducerStateManager.removeExpiredProducers). Returns how many."""
        expired = [pid for pid, entry in self._producers.items()
                   if not entry.batches or now_ms - entry.batches[-1].timestamp >= expiration_ms]
        for pid in expired:
            del self._producers[pid]
        return len(expired)

    def check(self, producer_id: int, epoch: int, first_seq: int, last_seq: int) -> SequenceCheck:
        if producer_id == NO_PRODUCER_ID or first_seq == NO_SEQUENCE:
            return APPEND  # not an idempotent batch
        entry = self._producers.get(producer_id)
        if entry is None:
            # No state for this producer (new, expired by producer.id.expiration.ms, or its batches left the log
            # by retention or DeleteRecords): as Kafka since KIP-360, any sequence is accepted and starts its state.
            return APPEND
        if epoch < entry.epoch:
            return SequenceCheck(ErrorCode.INVALID_PRODUCER_EPOCH)
        if epoch > entry.epoch:
            # A bumped epoch resets the sequence.
            return APPEND if first_seq == 0 else SequenceCheck(ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER)
        for cached in entry.batches:
            if cached.first_seq == first_seq and cached.last_seq == last_seq:
                return SequenceCheck(duplicate_of=cached)
        if entry.last_seq == NO_SEQUENCE or first_seq == next_sequence(entry.last_seq):
            return APPEND
        return SequenceCheck(ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER)

    def record(self, producer_id: int, epoch: int, batch: BatchMetadata) -> None:
        """Remember an appended batch (also used when rebuilding state from the log on start)."""
        if producer_id == NO_PRODUCER_ID or batch.first_seq == NO_SEQUENCE:
            return
        entry = self._producers.get(producer_id)
        if entry is None or epoch > entry.epoch:
            entry = ProducerEntry(epoch)
            self._producers[producer_id] = entry
        elif epoch < entry.epoch:
            return
        entry.batches.append(batch)


def scan_producers(plog: PartitionLog, table: ProducerStateTable, *, newer_than_ms: int, start: int | None = None,
                   end: int | None = None, chunk: int = SCAN_CHUNK, txns: TxnStateTable | None = None,
                   aborted: list[tuple[Segment, AbortedTxn]] | None = None) -> None:
    """Record the idempotent batches of `plog` in [start, end) (default: the whole log) into `table`. Segments
    whose newest batch is not newer than `newer_than_ms` are skipped: every producer there would be expired
    (producer.id.expiration.ms), so the scan reads about a day of data, not the whole log.

    May run in a worker thread while the loop appends, rolls or deletes segments: a segment closed (deleted by
    retention, replaced by the cleaner) under it raises SegmentGone."""
    start = plog.log_start_offset if start is None else start
    for segment in plog.segments:  # a copy
        if segment.next_offset <= start or segment.max_timestamp <= newer_than_ms:
            continue
        if end is not None and segment.base_offset >= end:
            break
        # from the indexed position at or before `start`: the loop's catch-up scan after a threaded load must not
        # walk the whole active segment again (0.5 s of blocked loop for 400 000 batches)
        position = segment.offset_index.lookup(start)[1] if start > segment.base_offset else 0
        try:
            for _pos, h in segment.iter_headers(position, chunk):
                last = h.base_offset + h.last_offset_delta
                if last < start:
                    continue
                if end is not None and h.base_offset >= end:
                    return
                if h.producer_id >= 0 and h.base_sequence >= 0:
                    table.record(h.producer_id, h.producer_epoch,
                                 BatchMetadata(h.base_sequence, h.base_sequence + h.last_offset_delta,
                                               h.base_offset, last, h.max_timestamp))
                if txns is not None and h.producer_id >= 0:
                    if not h.is_control:
                        txns.on_append(h)
                        continue
                    try:
                        marker = read_end_txn_marker(segment.read_bytes(_pos, h.batch_length + LOG_OVERHEAD))
                    except RecordError:
                        marker = None  # a malformed control batch ends nothing (it was never ours)
                    if marker is not None:
                        txn = txns.on_marker(h.producer_id, h.producer_epoch, marker.commit, h.base_offset,
                                             marker.coordinator_epoch, h.max_timestamp)
                        if txn is not None and aborted is not None:
                            aborted.append((segment, txn))
        except (OSError, ValueError):
            if segment.closed:
                raise SegmentGone from None
            raise


class SegmentGone(Exception):
    """A segment was deleted or replaced while a worker thread read it."""


def scan_producers_in_thread(plog: PartitionLog, newer_than_ms: int, end: int) -> ProducerStateTable:
    """The partition's producer state up to `end`, read in a worker thread (THREAD_SCAN_CHUNK reads: see there);
    starts again when the segment list changes under it."""
    return scan_partition_state_in_thread(plog, newer_than_ms, end).producers


@dataclass(slots=True)
class PartitionState:
    """What a scan of a partition's log rebuilds: sequences, transactions, and the aborted transactions met
    (with the segment holding each marker)."""

    producers: ProducerStateTable = field(default_factory=ProducerStateTable)
    txns: TxnStateTable = field(default_factory=TxnStateTable)
    aborted: list[tuple[Segment, AbortedTxn]] = field(default_factory=list)


def scan_partition_state(plog: PartitionLog, *, newer_than_ms: int, start: int | None = None,
                         end: int | None = None, chunk: int = SCAN_CHUNK,
                         state: PartitionState | None = None) -> PartitionState:
    state = PartitionState() if state is None else state
    scan_producers(plog, state.producers, newer_than_ms=newer_than_ms, start=start, end=end, chunk=chunk,
                   txns=state.txns, aborted=state.aborted)
    return state


def scan_partition_state_in_thread(plog: PartitionLog, newer_than_ms: int, end: int) -> PartitionState:
    """`scan_partition_state` up to `end` in a worker thread (THREAD_SCAN_CHUNK reads: see there); starts again
    when the segment list changes under it."""
    for _attempt in range(10):
        try:
            return scan_partition_state(plog, newer_than_ms=newer_than_ms, end=end, chunk=THREAD_SCAN_CHUNK)
        except SegmentGone:
            continue  # the segment list changed under us: start again from the current one
    raise RuntimeError(f"{plog.directory}: segments kept changing while loading producer state")
