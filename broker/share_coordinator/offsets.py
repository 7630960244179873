"""Which `__share_group_state` records are still needed (Kafka's ShareCoordinatorOffsetsManager), sans-IO.

A share-partition's state is rebuilt from its latest ShareSnapshot and the ShareUpdates after it, so everything
in a state-topic partition before the oldest latest-snapshot of its live keys is redundant and can be deleted
(DeleteRecords-style: the log start offset moves). A key whose state was deleted (snapshot tombstone) holds
nothing back. A key that is never written again would hold the prune point back for ever, so the runtime asks
`behind(p, offset)` for keys whose snapshot is older than the last round and writes them a fresh snapshot
(Kafka's cold-partition snapshots) before pruning.
"""

from __future__ import annotations

from protocol.coordinator_records import record_type

from .records import SNAPSHOT_TYPE


class SnapshotOffsets:
    def __init__(self) -> None:
        # state-topic partition -> snapshot key bytes -> offset of that key's latest ShareSnapshot
        self._latest: dict[int, dict[bytes, int]] = {}
        self._end: dict[int, int] = {}  # state-topic partition -> offset after the last record seen
        self.appended_since_prune: dict[int, int] = {}

    def reset(self, partition: int) -> None:
        """Forget a partition (before it is replayed again)."""
        self._latest.pop(partition, None)
        self._end.pop(partition, None)
        self.appended_since_prune.pop(partition, None)

    def record(self, partition: int, offset: int, key: bytes | memoryview, value: bytes | memoryview | None) -> None:
        """A record at `offset` (replayed or just appended)."""
        self._end[partition] = max(self._end.get(partition, 0), offset + 1)
        self.appended_since_prune[partition] = self.appended_since_prune.get(partition, 0) + 1
        if record_type(key) != SNAPSHOT_TYPE:
            return  # updates and their tombstones neither need nor free anything on their own
        latest = self._latest.setdefault(partition, {})
        if value is None:
            latest.pop(bytes(key), None)  # deleted: its older records are redundant
        else:
            latest[bytes(key)] = offset

    def redundant_before(self, partition: int) -> int:
        """Records before this offset are not needed to rebuild any live share-partition's state."""
        latest = self._latest.get(partition)
        if latest:
            return min(latest.values())
        return self._end.get(partition, 0)

    def behind(self, partition: int, offset: int) -> list[bytes]:
        """Snapshot keys of live share-partitions whose latest snapshot is before `offset`."""
        return [key for key, at in self._latest.get(partition, {}).items() if at < offset]

    def pruned(self, partition: int) -> None:
        self.appended_since_prune[partition] = 0

    def live_keys(self, partition: int) -> int:
        return len(self._latest.get(partition, {}))
