"""The group coordinator's side of share-partition state (KIP-932), at run time: it initializes and deletes that
state through the share coordinator, and serves DescribeShareGroupOffsets, AlterShareGroupOffsets and
DeleteShareGroupOffsets (after the runtime has checked that the coordinator is loaded and share groups are on).

What may change is decided by the sans-IO share part (ShareGroupManager and its ShareOffsetsAdmin), which
records it in ShareGroupStatePartitionMetadata; this class talks to the share coordinator (its Persister,
broker/share_coordinator/persister.py) and writes the resulting records through the group coordinator runtime (`write`).

The share part is asked for on every use (`share()`): the runtime replaces it when it rebuilds the coordinator
from the log.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from typing import Any
from uuid import UUID

import structlog

from broker.groups.collaborators import Spawn, Topics
from broker.groups.messages import MESSAGES, WRITE_FAILED
from broker.groups.records import Record
from broker.groups.result import InitializeRequest
from broker.groups.share.manager import ShareGroupManager
from broker.groups.share.offsets_admin import AdminError
from broker.share_coordinator.persister import Persister
from protocol.errors import ErrorCode

log = structlog.get_logger(__name__)

# Append records for the groups' partitions (and wait for earlier appends of `group_ids`'); False if not durable.
GroupWrite = Callable[[Sequence[Record], Iterable[str]], Awaitable[bool]]
StateResetListener = Callable[[str, Mapping[UUID, Iterable[int]]], Any]
# A share-partition whose InitializeShareGroupState raised: the share coordinator could not be reached.
_UNREACHABLE = "The share coordinator is not available."


def admin_error(code: ErrorCode, message: str | None) -> dict[str, Any]:
    """A whole-request error of Alter/DeleteShareGroupOffsets."""
    return {"error_code": int(code), "error_message": message, "responses": []}


class ShareStateAdmin:
    def __init__(self, persister: Persister, topics: Topics, *, share: Callable[[], ShareGroupManager],
                 write: GroupWrite, spawn: Spawn) -> None:
        self._persister = persister
        self._topics = topics
        self._share = share
        self._write = write
        self._spawn = spawn
        self._tasks: dict[str, set[asyncio.Task[None]]] = {}  # group id -> InitializeShareGroupState in flight
        self._reset_listeners: list[StateResetListener] = []

    def add_reset_listener(self, fn: StateResetListener) -> None:
        """`fn(group_id, {topic_id: partitions})` after AlterShareGroupOffsets or DeleteShareGroupOffsets
        replaced or deleted those share-partitions' durable state: the share-partition leader drops its copy."""
        self._reset_listeners.append(fn)

    def _state_reset(self, group_id: str, partitions: Mapping[UUID, Iterable[int]]) -> None:
        for fn in list(self._reset_listeners):
            try:
                fn(group_id, partitions)
            except Exception:  # noqa: BLE001 - one listener must not stop the others
                log.exception("share-state-reset listener failed", group=group_id)

    # --- initialization requested by heartbeats ----------------------------------------------------------------
    def initialize_later(self, init: InitializeRequest) -> None:
        """Start InitializeShareGroupState for `init` in the background (its heartbeat's records are durable)."""
        task = self._spawn(self._initialize_requested(init), "share-group-initialize")
        self._tasks.setdefault(init.group_id, set()).add(task)
        task.add_done_callback(functools.partial(self._init_done, init.group_id))

    def _init_done(self, group_id: str, task: asyncio.Task[None]) -> None:
        tasks = self._tasks.get(group_id)
        if tasks is not None:
            tasks.discard(task)
            if not tasks:
                del self._tasks[group_id]

    def initializing(self, group_id: str) -> bool:
        """True while share-partitions of the group are being initialized."""
        return bool(self._tasks.get(group_id))

    async def wait_initialized(self, group_id: str, timeout_s: float) -> None:
        """Wait (at most `timeout_s`) for the group's initializations in flight."""
        tasks = list(self._tasks.get(group_id, ()))
        if tasks:
            await asyncio.wait(tasks, timeout=timeout_s)

    async def _initialize_requested(self, init: InitializeRequest) -> None:
        """The partitions become assignable once their `initialized` records are durable."""
        topics = {tid: dict.fromkeys(parts, -1) for tid, parts in sorted(init.topics.items(), key=lambda kv: str(kv[0]))}
        records, _errors = await self._initialize(init.group_id, init.state_epoch, topics, keep_existing=True)
        if records:
            await self._write(records, ())

    async def _initialize(self, group_id: str, state_epoch: int, topics: Mapping[UUID, Mapping[int, int]], *,
                          keep_existing: bool) -> tuple[list[Record], dict[tuple[UUID, int], tuple[ErrorCode, str | None]]]:
        """InitializeShareGroupState for each topic id -> partition -> start offset, then the share part's
        records for the outcome (to be written by the caller) and the failed partitions' (error, message).
        With `keep_existing` a share-partition that already has state is taken as initialized."""
        records: list[Record] = []
        errors: dict[tuple[UUID, int], tuple[ErrorCode, str | None]] = {}
        for tid, offsets in topics.items():
            ok, failed = [], []
            for p, start in sorted(offsets.items()):
                code, message = await self._initialize_one(group_id, tid, p, state_epoch, start, keep_existing)
                if code == ErrorCode.NONE:
                    ok.append(p)
                    continue
                failed.append(p)
                errors[(tid, p)] = (code, message or MESSAGES.get(code))
                log.warning("share-partition not initialized", group=group_id, topic_id=str(tid), partition=p,
                            error=code.name)
            # Both calls emit (and apply) records immediately, so they are computed after the awaits above.
            share = self._share()
            records += share.initialized(group_id, tid, ok)
            records += share.initialize_failed(group_id, tid, failed)
        return records, errors

    async def _initialize_one(self, group_id: str, tid: UUID, partition: int, state_epoch: int, start_offset: int,
                              keep_existing: bool) -> tuple[ErrorCode, str | None]:
        if keep_existing and self._persister.has_state(group_id, tid, partition):
            # Already there (the share-partition leader initialized it on first use, or our earlier attempt
            # succeeded but its metadata record was lost): re-initializing would wipe progress.
            return ErrorCode.NONE, None
        try:
            result = await self._persister.initialize(group_id, tid, partition, state_epoch, start_offset)
        except Exception:  # noqa: BLE001 - answered as the partition's error
            log.exception("share state initialize failed", group=group_id, partition=partition)
            return ErrorCode.UNKNOWN_SERVER_ERROR, _UNREACHABLE
        return ErrorCode(result.error_code), result.error_message

    # --- deletion ----------------------------------------------------------------------------------------------
    async def delete_state(self, group_id: str, partitions: Mapping[UUID, frozenset[int]]) -> ErrorCode:
        """DeleteShareGroupState for every share-partition with state; the first error stops it (an unknown
        topic-partition has nothing left to delete)."""
        for tid, parts in partitions.items():
            for p in sorted(parts):
                if not self._persister.has_state(group_id, tid, p):
                    continue
                try:
                    result = await self._persister.delete_state(group_id, tid, p)
                except Exception:  # noqa: BLE001 - answered with an error code
                    log.exception("share state delete failed", group=group_id, partition=p)
                    return ErrorCode.UNKNOWN_SERVER_ERROR
                code = ErrorCode(result.error_code)
                if code not in (ErrorCode.NONE, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION):
                    return code
        return ErrorCode.NONE

    async def delete_group_state(self, group_id: str, partitions: Mapping[UUID, frozenset[int]]) -> ErrorCode:
        """DeleteGroups of a share group with share-partitions: record its topics as Deleting, then delete their
        state (as Kafka: an interrupted deletion leaves the topics in Deleting, and the next DeleteGroups deletes
        them again). NONE when the group's tombstones may be written."""
        if not partitions:
            return ErrorCode.NONE
        try:
            records = self._share().offsets_admin.begin_group_deletion(group_id)
        except AdminError as e:  # a member joined while earlier groups were being deleted
            return e.code
        if records and not await self._write(records, [group_id]):
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        return await self.delete_state(group_id, partitions)

    # --- share-group offsets (DescribeShareGroupOffsets, AlterShareGroupOffsets, DeleteShareGroupOffsets) -------
    async def describe_offsets(self, group_id: str, topics: Sequence[tuple[str, Sequence[int]]] | None
                               ) -> dict[str, Any]:
        """One DescribeShareGroupOffsets group (v1 shape: lag per KIP-1226). `topics` None asks for every
        share-partition with state. As in Kafka, named topics are answered without checking the group (no
        state reads as start offset -1), unknown topics with a zero topic id, and a share-partition the share
        coordinator cannot summarize as "no offset" rather than as an error."""
        wanted: list[tuple[str, UUID, Sequence[int]]] = []
        missing: list[dict[str, Any]] = []
        if topics is None:
            try:
                found = self._share().offsets_admin.initialized_share_partitions(group_id)
            except AdminError:
                # Kafka answers any group id, of another type or none, with the share-partitions it has state
                # for: none.
                found = {}
            for tid, (_name, initialized) in sorted(found.items(), key=lambda kv: kv[1][0]):
                info = self._topics.registry.by_id(tid)
                if info is not None:
                    wanted.append((info.name, tid, sorted(initialized)))
        else:
            for name, parts in topics:
                info = self._topics.registry.get(name)
                if info is None:
                    missing.append({"topic_name": name, "topic_id": UUID(int=0), "partitions": [
                        {"partition_index": p, "start_offset": -1, "leader_epoch": 0, "lag": -1, "error_code": 0,
                         "error_message": None} for p in parts]})
                else:
                    wanted.append((name, info.topic_id, list(parts)))
        out = []
        for name, tid, parts in wanted:
            out.append({"topic_name": name, "topic_id": tid,
                        "partitions": [await self._describe_partition(group_id, name, tid, p) for p in parts]})
        return {"group_id": group_id, "topics": out + missing, "error_code": 0, "error_message": None}

    async def _describe_partition(self, group_id: str, name: str, tid: UUID, partition: int) -> dict[str, Any]:
        none = {"partition_index": partition, "start_offset": -1, "leader_epoch": 0, "lag": -1, "error_code": 0,
                "error_message": None}
        code, summary, _message = await self._persister.read_state_summary(group_id, tid, partition)
        if code != ErrorCode.NONE or summary is None:
            return none
        entry = {**none, "start_offset": summary.start_offset, "leader_epoch": summary.leader_epoch}
        if summary.start_offset >= 0 and summary.delivery_complete_count >= 0:
            # KIP-1226: records not yet delivered to completion = end offset - start offset - completed above it.
            try:
                end = self._topics.log(name, partition).high_watermark
            except Exception as err:  # noqa: BLE001 - the partition went away meanwhile: answered as an error
                return {**entry, "error_code": int(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION), "error_message": str(err)}
            entry["lag"] = max(0, end - summary.start_offset - summary.delivery_complete_count)
        return entry

    async def alter_offsets(self, group_id: str, topics: Sequence[tuple[str, Sequence[tuple[int, int]]]]
                            ) -> dict[str, Any]:
        """AlterShareGroupOffsets (empty share groups only): re-initialize each
        share-partition through the share coordinator with the requested start offset. The response is
        {error_code, error_message, responses}."""
        try:
            plan = self._share().offsets_admin.alter_offsets(group_id, topics)
        except AdminError as e:
            return admin_error(e.code, e.message)
        if not plan.start_offsets:
            return {"error_code": 0, "error_message": None, "responses": plan.topics}
        if not await self._write(plan.records, [group_id]):
            return admin_error(ErrorCode.COORDINATOR_NOT_AVAILABLE, WRITE_FAILED)
        records, errors = await self._initialize(group_id, plan.state_epoch, plan.start_offsets, keep_existing=False)
        written = await self._write(records, [group_id])
        self._state_reset(group_id, {tid: list(o) for tid, o in plan.start_offsets.items()})
        if not written:
            return admin_error(ErrorCode.COORDINATOR_NOT_AVAILABLE, WRITE_FAILED)
        for topic in plan.topics:
            for part in topic["partitions"]:
                error = errors.get((topic["topic_id"], part["partition_index"]))
                if error is not None and part["error_code"] == 0:
                    part["error_code"], part["error_message"] = int(error[0]), error[1]
        log.info("share group offsets altered", group=group_id, partitions=sum(map(len, plan.start_offsets.values())),
                 failed=len(errors))
        return {"error_code": 0, "error_message": None, "responses": plan.topics}

    async def delete_offsets(self, group_id: str, topic_names: Sequence[str]) -> dict[str, Any]:
        """DeleteShareGroupOffsets (empty share groups only): the topics move to Deleting, their state is
        deleted through the share coordinator, then they leave Deleting. {error_code, error_message,
        responses}."""
        try:
            plan = self._share().offsets_admin.delete_offsets(group_id, topic_names)
        except AdminError as e:
            return admin_error(e.code, e.message)
        if plan.records and not await self._write(plan.records, [group_id]):
            return admin_error(ErrorCode.COORDINATOR_NOT_AVAILABLE, WRITE_FAILED)
        done: dict[UUID, str] = {}
        failed: list[dict[str, Any]] = []
        for tid, (name, parts) in plan.delete.items():
            code = await self.delete_state(group_id, {tid: parts})
            if code == ErrorCode.NONE:
                done[tid] = name
            else:
                failed.append({"topic_name": name, "topic_id": tid, "error_code": int(code),
                               "error_message": MESSAGES.get(code)})
        self._state_reset(group_id, {tid: parts for tid, (_, parts) in plan.delete.items()})
        topics, records = self._share().offsets_admin.delete_offsets_done(group_id, done)
        if records and not await self._write(records, [group_id]):
            return admin_error(ErrorCode.COORDINATOR_NOT_AVAILABLE, WRITE_FAILED)
        log.info("share group offsets deleted", group=group_id, topics=sorted(done.values()), failed=len(failed))
        return {"error_code": 0, "error_message": None, "responses": topics + failed + plan.refused}
