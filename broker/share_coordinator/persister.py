"""The share-partition leader's one seam to the share coordinator (Kafka's `Persister`).

The leader reads a share-partition's durable state when it first loads it, initializes it when nobody has
(the group coordinator normally does before assigning), and writes every change before it answers the client.
Shoal's only implementation is the share coordinator's runtime in the same process
(broker.share_coordinator.runtime.ShareCoordinatorRuntime, Kafka's "default state persister" without the RPCs); it
satisfies this Protocol structurally, so the share coordinator never imports the leader.

The group coordinator uses the same object for its side (initialize before assigning, delete with the group or
the topic, summaries for DescribeShareGroupOffsets); those calls are listed here too so that one interface
describes the share coordinator's in-process API.

Every call is durable before it returns; failures come back as error codes in the results, not as exceptions.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Protocol
from uuid import UUID

from broker.share_coordinator.coordinator import OpResult, ReadResult, Summary
from broker.share_coordinator.state import SharePartitionState, StateBatch
from protocol.errors import ErrorCode

__all__ = ["OpResult", "Persister", "ReadResult", "SharePartitionState", "StateBatch", "Summary",
           "UNINITIALIZED_START_OFFSET"]

UNINITIALIZED_START_OFFSET = -1  # a start offset not resolved yet (share.auto.offset.reset decides it)


class Persister(Protocol):
    async def initialize(self, group_id: str, topic_id: UUID, partition: int, state_epoch: int,
                         start_offset: int = UNINITIALIZED_START_OFFSET) -> OpResult:
        """InitializeShareGroupState: (re)start the share-partition's state at `start_offset`."""
        ...

    async def read_state(self, group_id: str, topic_id: UUID, partition: int, leader_epoch: int = -1
                         ) -> ReadResult:
        """ReadShareGroupState: `.state` is None (with an error code) for a share-partition never initialized."""
        ...

    async def write_state(self, group_id: str, topic_id: UUID, partition: int, state_epoch: int,
                          leader_epoch: int, start_offset: int, batches: Iterable[StateBatch],
                          delivery_complete_count: int = -1) -> OpResult:
        """WriteShareGroupState: the start offset and the batches that changed, laid over the stored ones."""
        ...

    async def delete_state(self, group_id: str, topic_id: UUID, partition: int) -> OpResult:
        """DeleteShareGroupState (group coordinator: group or offsets deleted)."""
        ...

    async def read_state_summary(self, group_id: str, topic_id: UUID, partition: int
                                 ) -> tuple[ErrorCode, Summary | None, str | None]:
        """ReadShareGroupStateSummary (group coordinator: DescribeShareGroupOffsets)."""
        ...

    def has_state(self, group_id: str, topic_id: UUID, partition: int) -> bool:
        """True once someone initialized the share-partition (group coordinator: do not initialize twice)."""
        ...
