"""The share coordinator at run time: component `broker.share_state`.

Wraps the sans-IO ShareCoordinator with `__share_group_state`: replays every partition on start, appends the
records of each operation as one batch per partition and returns only once they are fsynced. Used in-process
by the share-partition leader (broker.share) and by the group coordinator runtime (initialize), and on the wire
by the Initialize/Read/Write/Delete/ReadSummary ShareGroupState handlers.

In-process API (all async, durable before return):
    initialize(group, topic_id, partition, state_epoch, start_offset) -> OpResult
    read_state(group, topic_id, partition, leader_epoch=-1) -> ReadResult  (.error_code, .state)
    write_state(group, topic_id, partition, state_epoch, leader_epoch, start_offset, batches,
                delivery_complete_count=-1) -> OpResult
    delete_state(group, topic_id, partition) -> OpResult
    has_state(group, topic_id, partition) -> bool  (sync)
    read_state_summary(group, topic_id, partition) -> (ErrorCode, Summary | None, message)
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping
from typing import Any
from uuid import UUID

import structlog

from broker.coordinator_log import AppendFailed, CoordinatorLog
from protocol.errors import ErrorCode

from .config import ShareCoordinatorConfig
from .coordinator import OpResult, ReadResult, ShareCoordinator, Summary
from .keys import SharePartitionKey
from .records import Record

log = structlog.get_logger(__name__)

TOPIC = "__share_group_state"


class ShareStateRuntime:
    def __init__(self, broker: Any) -> None:
        self._broker = broker
        self.log = CoordinatorLog(broker, TOPIC)
        config = broker.config
        self.coordinator = ShareCoordinator(
            ShareCoordinatorConfig(
                # The topic may have been created earlier with another count: the log is the truth.
                state_topic_num_partitions=self.log.num_partitions
                or config.get("share.coordinator.state.topic.num.partitions"),
                snapshot_update_records_per_snapshot=config.get(
                    "share.coordinator.snapshot.update.records.per.snapshot")),
            clock=lambda: int(time.time() * 1000),
            partition_exists=self._partition_exists)
        self.loaded = False

    def _partition_exists(self, topic_id: UUID, partition: int) -> bool:
        info = self._broker.topics.registry.by_id(topic_id)
        return info is not None and 0 <= partition < info.num_partitions

    # --- lifecycle ---------------------------------------------------------------------------------------------
    async def start(self) -> None:
        started = time.monotonic()
        total = 0
        for p in range(self.log.num_partitions):
            total += self._load(p)
        self.loaded = True
        log.info("share coordinator loaded", partitions=self.log.num_partitions, records=total,
                 keys=len(self.coordinator.keys()), seconds=round(time.monotonic() - started, 3))

    def _load(self, partition: int) -> int:
        self.coordinator.load_begin(partition)
        try:
            return self.log.replay(partition, self.coordinator.replay)
        finally:
            self.coordinator.load_complete(partition)

    # --- durability --------------------------------------------------------------------------------------------
    async def _commit(self, records: Iterable[Record], keys: Iterable[SharePartitionKey]) -> ErrorCode:
        """Make `records` durable, and wait for earlier appends to the keys' partitions (their state may be
        what we are about to answer with). Returns NONE or the error to answer with."""
        by_partition: dict[int, list[tuple[bytes, bytes | None]]] = {}
        for r in records:
            by_partition.setdefault(r.partition, []).append((r.key, r.value))
        partitions = {self.coordinator.partition_for(k) for k in keys} | set(by_partition)
        futures = []
        for p in sorted(partitions):
            try:
                futures.append(self.log.append(p, by_partition.get(p, ())))
            except AppendFailed:
                # Memory is ahead of the log: rebuild this partition from what the log really holds.
                self._load(p)
                return ErrorCode.UNKNOWN_SERVER_ERROR
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
                          start_offset: int, batches: Iterable[Any], delivery_complete_count: int = -1) -> OpResult:
        r = self.coordinator.write_state(group_id, topic_id, partition, state_epoch, leader_epoch, start_offset,
                                         batches, delivery_complete_count)
        code = await self._commit(r.records, [SharePartitionKey(group_id, topic_id, partition)])
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


def build(broker: Any) -> ShareStateRuntime:
    """Create component `share_state` (call while building components) and follow topic deletions."""
    runtime = broker.add_component("share_state", ShareStateRuntime(broker))
    broker.topics.on_delete(
        lambda info: broker.spawn(runtime.delete_topics([info.topic_id]), "share-state-delete-topic"))
    return runtime
