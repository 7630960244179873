"""The transaction coordinator as a shard of the coordinator runtime (broker.coordinator) over
`__transaction_state`: a partition's load drops its transactional ids, replays their records and returns the
transactions the log left prepared (their markers are resent)."""

from __future__ import annotations

from collections.abc import Collection

from .coordinator import TransactionCoordinator
from .results import TxnResult


class TransactionCoordinatorShard:
    def __init__(self, coordinator: TransactionCoordinator) -> None:
        self.coordinator = coordinator

    def load_begin(self, partitions: Collection[int]) -> None:
        for p in partitions:
            self.coordinator.load_begin(p)

    def replay(self, partition: int, offset: int, producer_id: int, producer_epoch: int,
               key: bytes | memoryview, value: bytes | memoryview | None) -> None:
        self.coordinator.replay(key, value)

    def replay_end_transaction_marker(self, partition: int, producer_id: int, producer_epoch: int,
                                      commit: bool) -> None:
        """Never called: nothing writes transactions to `__transaction_state`."""

    def load_complete(self, partitions: Collection[int]) -> TxnResult:
        result = TxnResult()
        for p in partitions:
            result.merge(self.coordinator.load_complete(p))
        return result

    def reload_scope(self, partition: int) -> Collection[int]:
        return (partition,)
