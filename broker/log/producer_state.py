"""Idempotent-producer bookkeeping for one partition.

Kafka keeps, per producer id, the epoch, the last sequence number and the metadata of the last five appended
batches, so a retried batch is answered with its original offsets instead of being appended twice. This module
is that state machine, with no I/O: the produce path asks `check()` before appending and calls `record()` after.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field

from protocol.errors import ErrorCode

NO_PRODUCER_ID = -1
NO_SEQUENCE = -1
# How many recent batches per producer are remembered for duplicate detection (Kafka: 5, the maximum number of
# in-flight requests an idempotent producer may have).
CACHED_BATCHES = 5
INT32_MAX = 2**31 - 1


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
