"""The share coordinator at run time (component `share_coordinator`), the share-partition leader's Persister.

Wraps the sans-IO ShareCoordinator with `__share_group_state`: replays every partition on start, appends the
records of each operation as one batch per partition and returns only once they are fsynced. Used in-process
by the share-partition leader (broker.share) and by the group coordinator runtime (initialize), and on the wire
by the Initialize/Read/Write/Delete/ReadSummary ShareGroupState handlers.

In-process API (broker.share.persister.Persister; all async, durable before return):
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

import asyncio
import time
from collections.abc import Callable, Coroutine, Iterable, Mapping, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any
from uuid import UUID

import structlog

from broker.aio import wait_event
from broker.coordinator.coordinator_log import AppendFailed, CoordinatorLog
from protocol.errors import ErrorCode

from .config import ShareCoordinatorConfig
from .coordinator import OpResult, ReadResult, ShareCoordinator, Summary
from .keys import SharePartitionKey
from .offsets import SnapshotOffsets
from .records import Record, decode
from .state import StateBatch

if TYPE_CHECKING:
    from broker.cluster.manager import TopicManager
    from broker.config import BrokerConfig

log = structlog.get_logger(__name__)

TOPIC = "__share_group_state"
# A state-topic partition that took this many records since its last prune round is pruned without waiting
# for the interval: start-up replay stays bounded however busy the share groups are.
PRUNE_AFTER_RECORDS = 20_000


class ShareCoordinatorRuntime:
    def __init__(self, *, state_log: CoordinatorLog, config: BrokerConfig, topics: TopicManager,
                 spawn: Callable[[Coroutine[Any, Any, Any], str], Any]) -> None:
        self._topics = topics
        self._spawn = spawn
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
        self._round_end: dict[int, int] = {}  # partition -> log end offset when its last prune round began
        self._prune_kick = asyncio.Event()
        self._prune_interval_s = settings.state_topic_prune_interval_ms / 1000
        self.last_load_records = 0  # records replayed by the last start-up (metrics, tests)

    def _partition_exists(self, topic_id: UUID, partition: int) -> bool:
        info = self._topics.registry.by_id(topic_id)
        return info is not None and 0 <= partition < info.num_partitions

    # --- lifecycle ---------------------------------------------------------------------------------------------
    async def start(self) -> None:
        started = time.monotonic()
        total = 0
        for p in range(self.log.num_partitions):
            total += self._load(p)
        self.loaded = True
        self.last_load_records = total
        log.info("share coordinator loaded", partitions=self.log.num_partitions, records=total,
                 keys=len(self.coordinator.keys()), seconds=round(time.monotonic() - started, 3))
        self._spawn(self._prune_loop(), "share-state-prune")

    def _load(self, partition: int) -> int:
        self.coordinator.load_begin(partition)
        self.offsets.reset(partition)

        def apply(offset: int, _producer_id: int, _producer_epoch: int, key: bytes | memoryview,
                  value: bytes | memoryview | None) -> None:
            self.coordinator.replay(key, value)
            self.offsets.record(partition, offset, key, value)

        try:
            return self.log.replay(partition, apply)
        finally:
            self.coordinator.load_complete(partition)

    # --- durability --------------------------------------------------------------------------------------------
    async def _commit(self, records: Iterable[Record], keys: Iterable[SharePartitionKey]) -> ErrorCode:
        """Make `records` durable, and wait for earlier appends to the keys' partitions (their state may be
        what we are about to answer with). Returns NONE or the error to answer with."""
        by_partition: dict[int, list[tuple[bytes, bytes | None]]] = {}
        for r in records:
            by_partition.setdefault(r.partition, []).append((r.key, r.value))
        for k in keys:
            by_partition.setdefault(self.coordinator.partition_for(k), [])  # nothing to append: a barrier
        if any(self.log.offline(p) for p in by_partition):
            # Memory may be ahead of a log that can no longer be read or written: answer nothing from it.
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        futures = []
        for p in sorted(by_partition):
            fut = self._append(p, by_partition[p])
            if fut is None:
                return ErrorCode.UNKNOWN_SERVER_ERROR
            futures.append(fut)
        return await self._durable(futures)

    async def _commit_record(self, record: Record) -> ErrorCode:
        """`_commit` of one record (a state write's), without grouping by partition."""
        if self.log.offline(record.partition):
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        fut = self._append(record.partition, ((record.key, record.value),))
        if fut is None:
            return ErrorCode.UNKNOWN_SERVER_ERROR
        if fut.done() and not fut.cancelled() and fut.exception() is None:
            return ErrorCode.NONE  # written (a deferred fsync): no coroutine to wait in
        return await self._durable((fut,))

    def _append(self, p: int, batch: Sequence[tuple[bytes, bytes | None]]) -> asyncio.Future | None:
        """Append `batch` to partition `p` now; the future of its durability, or None when it was refused."""
        try:
            base, fut = self.log.append_at(p, batch)
        except AppendFailed:
            # Memory is ahead of the log: rebuild this partition from what the log really holds (unless the
            # log directory is offline: then nothing can be read and the broker is stopping).
            if not self.log.offline(p):
                self._load(p)
            return None
        for i, (key, value) in enumerate(batch):
            self.offsets.record(p, base + i, key, value)
        if self.offsets.appended_since_prune.get(p, 0) >= PRUNE_AFTER_RECORDS:
            self._prune_kick.set()
        return fut

    @staticmethod
    async def _durable(futures: Iterable[asyncio.Future]) -> ErrorCode:
        try:
            for fut in futures:
                await fut
        except Exception:  # noqa: BLE001 - an fsync failure is answered, not raised into the caller
            log.exception("share state not durable")
            return ErrorCode.UNKNOWN_SERVER_ERROR
        return ErrorCode.NONE

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
    async def _prune_loop(self) -> None:
        while True:
            await wait_event(self._prune_kick, self._prune_interval_s)
            self._prune_kick.clear()
            try:
                await self.prune()
            except asyncio.CancelledError:
                raise
            except Exception:  # noqa: BLE001 - a failed round must not stop pruning for good
                log.exception("share state prune round failed")

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
        await self.log.barrier([p])  # everything before the target (the snapshots it keeps) is durable
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
        response = result.response
        if code != ErrorCode.NONE:
            for t in response["results"]:
                for p in t["partitions"]:
                    p.update(error_code=int(code), error_message="share state could not be made durable")
        return response
