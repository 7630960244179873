"""An in-memory share-state store for share-partition tests: what the share-partition manager reads, initializes
and writes through `broker.share_coordinator` (the share coordinator's side of the Persister), with no log behind it.

It keeps the last written start offset per (group, topic id, partition) and every write's (start offset,
batches); with `gating` set, writes record their partition in `started` and wait for `gate`, so a test can see
which writes run together. It keeps no delivery counts (the real share coordinator does).
"""

from __future__ import annotations

import asyncio
import uuid
from types import SimpleNamespace

Key = tuple[str, uuid.UUID, int]  # (group, topic id, partition)


class MemoryShareState:
    def __init__(self) -> None:
        self.state: dict[Key, SimpleNamespace] = {}
        self.writes: list[tuple] = []
        self.gating = False
        self.gate = asyncio.Event()
        self.started: list[int] = []

    async def read_state(self, group, topic_id, partition):
        return SimpleNamespace(error_code=0, state=self.state.get((group, topic_id, partition)))

    async def initialize(self, group, topic_id, partition, state_epoch, start_offset):
        self.state[(group, topic_id, partition)] = SimpleNamespace(
            state_epoch=state_epoch, start_offset=start_offset, state_batches=[])
        return SimpleNamespace(error_code=0)

    async def write_state(self, group, topic_id, partition, state_epoch, leader_epoch, start_offset, batches,
                          delivery_complete_count=-1):
        if self.gating:
            self.started.append(partition)
            await self.gate.wait()
        self.writes.append((start_offset, list(batches)))
        self.state[(group, topic_id, partition)].start_offset = start_offset
        return SimpleNamespace(error_code=0)
