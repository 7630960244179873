"""Producer ids: durable allocation in blocks and InitProducerId for idempotent producers (KIP-98, KIP-360 epoch
bumps). Transactional ids belong to the transaction coordinator (broker.txn.runtime)."""

from __future__ import annotations

import asyncio
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
    """InitProducerId for idempotent producers on top of the allocator (KIP-98, with KIP-360 epoch bumps).
    Transactional ids belong to the transaction coordinator (broker.txn.runtime)."""

    MAX_EPOCH = 32767

    def __init__(self, allocator: ProducerIdAllocator) -> None:
        self._allocator = allocator

    async def init_producer(self, producer_id: int, epoch: int) -> tuple[ErrorCode, int, int]:
        if producer_id == NO_PRODUCER_ID:
            return ErrorCode.NONE, await self._allocator.allocate(), 0
        # KIP-360: an idempotent producer asks to bump its epoch after an error.
        if epoch < 0:
            return ErrorCode.INVALID_REQUEST, NO_PRODUCER_ID, -1
        return await self._bump(producer_id, epoch)

    async def _bump(self, producer_id: int, epoch: int) -> tuple[ErrorCode, int, int]:
        if epoch + 1 >= self.MAX_EPOCH:
            # Epoch exhausted: a fresh producer id starts again at epoch 0.
            return ErrorCode.NONE, await self._allocator.allocate(), 0
        return ErrorCode.NONE, producer_id, epoch + 1
