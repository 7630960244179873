"""Idempotent-producer bookkeeping for one partition.

Kafka keeps, per producer id, the epoch, the last sequence number and the metadata of the last five appended
batches, so a retried batch is answered with its original offsets instead of being appended twice. This module
is that state machine, with no I/O: the produce path asks `check()` before appending and calls `record()` after.
"""

from __future__ import annotations

import asyncio
import time
from collections import deque
from collections.abc import Awaitable, Callable
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


class ProducerIdAllocator:
    """Hands out producer ids from blocks whose upper bound is made durable before any id in it is used.

    `await persist_block(next_id)` is called with the first id after the reserved block (a journal write: the
    event loop serves meanwhile); on restart the allocator resumes from the last persisted bound, so ids are
    never reused even after `kill -9`. Callers arriving while a block is being reserved wait for it.
    """

    BLOCK_SIZE = 1000

    def __init__(self, next_unreserved: int, persist_block: Callable[[int], Awaitable[None]]) -> None:
        self._next = next_unreserved
        self._block_end = next_unreserved
        self._persist_block = persist_block
        self._reserving: asyncio.Future[None] | None = None

    async def allocate(self) -> int:
        while self._next >= self._block_end:
            if self._reserving is None:
                self._reserving = asyncio.ensure_future(self._reserve(self._next + self.BLOCK_SIZE))
            await asyncio.shield(self._reserving)
        pid = self._next
        self._next += 1
        return pid

    async def _reserve(self, block_end: int) -> None:
        try:
            await self._persist_block(block_end)
            self._block_end = block_end
        finally:
            self._reserving = None


class ProducerIdManager:
    """InitProducerId semantics on top of the allocator (KIP-98, with KIP-360 epoch bumps)."""

    MAX_EPOCH = 32767

    def __init__(self, allocator: ProducerIdAllocator, *, clock: Callable[[], float] = time.time,
                 transactional_id_expiration_ms: Callable[[], int] = lambda: 604_800_000) -> None:
        self._allocator = allocator
        self._clock = clock
        self._expiration_ms = transactional_id_expiration_ms  # transactional.id.expiration.ms
        # transactional id -> (producer id, epoch); not durable, transactions are not served yet. Bounded by
        # expiry: an id unused for transactional.id.expiration.ms is dropped (remove_expired_transactional_ids).
        self._transactional: dict[str, tuple[int, int]] = {}
        self._last_used: dict[str, int] = {}  # transactional id -> last InitProducerId (ms)

    def __len__(self) -> int:
        return len(self._transactional)

    def remove_expired_transactional_ids(self) -> int:
        """Forget transactional ids unused for transactional.id.expiration.ms (Kafka's coordinator expires them
        the same way). Returns how many."""
        cutoff = int(self._clock() * 1000) - int(self._expiration_ms())
        expired = [tid for tid, used in self._last_used.items() if used <= cutoff]
        for tid in expired:
            del self._transactional[tid]
            del self._last_used[tid]
        return len(expired)

    async def init_producer(self, transactional_id: str | None, producer_id: int, epoch: int
                            ) -> tuple[ErrorCode, int, int]:
        if transactional_id is None:
            if producer_id == NO_PRODUCER_ID:
                return ErrorCode.NONE, await self._allocator.allocate(), 0
            # KIP-360: an idempotent producer asks to bump its epoch after an error.
            if epoch < 0:
                return ErrorCode.INVALID_REQUEST, NO_PRODUCER_ID, -1
            return await self._bump(producer_id, epoch)
        known = self._transactional.get(transactional_id)
        if known is None:
            result = (await self._allocator.allocate(), 0)
        else:
            if producer_id != NO_PRODUCER_ID and (producer_id, epoch) != known:
                return ErrorCode.PRODUCER_FENCED, NO_PRODUCER_ID, -1
            _, pid, new_epoch = await self._bump(*known)
            result = (pid, new_epoch)
        self._transactional[transactional_id] = result
        self._last_used[transactional_id] = int(self._clock() * 1000)
        return ErrorCode.NONE, result[0], result[1]

    async def _bump(self, producer_id: int, epoch: int) -> tuple[ErrorCode, int, int]:
        if epoch + 1 >= self.MAX_EPOCH:
            # Epoch exhausted: a fresh producer id starts again at epoch 0.
            return ErrorCode.NONE, await self._allocator.allocate(), 0
        return ErrorCode.NONE, producer_id, epoch + 1
