"""Producer ids: durable allocation in blocks and InitProducerId for idempotent producers (KIP-98, KIP-360 epoch
bumps) and, until a transaction coordinator takes them over, transactional ids."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable

from broker.log.producer_state import NO_PRODUCER_ID
from protocol.errors import ErrorCode


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
