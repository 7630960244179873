"""What the coordinator runtime hosts: a coordinator's state machine over the partitions of its internal topic.

Kafka's CoordinatorShard is one replicated state machine per partition. Shoal's sans-IO coordinators each keep
all the partitions of their topic in one object, so a shard here is that object's face to the runtime: it
rebuilds a set of partitions by replay (`load_begin`, `replay`, `replay_end_transaction_marker`,
`load_complete`), and says which partitions a reload of one of them must rebuild (`reload_scope`: the partition
alone, or all of them for a coordinator that cannot drop one partition's state alone).

A shard changes state only by replaying records: while loading, from the log; while serving, the records an
operation produced (either the shard applied them as it built them, through the same replay, or the runtime
replays them once they are written).
"""

from __future__ import annotations

from collections.abc import Collection
from typing import Protocol, TypeVar

LoadResultT_co = TypeVar("LoadResultT_co", covariant=True)


class CoordinatorShard(Protocol[LoadResultT_co]):
    """A coordinator's state machine as the runtime drives it. `LoadResultT_co` is what a load leaves to do
    (markers to resend, answers to complete), handed back by `load_complete`."""

    def load_begin(self, partitions: Collection[int]) -> None:
        """Drop the state of `partitions`: their records follow through `replay`."""
        ...

    def replay(self, partition: int, offset: int, producer_id: int, producer_epoch: int,
               key: bytes | memoryview, value: bytes | memoryview | None) -> None:
        """Apply one record of `partition` at `offset` (a tombstone has no value); `producer_id` and
        `producer_epoch` are those of a transactional batch, -1 for any other."""
        ...

    def replay_end_transaction_marker(self, partition: int, producer_id: int, producer_epoch: int,
                                      commit: bool) -> None:
        """A COMMIT or ABORT control batch of `producer_id` on `partition`, in log order."""
        ...

    def load_complete(self, partitions: Collection[int]) -> LoadResultT_co:
        """`partitions` are replayed: serve them; returns what the load leaves to do."""
        ...

    def reload_scope(self, partition: int) -> Collection[int]:
        """The partitions to rebuild when `partition`'s state no longer matches its log."""
        ...
