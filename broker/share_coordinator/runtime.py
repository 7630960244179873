"""The share coordinator at run time (component `share_coordinator`), the share-partition leader's Persister.

Hosts the sans-IO ShareCoordinator on the coordinator runtime (broker.coordinator: its shard is
broker.share_coordinator.shard) over `__share_group_state`: every partition is replayed on start, the records of each
operation are appended as one batch per partition and answered once durable. Used in-process
by the share-partition leader (broker.share_partition) and by the group coordinator runtime (initialize), and on the wire
by the Initialize/Read/Write/Delete/ReadSummary ShareGroupState handlers.

In-process API (broker.share_coordinator.persister.Persister; all async, durable before return):
    initialize(group, topic_id, partition, state_epoch, start_offset) -> OpResult
    read_state(group, topic_id, partition, leader_epoch=-1) -> ReadResult  (.error_code, .state)
    write_state(group, topic_id, partition, state_epoch, leader_epoch, start_offset, batches,
                delivery_complete_count=-1) -> OpResult
    delete_state(group, topic_id, partition) -> OpResult
    has_state(group, topic_id, partition) -> bool  (sync)
    read_state_summary(group, topic_id, partition) -> (ErrorCode, Summary | None, message)

Pruning: records before the oldest latest-snapshot of the live share-partitions of a state-topic partition are
redundant (offsets.SnapshotOffsets); a prune round (every `share.coordinator.state.topic.prune.interval.ms`,
and sooner once a partition has taken PRUNE_AFTER_RECORDS records) first re-snapshots share-partitions whose
snapshot predates the previous round, then moves the log start offset up to that point once everything before
it is durable. Start-up replay therefore reads about the records of the last two rounds, not the whole history.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Coroutine, Iterable, Mapping, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any
from uuid import UUID

import structlog

from broker.coordinator.coordinator_log import CoordinatorLog
from broker.coordinator.periodic import PeriodicTask
from broker.coordinator.runtime import (
    Appended,
    CoordinatorRuntime,
    CoordinatorWriteError,
    KeyValue,
    WriteOutcome,
)
from protocol.errors import ErrorCode

from .config import ShareCoordinatorConfig
from .coordinator import OpResult, ReadResult, ShareCoordinator, Summary
from .keys import SharePartitionKey
from .offsets import SnapshotOffsets
from .records import Record, decode
from .shard import ShareCoordinatorShard
from .state import StateBatch

if TYPE_CHECKING:
    from broker.cluster.manager import TopicManager
    from broker.config import BrokerConfig

log = structlog.get_logger(__name__)

TOPIC = "__share_group_state"
# A state-topic partition that took this many records since its last prune round is pruned without waiting
# for the interval: start-up replay stays bounded however busy the share groups are.
PRUNE_AFTER_RECORDS = 20_000
# The answer when records could not be made durable: the log directory is offline (memory may be ahead of a log
# that can no longer be read), or the append or its fsync failed.
_WRITE_ERRORS = {
    WriteOutcome.COMMITTED: ErrorCode.NONE,
    WriteOutcome.OFFLINE: ErrorCode.COORDINATOR_NOT_AVAILABLE,
    WriteOutcome.REFUSED: ErrorCode.UNKNOWN_SERVER_ERROR,
    WriteOutcome.NOT_DURABLE: ErrorCode.UNKNOWN_SERVER_ERROR,
}


class ShareCoordinatorRuntime:
    def __init__(self, *, state_log: CoordinatorLog, config: BrokerConfig, topics: TopicManager,
                 spawn: Callable[[Coroutine[Any, Any, Any], str], Any]) -> None:
        self._topics = topics
        self.log = state_log  # __share_group_state
        settings = ShareCoordinatorConfig.from_config(config)
        self.coordinator = ShareCoordinator(
            # The topic may have been created earlier with another count: the log is the truth.
            replace(settings, state_topic_num_partitions=self.log.num_partitions
                    or settings.state_topic_num_partitions),
            clock=lambda: int(time.time() * 1000),
            partition_exists=self._partition_exists)
        self.loaded = False
        self.offsets = SnapshotOffsets()
        self.runtime: CoordinatorRuntime[None] = CoordinatorRuntime(
            log=state_log, shard=ShareCoordinatorShard(self.coordinator, self.offsets), spawn=spawn,
            name="share state")
        self._round_end: dict[int, int] = {}  # partition -> log end offset when its last prune round began
        self._pruning = PeriodicTask(
            "share-state-prune", self.prune,
            every_s=settings.state_topic_prune_interval_ms / 1000,
            failure_event="share state prune round failed")
        self.last_load_records = 0  # records replayed by the last start-up (metrics, tests)

    def _partition_exists(self, topic_id: UUID, partition: int) -> bool:
        info = self._topics.registry.by_id(topic_id)
        return info is not None and 0 <= partition < info.num_partitions

    # --- lifecycle ---------------------------------------------------------------------------------------------
    async def start(self) -> None:
        loaded = self.runtime.load(range(self.log.num_partitions))
        self.loaded = True
        self.last_load_records = loaded.records
        log.info("share coordinator loaded", partitions=self.log.num_partitions, records=loaded.records,
                 keys=len(self.coordinator.keys()), seconds=round(loaded.seconds, 3))
        self.runtime.schedule(self._pruning)

    # --- durability --------------------------------------------------------------------------------------------
    async def _commit(self, records: Iterable[Record], keys: Iterable[SharePartitionKey]) -> ErrorCode:
        """Make `records` durable, and wait for earlier appends to the keys' partitions (their state may be
        what we are about to answer with). Returns NONE or the error to answer with."""
        by_partition: dict[int, list[KeyValue]] = {}
        for r in records:
            by_partition.setdefault(r.partition, []).append((r.key, r.value))
        wait_for = [self.coordinator.partition_for(k) for k in keys]  # nothing to append: a barrier
        return _WRITE_ERRORS[await self.runtime.write(by_partition, wait_for, on_appended=self._appended)]

    async def _commit_record(self, record: Record) -> ErrorCode:
        """`_commit` of one record (a state write's), without grouping by partition."""
        try:
            appended = self.runtime.append_all({record.partition: ((record.key, record.value),)},
                                               on_appended=self._appended)
        except CoordinatorWriteError as e:
            return _WRITE_ERRORS[e.outcome]
        return _WRITE_ERRORS[await self.runtime.commit(appended)]

    def _appended(self, appended: Appended, batch: Sequence[KeyValue]) -> None:
        """Records appended: where they lie, for the pruning; a partition past PRUNE_AFTER_RECORDS is pruned."""
        p, base = appended.partition, appended.base_offset
        for i, (key, value) in enumerate(batch):
            self.offsets.record(p, base + i, key, value)
        if self.offsets.appended_since_prune.get(p, 0) >= PRUNE_AFTER_RECORDS:
            self._pruning.run_soon()

    # --- in-process API ----------------------------------------------------------------------------------------
    def has_state(self, group_id: str, topic_id: UUID, partition: int) -> bool:
        """True if the share-partition already has durable-or-pending state (initialized by someone)."""
        return self.coordinator.state(SharePartitionKey(group_id, topic_id, partition)) is not None

    async def initialize(self, group_id: str, topic_id: UUID, partition: int, state_epoch: int,
                         start_offset: int = -1) -> OpResult:
        r = self.coordinator.initialize(group_id, topic_id, partition, state_epoch, start_offset)
        code = await self._commit(r.records, [SharePartitionKey(group_id, topic_id, partition)])
        return r if code == ErrorCode.NONE else OpResult(code, [], "share state could not be made durable")

    async def read_state(self, group_id: str, topic_id: UUID, partition: int, leader_epoch: int = -1) -> ReadResult:
        r = self.coordinator.read_state(group_id, topic_id, partition, leader_epoch)
        code = await self._commit(r.records, [SharePartitionKey(group_id, topic_id, partition)])
        return r if code == ErrorCode.NONE else ReadResult(code, None, [], "share state could not be made durable")

    async def write_state(self, group_id: str, topic_id: UUID, partition: int, state_epoch: int, leader_epoch: int,
                          start_offset: int, batches: Iterable[StateBatch], delivery_complete_count: int = -1
                          ) -> OpResult:
        r = self.coordinator.write_state(group_id, topic_id, partition, state_epoch, leader_epoch, start_offset,
                                         batches, delivery_complete_count)
        # A written record lands on the key's own partition, so its append is the wait for earlier ones too.
        records = r.records
        code = await (self._commit_record(records[0]) if len(records) == 1 else
                      self._commit(records, () if records else [SharePartitionKey(group_id, topic_id, partition)]))
        return r if code == ErrorCode.NONE else OpResult(code, [], "share state could not be made durable")

    async def delete_state(self, group_id: str, topic_id: UUID, partition: int) -> OpResult:
        r = self.coordinator.delete_state(group_id, topic_id, partition)
        code = await self._commit(r.records, [SharePartitionKey(group_id, topic_id, partition)])
        return r if code == ErrorCode.NONE else OpResult(code, [], "share state could not be made durable")

    async def read_state_summary(self, group_id: str, topic_id: UUID, partition: int
                                 ) -> tuple[ErrorCode, Summary | None, str | None]:
        await self._commit((), [SharePartitionKey(group_id, topic_id, partition)])
        return self.coordinator.read_state_summary(group_id, topic_id, partition)

    async def delete_topics(self, topic_ids: Iterable[UUID]) -> None:
        """Tombstone the state of deleted topics (called when a topic is deleted)."""
        records = self.coordinator.delete_topics(topic_ids)
        if records:
            await self._commit(records, ())

    # --- pruning -----------------------------------------------------------------------------------------------
    async def prune(self, partitions: Iterable[int] | None = None) -> dict[int, int]:
        """One prune round; returns the new log start offset of each partition that moved."""
        moved: dict[int, int] = {}
        for p in range(self.log.num_partitions) if partitions is None else partitions:
            start = await self._prune_partition(p)
            if start is not None:
                moved[p] = start
        return moved

    async def _prune_partition(self, p: int) -> int | None:
        if p in self._round_end and not self.offsets.appended_since_prune.get(p, 0):
            return None  # nothing written since the last round
        plog = self.log.partition_log(p)
        round_end = plog.log_end_offset
        # Share-partitions whose latest snapshot predates the previous round hold the prune point back:
        # write them a fresh snapshot of the same state first.
        records: list[Record] = []
        for key in self.offsets.behind(p, self._round_end.get(p, 0)):
            decoded = decode(key, None)
            if decoded is not None:
                records += self.coordinator.resnapshot(decoded.key)
        self._round_end[p] = round_end
        if records and await self._commit(records, ()) != ErrorCode.NONE:
            return None
        target = self.offsets.redundant_before(p)
        await self.runtime.barrier([p])  # everything before the target (the snapshots it keeps) is durable
        self.offsets.pruned(p)
        if target <= plog.log_start_offset:
            return None
        start = plog.delete_records_before(min(target, plog.log_end_offset))
        log.info("share state pruned", partition=p, log_start_offset=start, resnapshots=len(records),
                 live_keys=self.offsets.live_keys(p))
        return start

    # --- wire API ----------------------------------------------------------------------------------------------
    async def serve(self, operation: str, request: Mapping[str, Any], version: int) -> dict[str, Any]:
        """Serve a decoded *ShareGroupState request; `operation` is the coordinator's wire method name, e.g.
        "write_share_group_state". Per-partition errors come from the coordinator; a failed append turns
        every partition of the response into that error."""
        result = getattr(self.coordinator, operation)(request, version)
        keys = [SharePartitionKey(request["group_id"], t["topic_id"], p["partition"])
                for t in request["topics"] for p in t["partitions"] if request["group_id"] and p["partition"] >= 0]
        code = await self._commit(result.records, keys)
        response: dict[str, Any] = result.response
        if code != ErrorCode.NONE:
            for t in response["results"]:
                for p in t["partitions"]:
                    p.update(error_code=int(code), error_message="share state could not be made durable")
        return response
