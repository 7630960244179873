"""The group coordinator as a shard of the coordinator runtime (broker.coordinator) over `__consumer_offsets`.

The sans-IO GroupCoordinator keeps every partition's groups in one object and cannot drop one partition's
state alone: a load starts from a fresh coordinator (after the first) and a reload of any partition rebuilds
them all. Records of transactional batches wait for their producer's marker, which settles them in the groups
of the partition it was written to.
"""

from __future__ import annotations

from collections.abc import Callable, Collection

from .coordinator import GroupCoordinator
from .result import GroupResult


class GroupCoordinatorShard:
    def __init__(self, coordinator: GroupCoordinator, *, clock: Callable[[], int],
                 partition_for: Callable[[str], int], num_partitions: Callable[[], int]) -> None:
        """`partition_for(group_id)`: the group's `__consumer_offsets` partition."""
        self.coordinator = coordinator
        self._clock = clock
        self._partition_for = partition_for
        self._num_partitions = num_partitions
        self._loaded_once = False

    def load_begin(self, partitions: Collection[int]) -> None:
        if self._loaded_once:
            self.coordinator = self.coordinator.fresh()
        self.coordinator.begin_load(self._clock())

    def replay(self, partition: int, offset: int, producer_id: int, producer_epoch: int,
               key: bytes | memoryview, value: bytes | memoryview | None) -> None:
        self.coordinator.replay(key, value, producer_id, producer_epoch)

    def replay_end_transaction_marker(self, partition: int, producer_id: int, producer_epoch: int,
                                      commit: bool) -> None:
        partition_for = self._partition_for
        self.coordinator.replay_end_txn(producer_id, producer_epoch, commit,
                                        lambda group_id: partition_for(group_id) == partition)

    def load_complete(self, partitions: Collection[int]) -> GroupResult:
        """Timers and the groups' after-load work (classic groups' rebalances to complete) start here."""
        self._loaded_once = True
        return self.coordinator.loaded(self._clock())

    def reload_scope(self, partition: int) -> Collection[int]:
        return range(self._num_partitions())
