"""An in-memory share-state store for share-partition tests: what the share-partition manager reads, initializes
and writes through `broker.share_coordinator` (the share coordinator's side of the Persister), with no log behind it.

It keeps the last written start offset per (group, topic id, partition) and every write's (start offset,
batches); with `gating` set, writes record their partition in `started` and wait for `gate`, so a test can see
which writes run together. It keeps no delivery counts (the real share coordinator does).
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterable

from broker.share_coordinator.coordinator import OpResult, ReadResult
from broker.share_coordinator.state import SharePartitionState, StateBatch
from protocol.errors import ErrorCode

Key = tuple[str, uuid.UUID, int]  # (group, topic id, partition)


class MemoryShareState:
    def __init__(self) -> None:
        self.state: dict[Key, SharePartitionState] = {}
        self.writes: list[tuple[int, list[StateBatch]]] = []
        self.gating = False
        self.gate = asyncio.Event()
        self.started: list[int] = []

    async def read_state(self, group: str, topic_id: uuid.UUID, partition: int, leader_epoch: int = -1
                         ) -> ReadResult:
        return ReadResult(ErrorCode.NONE, self.state.get((group, topic_id, partition)))

    async def initialize(self, group: str, topic_id: uuid.UUID, partition: int, state_epoch: int,
                         start_offset: int = -1) -> OpResult:
        self.state[(group, topic_id, partition)] = SharePartitionState(
            snapshot_epoch=0, state_epoch=state_epoch, leader_epoch=-1, start_offset=start_offset)
        return OpResult(ErrorCode.NONE)

    async def write_state(self, group: str, topic_id: uuid.UUID, partition: int, state_epoch: int,
                          leader_epoch: int, start_offset: int, batches: Iterable[StateBatch],
                          delivery_complete_count: int = -1) -> OpResult:
        if self.gating:
            self.started.append(partition)
            await self.gate.wait()
        self.writes.append((start_offset, list(batches)))
        key = (group, topic_id, partition)
        self.state[key] = self.state[key]._replace(start_offset=start_offset)
        return OpResult(ErrorCode.NONE)
