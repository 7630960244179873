"""Producer ids: durable allocation in blocks and InitProducerId for idempotent producers (KIP-98).
Transactional ids belong to the transaction coordinator (broker.txn.runtime)."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

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
    """InitProducerId for idempotent producers on top of the allocator (KIP-98). Transactional ids belong to the
    transaction coordinator (broker.txn.runtime)."""

    def __init__(self, allocator: ProducerIdAllocator) -> None:
        self._allocator = allocator

    async def init_producer(self) -> tuple[ErrorCode, int, int]:
        """A fresh producer id at epoch 0, whatever the request names: as Kafka's coordinator, an idempotent
        producer recovering with its id and epoch (KIP-360) is given a new id rather than a bumped epoch, which
        no broker-side state could check (bumping any id a client names would fence another producer)."""
        return ErrorCode.NONE, await self._allocator.allocate(), 0
