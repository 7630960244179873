"""The share coordinator as a shard of the coordinator runtime (broker.coordinator) over `__share_group_state`: a
partition's load drops its share-partitions and replays their snapshots and updates, noting where each record
lies for the pruning (SnapshotOffsets)."""

from __future__ import annotations

from collections.abc import Collection

from .coordinator import ShareCoordinator
from .offsets import SnapshotOffsets


class ShareCoordinatorShard:
    def __init__(self, coordinator: ShareCoordinator, offsets: SnapshotOffsets) -> None:
        self.coordinator = coordinator
        self.offsets = offsets

    def load_begin(self, partitions: Collection[int]) -> None:
        for p in partitions:
            self.coordinator.load_begin(p)
            self.offsets.reset(p)

    def replay(self, partition: int, offset: int, producer_id: int, producer_epoch: int,
               key: bytes | memoryview, value: bytes | memoryview | None) -> None:
        self.coordinator.replay(key, value)
        self.offsets.record(partition, offset, key, value)

    def replay_end_transaction_marker(self, partition: int, producer_id: int, producer_epoch: int,
                                      commit: bool) -> None:
        """Never called: nothing writes transactions to `__share_group_state`."""

    def load_complete(self, partitions: Collection[int]) -> None:
        for p in partitions:
            self.coordinator.load_complete(p)

    def reload_scope(self, partition: int) -> Collection[int]:
        return (partition,)
