"""The group coordinator at run time: component `broker.group_coordinator` (also `broker.share_groups`, the name
the share-group code has always used).

Owns the sans-IO GroupCoordinator (classic, consumer and share groups, committed offsets) and ties it to the
broker:
 * start: replays every `__consumer_offsets` partition once (each record goes to the part that owns its type),
   then `loaded(now)`;
 * each request's records go to the group's partition (abs(javaHash(groupId)) % partitions, as Kafka) as one
   batch and are fsynced before the response is returned (`write`);
 * a background task expires sessions at the coordinator's next deadline and tells listeners which share-group
   members were removed;
 * InitializeShareGroupState requests go in-process to `broker.share_state`, then initialized()/failed();
 * topic deletions are forgotten in every group (topics_deleted).

The share-partition leader registers `add_member_removed_listener(fn)`; `fn(group_id, member_id)` runs after
the removal is durable (member left or session expired).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any
from uuid import UUID

import structlog

from broker.aio import wait_event
from broker.coordinator_log import AppendFailed, CoordinatorLog
from broker.groups.classic.manager import ClassicConfig
from broker.groups.consumer.manager import ConsumerConfig
from broker.groups.coordinator import GroupCoordinator, GroupCoordinatorConfig, OffsetsConfig
from broker.groups.records import Record, group_id_of
from broker.groups.result import GroupResult, InitializeRequest
from broker.groups.share.config import ShareGroupConfig
from broker.groups.share.manager import ShareGroupManager
from broker.groups.share.offsets_admin import AdminError
from broker.sharestate.keys import java_abs, java_string_hash
from protocol.errors import ErrorCode

log = structlog.get_logger(__name__)
_WRITE_FAILED = "The group coordinator could not write the group's records."

TOPIC = "__consumer_offsets"
MemberRemovedListener = Callable[[str, str], Any]
# How long a heartbeat waits for its group's share-partition initialization before answering without it.
INIT_WAIT_S = 2.0


def group_partition(group_id: str, num_partitions: int) -> int:
    """Kafka's GroupCoordinatorService.partitionFor: Utils.abs(groupId.hashCode()) % partitions."""
    return java_abs(java_string_hash(group_id)) % num_partitions


def _now_ms() -> int:
    return int(time.time() * 1000)


class GroupCoordinatorRuntime:
    def __init__(self, broker: Any, *, clock: Callable[[], int] = _now_ms) -> None:
        self._broker = broker
        self._clock = clock
        self.log = CoordinatorLog(broker, TOPIC)
        config = broker.config
        topics = broker.topics
        self.coordinator = GroupCoordinator(
            coordinator_config(config),
            topic_info=self._topic_info,
            topic_name=lambda tid: (info.name if (info := topics.registry.by_id(tid)) is not None else None),
            any_topic=self._any_topic,
            topic_names=lambda: (info.name for info in topics.registry.all() if not info.internal),
            topics_version=lambda: topics.registry.version)
        self.share.group_timing = self._group_timing
        self.coordinator.consumer.group_timing = self._consumer_timing
        self.consumer_enabled = "consumer" in config.get("group.coordinator.rebalance.protocols")
        # Parked JoinGroup/SyncGroup responses -> the answer they get if the coordinator must be rebuilt.
        self._waiters: dict[asyncio.Future, dict[str, Any]] = {}
        self.loaded = False
        self._listeners: list[MemberRemovedListener] = []
        self._deleted_listeners: list[Callable[[str], Any]] = []
        self._reset_listeners: list[Callable[[str, Mapping[UUID, Iterable[int]]], Any]] = []
        self._kick = asyncio.Event()
        self._init_tasks: dict[str, set[asyncio.Task]] = {}  # group id -> InitializeShareGroupState in flight
        self.share_enabled = bool(config.get("group.share.enable"))

    @property
    def share(self) -> ShareGroupManager:
        """The share-group part of the coordinator (replaced with the rest after a reload)."""
        return self.coordinator.share

    def _group_timing(self, group_id: str) -> tuple[int, int]:
        """share.session.timeout.ms and share.heartbeat.interval.ms of the group (override or broker value)."""
        configs = getattr(self._broker, "configs", None)
        cfg = configs.group_config(group_id) if configs is not None and hasattr(configs, "group_config") else {}
        default = self.share.config
        session = cfg.get("share.session.timeout.ms") or default.session_timeout_ms
        interval = cfg.get("share.heartbeat.interval.ms") or default.heartbeat_interval_ms
        return int(session), int(interval)

    def _consumer_timing(self, group_id: str) -> tuple[int, int]:
        """consumer.session.timeout.ms and consumer.heartbeat.interval.ms of the group (override or broker)."""
        configs = getattr(self._broker, "configs", None)
        cfg = configs.group_config(group_id) if configs is not None and hasattr(configs, "group_config") else {}
        default = self.coordinator.config.consumer
        session = cfg.get("consumer.session.timeout.ms") or default.session_timeout_ms
        interval = cfg.get("consumer.heartbeat.interval.ms") or default.heartbeat_interval_ms
        return int(session), int(interval)

    def _topic_info(self, name: str) -> tuple[UUID, int] | None:
        info = self._broker.topics.registry.get(name)
        if info is None or info.internal:
            return None
        return info.topic_id, info.num_partitions

    def _any_topic(self, name: str) -> tuple[UUID, int] | None:
        info = self._broker.topics.registry.get(name)
        return None if info is None else (info.topic_id, info.num_partitions)

    def add_member_removed_listener(self, fn: MemberRemovedListener) -> None:
        """`fn(group_id, member_id)` after a member left or was expired (durably); exceptions are logged."""
        self._listeners.append(fn)

    def add_group_deleted_listener(self, fn: Callable[[str], Any]) -> None:
        """`fn(group_id)` after DeleteGroups deleted a group (durably); exceptions are logged."""
        self._deleted_listeners.append(fn)

    def partition_for(self, group_id: str) -> int:
        return group_partition(group_id, self.log.num_partitions)

    # --- lifecycle ---------------------------------------------------------------------------------------------
    async def start(self) -> None:
        started = time.monotonic()
        self.coordinator.begin_load(self._clock())
        total = sum(self._replay_partition(p) for p in range(self.log.num_partitions))
        after_load = self.coordinator.loaded(self._clock())
        self.loaded = True
        log.info("groups loaded", partitions=self.log.num_partitions, records=total,
                 classic_groups=len(self.coordinator.classic.groups), share_groups=len(self.share.groups),
                 groups_with_offsets=len(self.coordinator.offsets.offsets),
                 skipped_records=self.coordinator.skipped_records, seconds=round(time.monotonic() - started, 3))
        self._broker.spawn(self._expiry_loop(), "group-coordinator-timers")
        if not after_load.empty:
            self._broker.spawn(self._run(after_load), "group-coordinator-after-load")

    def _replay_partition(self, partition: int) -> int:
        return self.log.replay(partition, self.coordinator.replay)

    def _reload(self) -> None:
        """After a failed append memory is ahead of the log: rebuild the coordinator from the log."""
        log.warning("reloading the group coordinator from the log after a failed append")
        fresh = self.coordinator.fresh()
        fresh.share.group_timing = self._group_timing
        fresh.consumer.group_timing = self._consumer_timing
        self.coordinator = fresh
        fresh.begin_load(self._clock())
        for p in range(self.log.num_partitions):
            self._replay_partition(p)
        fresh.loaded(self._clock())
        # Parked JoinGroup/SyncGroup requests belonged to the state just dropped: members rejoin.
        waiters, self._waiters = self._waiters, {}
        for fut, response in waiters.items():
            if not fut.done():
                fut.set_result(response)

    # --- writing -----------------------------------------------------------------------------------------------
    async def write(self, records: Sequence[Record], group_ids: Iterable[str] = ()) -> bool:
        """Append `records` (one batch per group partition) and wait until durable; also waits for earlier
        appends of `group_ids`' partitions. False if the records could not be written (the coordinator has then
        been rebuilt from the log)."""
        return await self._write(records, group_ids)

    async def _write(self, records: Sequence[Record], group_ids: Iterable[str] = ()) -> bool:
        by_partition: dict[int, list[tuple[bytes, bytes | None]]] = {}
        for r in records:
            by_partition.setdefault(self.partition_for(group_id_of(r.key)), []).append((r.key, r.value))
        partitions = set(by_partition) | {self.partition_for(g) for g in group_ids}
        futures = []
        try:
            for p in sorted(partitions):
                futures.append(self.log.append(p, by_partition.get(p, ())))
        except AppendFailed:
            if any(self.log.offline(p) for p in partitions):
                self._unload()
            else:
                self._reload()
            return False
        try:
            for fut in futures:
                await fut
        except Exception:  # noqa: BLE001 - answered with an error, never raised into a connection
            log.exception("group coordinator records not durable")
            if any(self.log.offline(p) for p in partitions):
                self._unload()
            return False
        return True

    def _unload(self) -> None:
        """The log directory is offline: memory may be ahead of the disk and cannot be rebuilt from it. Stop
        answering from it (COORDINATOR_LOAD_IN_PROGRESS), as Kafka's coordinator resigns the partitions of a
        failed log directory; the broker is stopping and a restart replays what is on disk."""
        if not self.loaded:
            return
        log.error("group coordinator unloaded: its log directory is offline")
        self.loaded = False
        waiters, self._waiters = self._waiters, {}
        for fut, response in waiters.items():
            if not fut.done():
                fut.set_result(response)

    # --- requests ----------------------------------------------------------------------------------------------
    async def share_heartbeat(self, request: Mapping[str, Any], client_id: str = "", client_host: str = "") -> dict:
        """Serve a ShareGroupHeartbeat request; the response is sent only after its records are durable."""
        if not self.loaded:
            return {"error_code": int(ErrorCode.COORDINATOR_LOAD_IN_PROGRESS)}
        if not self.share_enabled:
            return {"error_code": int(ErrorCode.UNSUPPORTED_VERSION),
                    "error_message": "Share groups are disabled (group.share.enable=false)."}
        res = self.share.heartbeat(request, self._clock(), client_id=client_id, client_host=client_host)
        gid = request["group_id"]
        if not await self._write(res.records, [gid] if gid else []):
            return {"error_code": int(ErrorCode.COORDINATOR_NOT_AVAILABLE),
                    "error_message": _WRITE_FAILED}
        self._kick.set()  # a new session deadline may be the earliest one
        self._after(res)
        response = res.response or {"error_code": int(ErrorCode.UNKNOWN_SERVER_ERROR)}
        if self._init_tasks.get(gid) and response.get("error_code") == 0 and response.get("member_epoch", 0) > 0:
            response = await self._after_initialization(request, response, client_id, client_host)
        return response

    async def _after_initialization(self, request: Mapping[str, Any], response: dict, client_id: str,
                                    client_host: str) -> dict:
        """Share-partitions of the group are being initialized: wait (briefly) for that and heartbeat once more
        on the member's behalf, so it gets them now rather than a heartbeat interval later (Kafka answers
        first and assigns on the next heartbeat; the result is the same, only sooner)."""
        gid = request["group_id"]
        await asyncio.wait(list(self._init_tasks.get(gid, ())), timeout=INIT_WAIT_S)
        follow = self.share.heartbeat(
            {"group_id": gid, "member_id": request["member_id"], "member_epoch": response["member_epoch"],
             "rack_id": None, "subscribed_topic_names": None},
            self._clock(), client_id=client_id, client_host=client_host)
        if not follow.response or follow.response.get("error_code") != 0:
            return response
        if not await self._write(follow.records, [gid]):
            return response  # the first answer is still true of what is durable
        self._after(follow)
        merged = {**response, **follow.response}
        if follow.response.get("assignment") is None:
            merged["assignment"] = response.get("assignment")
        return merged

    async def share_describe(self, group_ids: Sequence[str]) -> list[dict[str, Any]]:
        if not self.loaded:
            return [{"group_id": g, "error_code": int(ErrorCode.COORDINATOR_LOAD_IN_PROGRESS)} for g in group_ids]
        await self.log.barrier(self.partition_for(g) for g in group_ids if g)
        return self.share.describe(group_ids)

    def member_assignment(self, group_id: str, member_id: str) -> dict[UUID, frozenset[int]] | None:
        """The member's current assignment; None if it is not a member of share group `group_id`."""
        return self.share.member_assignment(group_id, member_id)

    def _after(self, res: GroupResult) -> None:
        """Durable now: tell listeners about removed members and start share-partition initialization."""
        for removed in res.removed_members:
            log.info("share group member removed", group=removed.group_id, member=removed.member_id,
                     reason=removed.reason)
            for fn in list(self._listeners):
                try:
                    fn(removed.group_id, removed.member_id)
                except Exception:  # noqa: BLE001 - one listener must not stop the others
                    log.exception("member-removed listener failed", group=removed.group_id)
        for init in res.initialize:
            task = self._broker.spawn(self._initialize(init), "share-group-initialize")
            tasks = self._init_tasks.setdefault(init.group_id, set())
            tasks.add(task)
            task.add_done_callback(lambda t, g=init.group_id: self._init_done(g, t))

    def _init_done(self, group_id: str, task: asyncio.Task) -> None:
        tasks = self._init_tasks.get(group_id)
        if tasks is not None:
            tasks.discard(task)
            if not tasks:
                del self._init_tasks[group_id]

    async def _initialize(self, init: InitializeRequest) -> None:
        """InitializeShareGroupState in-process; the partitions become assignable once this is durable."""
        store = getattr(self._broker, "share_state", None)
        records: list[Record] = []
        for tid, partitions in sorted(init.topics.items(), key=lambda kv: str(kv[0])):
            ok, failed = [], []
            for p in sorted(partitions):
                code = ErrorCode.UNKNOWN_SERVER_ERROR
                if store is not None and store.has_state(init.group_id, tid, p):
                    # Already there (the share-partition leader initialized it on first use, or our earlier
                    # attempt succeeded but its metadata record was lost): re-initializing would wipe progress.
                    code = ErrorCode.NONE
                elif store is not None:
                    try:
                        result = await store.initialize(init.group_id, tid, p, init.state_epoch, -1)
                        code = ErrorCode(result.error_code)
                    except Exception:  # noqa: BLE001
                        log.exception("share state initialize failed", group=init.group_id, partition=p)
                (ok if code == ErrorCode.NONE else failed).append(p)
                if code != ErrorCode.NONE:
                    log.warning("share-partition not initialized", group=init.group_id, topic_id=str(tid),
                                partition=p, error=code.name)
            # Both calls emit (and apply) records immediately, so they are computed after the awaits above.
            records += self.share.initialized(init.group_id, tid, ok)
            records += self.share.initialize_failed(init.group_id, tid, failed)
        if records:
            await self._write(records)

    # --- results of the sans-IO coordinator ---------------------------------------------------------------------
    def waiter(self, fallback: dict[str, Any]) -> asyncio.Future:
        """A future for a parked response; `fallback` answers it if the coordinator is rebuilt meanwhile."""
        fut = asyncio.get_running_loop().create_future()
        self._waiters[fut] = fallback
        fut.add_done_callback(lambda f: self._waiters.pop(f, None))
        return fut

    async def _run(self, res: GroupResult, group_ids: Iterable[str] = ()) -> bool:
        """Write the result's records (waiting for earlier writes of `group_ids` too), then release its parked
        responses and run its after-write steps (whose own results are run the same way)."""
        gids = [g for g in group_ids if g]
        ok = True
        if res.records or gids:
            ok = await self._write(res.records, gids)
        self._kick.set()  # timers may have been scheduled or cancelled: recompute the earliest deadline
        for waiter, response in res.completions:
            if ok:
                _complete(waiter, response)
            else:
                _complete(waiter, self._waiters.get(waiter) or response)
        for step in res.after_write:
            follow = step(ok)
            if follow is not None and not follow.empty:
                await self._run(follow)
        return ok

    async def _serve(self, res: GroupResult, group_id: str, error: dict[str, Any]) -> dict[str, Any]:
        """Run a result and return its response, or `error` if its records could not be written."""
        ok = await self._run(res, [group_id])
        return (res.response or {}) if ok else error

    # --- classic groups ----------------------------------------------------------------------------------------
    async def join_group(self, req: Mapping[str, Any], version: int, client_id: str, client_host: str
                         ) -> dict[str, Any]:
        fallback = {**_JOIN_ERROR, "member_id": req["member_id"]}
        if not self.loaded:
            return {**fallback, "error_code": int(ErrorCode.COORDINATOR_LOAD_IN_PROGRESS)}
        fut = self.waiter(fallback)
        res = self.coordinator.join_group(req, version, self._clock(), fut, client_id=client_id,
                                          client_host=client_host)
        await self._run(res, [req["group_id"]])
        return await fut

    async def sync_group(self, req: Mapping[str, Any]) -> dict[str, Any]:
        if not self.loaded:
            return {**_SYNC_ERROR, "error_code": int(ErrorCode.COORDINATOR_LOAD_IN_PROGRESS)}
        fut = self.waiter(dict(_SYNC_ERROR))
        res = self.coordinator.sync_group(req, self._clock(), fut)
        await self._run(res, [req["group_id"]])
        return await fut

    async def heartbeat(self, req: Mapping[str, Any]) -> dict[str, Any]:
        if not self.loaded:
            return {"error_code": 0}  # Kafka answers heartbeats blindly while the group is loading
        res = self.coordinator.heartbeat(req, self._clock())
        return await self._serve(res, req["group_id"], {"error_code": int(ErrorCode.COORDINATOR_NOT_AVAILABLE)})

    async def leave_group(self, group_id: str, members: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
        if not self.loaded:
            return {"error_code": int(ErrorCode.COORDINATOR_LOAD_IN_PROGRESS), "members": []}
        res = self.coordinator.leave_group(group_id, members, self._clock())
        return await self._serve(res, group_id, {"error_code": int(ErrorCode.COORDINATOR_NOT_AVAILABLE),
                                                 "members": []})

    # --- consumer groups (KIP-848) -------------------------------------------------------------------------------
    async def consumer_group_heartbeat(self, req: Mapping[str, Any], version: int, client_id: str,
                                       client_host: str) -> dict[str, Any]:
        if not self.loaded:
            return {"error_code": int(ErrorCode.COORDINATOR_LOAD_IN_PROGRESS), "member_epoch": 0}
        if not self.consumer_enabled:
            return {"error_code": int(ErrorCode.UNSUPPORTED_VERSION), "member_epoch": 0,
                    "error_message": "The consumer group protocol is disabled (group.coordinator.rebalance.protocols)."}
        res = self.coordinator.consumer_group_heartbeat(req, version, self._clock(), client_id=client_id,
                                                        client_host=client_host)
        return await self._serve(res, req["group_id"], {
            "error_code": int(ErrorCode.COORDINATOR_NOT_AVAILABLE), "member_epoch": 0,
            "error_message": _WRITE_FAILED})

    async def consumer_group_describe(self, group_ids: Sequence[str]) -> list[dict[str, Any]]:
        if not self.loaded:
            return [{"group_id": g, "error_code": int(ErrorCode.COORDINATOR_LOAD_IN_PROGRESS)} for g in group_ids]
        await self.log.barrier(self.partition_for(g) for g in group_ids if g)
        return self.coordinator.consumer_group_describe(group_ids)

    # --- offsets -----------------------------------------------------------------------------------------------
    async def commit_offsets(self, req: Mapping[str, Any], version: int) -> dict[str, Any]:
        if not self.loaded:
            return _commit_error(req, ErrorCode.COORDINATOR_LOAD_IN_PROGRESS)
        res = self.coordinator.commit_offsets(req, version, self._clock())
        return await self._serve(res, req["group_id"], _commit_error(req, ErrorCode.COORDINATOR_NOT_AVAILABLE))

    async def fetch_offsets(self, groups: Sequence[Mapping[str, Any]], version: int, require_stable: bool
                            ) -> list[dict[str, Any]]:
        """One answer per requested group (group_id, member_id, member_epoch, topics or None)."""
        if not self.loaded:
            return [{"group_id": g["group_id"], "topics": [], "error_code": int(ErrorCode.COORDINATOR_LOAD_IN_PROGRESS)}
                    for g in groups]
        # Offsets whose records are still being written are not answered before they are durable.
        await self.log.barrier(self.partition_for(g["group_id"]) for g in groups)
        return [self.coordinator.fetch_offsets(g["group_id"], g["topics"], version, g.get("member_id"),
                                               g.get("member_epoch", -1)) for g in groups]

    async def delete_offsets(self, group_id: str, topics: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
        if not self.loaded:
            return {"error_code": int(ErrorCode.COORDINATOR_LOAD_IN_PROGRESS), "topics": []}
        res = self.coordinator.delete_offsets(group_id, topics)
        return await self._serve(res, group_id, {"error_code": int(ErrorCode.COORDINATOR_NOT_AVAILABLE),
                                                 "topics": []})

    # --- administration ----------------------------------------------------------------------------------------
    async def list_groups(self, states: Iterable[str], types: Iterable[str]) -> tuple[int, list[dict[str, Any]]]:
        if not self.loaded:
            return int(ErrorCode.COORDINATOR_LOAD_IN_PROGRESS), []
        await self.log.barrier(range(self.log.num_partitions))
        return 0, self.coordinator.list_groups(states, types)

    async def describe_groups(self, group_ids: Sequence[str], version: int) -> list[dict[str, Any]]:
        if not self.loaded:
            return [{"group_id": g, "error_code": int(ErrorCode.COORDINATOR_LOAD_IN_PROGRESS), "group_state": "",
                     "protocol_type": "", "protocol_data": "", "members": []} for g in group_ids]
        await self.log.barrier(self.partition_for(g) for g in group_ids)
        return self.coordinator.describe_groups(group_ids, version)

    async def delete_groups(self, group_ids: Sequence[str]) -> dict[str, int]:
        """group id -> error code. A share group's topics are first recorded as Deleting, its share-partition
        state is deleted through the share coordinator, then the group's tombstones are written (as Kafka: an
        interrupted deletion leaves the topics in Deleting, and the next DeleteGroups deletes them again)."""
        if not self.loaded:
            return dict.fromkeys(group_ids, int(ErrorCode.COORDINATOR_LOAD_IN_PROGRESS))
        plan = self.coordinator.plan_delete_groups(group_ids)
        results = dict(plan.results)
        deletable = []
        for gid in plan.deletable:
            partitions = plan.share_partitions.get(gid, {})
            if partitions:
                try:
                    records = self.share.offsets_admin.begin_group_deletion(gid)
                except AdminError as e:  # a member joined while earlier groups were being deleted
                    results[gid] = int(e.code)
                    continue
                if records and not await self._write(records, [gid]):
                    results[gid] = int(ErrorCode.COORDINATOR_NOT_AVAILABLE)
                    continue
            code = await self._delete_share_state(gid, partitions)
            if code == ErrorCode.NONE:
                deletable.append(gid)
            else:
                results[gid] = int(code)
        if deletable:
            res = self.coordinator.delete_groups(deletable)
            ok = await self._run(res, deletable)
            for gid, code in (res.response or {}).get("results", {}).items():
                results[gid] = code if ok else int(ErrorCode.COORDINATOR_NOT_AVAILABLE)
                if ok and code == 0:
                    for fn in list(self._deleted_listeners):
                        try:
                            fn(gid)
                        except Exception:  # noqa: BLE001 - one listener must not stop the others
                            log.exception("group-deleted listener failed", group=gid)
        return results

    async def _delete_share_state(self, group_id: str, partitions: Mapping[UUID, frozenset[int]]) -> ErrorCode:
        store = getattr(self._broker, "share_state", None)
        if not partitions or store is None:
            return ErrorCode.NONE
        for tid, parts in partitions.items():
            for p in sorted(parts):
                if not store.has_state(group_id, tid, p):
                    continue
                try:
                    result = await store.delete_state(group_id, tid, p)
                except Exception:  # noqa: BLE001 - answered with an error code
                    log.exception("share state delete failed", group=group_id, partition=p)
                    return ErrorCode.UNKNOWN_SERVER_ERROR
                code = ErrorCode(result.error_code)
                if code not in (ErrorCode.NONE, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION):
                    return code
        return ErrorCode.NONE

    # --- share-group offsets (DescribeShareGroupOffsets, AlterShareGroupOffsets, DeleteShareGroupOffsets) -------
    def add_share_state_reset_listener(self, fn: Callable[[str, Mapping[UUID, Iterable[int]]], Any]) -> None:
        """`fn(group_id, {topic_id: partitions})` after AlterShareGroupOffsets or DeleteShareGroupOffsets
        replaced or deleted those share-partitions' durable state: the share-partition leader drops its copy."""
        self._reset_listeners.append(fn)

    def _state_reset(self, group_id: str, partitions: Mapping[UUID, Iterable[int]]) -> None:
        for fn in list(self._reset_listeners):
            try:
                fn(group_id, partitions)
            except Exception:  # noqa: BLE001 - one listener must not stop the others
                log.exception("share-state-reset listener failed", group=group_id)

    def _share_admin_refusal(self) -> tuple[ErrorCode, str] | None:
        if not self.loaded:
            return ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, _MESSAGES[ErrorCode.COORDINATOR_LOAD_IN_PROGRESS]
        if not self.share_enabled:
            return ErrorCode.UNSUPPORTED_VERSION, "Share groups are disabled (group.share.enable=false)."
        return None

    async def describe_share_offsets(self, group_id: str, topics: Sequence[tuple[str, Sequence[int]]] | None
                                     ) -> dict[str, Any]:
        """One DescribeShareGroupOffsets group (v1 shape: lag per KIP-1226). `topics` None asks for every
        share-partition with state. As in Kafka, named topics are answered without checking the group (no
        state reads as start offset -1), unknown topics with a zero topic id, and a share-partition the share
        coordinator cannot summarize as "no offset" rather than as an error."""
        refusal = self._share_admin_refusal()
        if refusal is not None:
            return {"group_id": group_id, "topics": [], "error_code": int(refusal[0]), "error_message": refusal[1]}
        await self.log.barrier([self.partition_for(group_id)])
        wanted: list[tuple[str, UUID, Sequence[int]]] = []
        missing: list[dict[str, Any]] = []
        if topics is None:
            try:
                found = self.share.offsets_admin.initialized_share_partitions(group_id)
            except AdminError as e:
                return {"group_id": group_id, "topics": [], "error_code": int(e.code), "error_message": e.message}
            for tid, (_name, parts) in sorted(found.items(), key=lambda kv: kv[1][0]):
                info = self._broker.topics.registry.by_id(tid)
                if info is not None:
                    wanted.append((info.name, tid, sorted(parts)))
        else:
            for name, parts in topics:
                info = self._any_topic(name)
                if info is None:
                    missing.append({"topic_name": name, "topic_id": UUID(int=0), "partitions": [
                        {"partition_index": p, "start_offset": -1, "leader_epoch": 0, "lag": -1, "error_code": 0,
                         "error_message": None} for p in parts]})
                else:
                    wanted.append((name, info[0], list(parts)))
        out = []
        store = getattr(self._broker, "share_state", None)
        for name, tid, parts in wanted:
            out.append({"topic_name": name, "topic_id": tid,
                        "partitions": [await self._describe_partition(store, group_id, name, tid, p) for p in parts]})
        return {"group_id": group_id, "topics": out + missing, "error_code": 0, "error_message": None}

    async def _describe_partition(self, store: Any, group_id: str, name: str, tid: UUID, partition: int
                                  ) -> dict[str, Any]:
        none = {"partition_index": partition, "start_offset": -1, "leader_epoch": 0, "lag": -1, "error_code": 0,
                "error_message": None}
        if store is None:
            return none
        code, summary, _message = await store.read_state_summary(group_id, tid, partition)
        if code != ErrorCode.NONE or summary is None:
            return none
        entry = {**none, "start_offset": summary.start_offset, "leader_epoch": summary.leader_epoch}
        if summary.start_offset >= 0 and summary.delivery_complete_count >= 0:
            # KIP-1226: records not yet delivered to completion = end offset - start offset - completed above it.
            try:
                end = self._broker.topics.log(name, partition).high_watermark
            except Exception as err:  # noqa: BLE001 - the partition went away meanwhile: answered as an error
                return {**entry, "error_code": int(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION), "error_message": str(err)}
            entry["lag"] = max(0, end - summary.start_offset - summary.delivery_complete_count)
        return entry

    async def _share_offsets_admin_start(self, group_id: str) -> dict[str, Any] | None:
        """The error response of an Alter/DeleteShareGroupOffsets that cannot go on, else None once the group's
        earlier records are durable."""
        refusal = self._share_admin_refusal()
        if refusal is not None:
            return _share_admin_error(*refusal)
        if not group_id:
            return _share_admin_error(ErrorCode.INVALID_GROUP_ID, _MESSAGES[ErrorCode.INVALID_GROUP_ID])
        await self.log.barrier([self.partition_for(group_id)])
        return None

    async def alter_share_offsets(self, group_id: str, topics: Sequence[tuple[str, Sequence[tuple[int, int]]]]
                                  ) -> dict[str, Any]:
        """AlterShareGroupOffsets (empty share groups only): bump the group epoch, then re-initialize each
        share-partition through the share coordinator with the requested start offset. The response is
        {error_code, error_message, responses}."""
        refused = await self._share_offsets_admin_start(group_id)
        if refused is not None:
            return refused
        try:
            plan = self.share.offsets_admin.alter_offsets(group_id, topics)
        except AdminError as e:
            return _share_admin_error(e.code, e.message)
        if not plan.start_offsets:
            return {"error_code": 0, "error_message": None, "responses": plan.topics}
        if not await self._write(plan.records, [group_id]):
            return _share_admin_error(ErrorCode.COORDINATOR_NOT_AVAILABLE, _WRITE_FAILED)
        store = getattr(self._broker, "share_state", None)
        errors: dict[tuple[UUID, int], tuple[ErrorCode, str | None]] = {}
        records: list[Record] = []
        for tid, offsets in plan.start_offsets.items():
            ok, failed = [], []
            for p, start in sorted(offsets.items()):
                code, message = ErrorCode.UNKNOWN_SERVER_ERROR, "The share coordinator is not available."
                if store is not None:
                    try:
                        result = await store.initialize(group_id, tid, p, plan.state_epoch, start)
                        code, message = ErrorCode(result.error_code), result.error_message
                    except Exception:  # noqa: BLE001 - answered as the partition's error
                        log.exception("share state initialize failed", group=group_id, partition=p)
                (ok if code == ErrorCode.NONE else failed).append(p)
                if code != ErrorCode.NONE:
                    errors[(tid, p)] = (code, message or _MESSAGES.get(code))
            records += self.share.initialized(group_id, tid, ok)
            records += self.share.initialize_failed(group_id, tid, failed)
        written = await self._write(records, [group_id])
        self._state_reset(group_id, {tid: list(o) for tid, o in plan.start_offsets.items()})
        if not written:
            return _share_admin_error(ErrorCode.COORDINATOR_NOT_AVAILABLE, _WRITE_FAILED)
        for topic in plan.topics:
            for part in topic["partitions"]:
                error = errors.get((topic["topic_id"], part["partition_index"]))
                if error is not None and part["error_code"] == 0:
                    part["error_code"], part["error_message"] = int(error[0]), error[1]
        log.info("share group offsets altered", group=group_id, partitions=sum(map(len, plan.start_offsets.values())),
                 failed=len(errors))
        return {"error_code": 0, "error_message": None, "responses": plan.topics}

    async def delete_share_offsets(self, group_id: str, topic_names: Sequence[str]) -> dict[str, Any]:
        """DeleteShareGroupOffsets (empty share groups only): the topics move to Deleting, their state is
        deleted through the share coordinator, then they leave Deleting. {error_code, error_message,
        responses}."""
        refused = await self._share_offsets_admin_start(group_id)
        if refused is not None:
            return refused
        try:
            plan = self.share.offsets_admin.delete_offsets(group_id, topic_names)
        except AdminError as e:
            return _share_admin_error(e.code, e.message)
        if plan.records and not await self._write(plan.records, [group_id]):
            return _share_admin_error(ErrorCode.COORDINATOR_NOT_AVAILABLE, _WRITE_FAILED)
        store = getattr(self._broker, "share_state", None)
        done: dict[UUID, str] = {}
        failed: list[dict[str, Any]] = []
        for tid, (name, parts) in plan.delete.items():
            code = await self._delete_share_state(group_id, {tid: parts}) if store is not None else ErrorCode.NONE
            if code == ErrorCode.NONE:
                done[tid] = name
            else:
                failed.append({"topic_name": name, "topic_id": tid, "error_code": int(code),
                               "error_message": _MESSAGES.get(code)})
        self._state_reset(group_id, {tid: parts for tid, (_, parts) in plan.delete.items()})
        topics, records = self.share.offsets_admin.delete_offsets_done(group_id, done)
        if records and not await self._write(records, [group_id]):
            return _share_admin_error(ErrorCode.COORDINATOR_NOT_AVAILABLE, _WRITE_FAILED)
        log.info("share group offsets deleted", group=group_id, topics=sorted(done.values()), failed=len(failed))
        return {"error_code": 0, "error_message": None, "responses": topics + failed + plan.refused}

    # --- topic deletion ----------------------------------------------------------------------------------------
    async def topics_deleted(self, topic_ids: Iterable[UUID], names: Iterable[str] = ()) -> None:
        records = self.share.topics_deleted(topic_ids)
        if records:
            await self._write(records)
        for name in names:
            await self._run(self.coordinator.topic_deleted(name))

    # --- session expiry ----------------------------------------------------------------------------------------
    async def _expiry_loop(self) -> None:
        while True:
            deadline = self.coordinator.next_deadline()
            wait_s = 3600.0 if deadline is None else max(0.0, (deadline - self._clock()) / 1000)
            self._kick.clear()
            if wait_s > 0 and await wait_event(self._kick, min(wait_s, 3600.0)):
                continue  # something changed: recompute the earliest deadline
            try:
                await self.expire_now()
            except Exception:  # noqa: BLE001 - the timer must keep running
                log.exception("group coordinator timers failed")
                await asyncio.sleep(1)

    async def expire_now(self) -> None:
        now = self._clock()
        res = self.share.expire_sessions(now)
        if (res.records or res.removed_members) and await self._write(res.records):
            self._after(res)
        await self._run(self.coordinator.tick(now))


# Kafka's Errors messages for the group-level errors of the share-group offsets APIs.
_MESSAGES = {
    ErrorCode.COORDINATOR_LOAD_IN_PROGRESS: "The coordinator is loading and hence can't process requests.",
    ErrorCode.COORDINATOR_NOT_AVAILABLE: "The coordinator is not available.",
    ErrorCode.INVALID_GROUP_ID: "The configured groupId is invalid.",
    ErrorCode.UNKNOWN_TOPIC_OR_PARTITION: "This server does not host this topic-partition.",
    ErrorCode.UNKNOWN_SERVER_ERROR: "The server experienced an unexpected error when processing the request.",
    ErrorCode.KAFKA_STORAGE_ERROR: "Disk error when trying to access log file on the disk.",
    ErrorCode.FENCED_STATE_EPOCH: "The share coordinator rejected the request because the share-group state "
                                  "epoch did not match.",
}

_JOIN_ERROR = {"error_code": int(ErrorCode.COORDINATOR_NOT_AVAILABLE), "member_id": "", "generation_id": -1,
               "protocol_type": None, "protocol_name": None, "leader": "", "skip_assignment": False, "members": []}
_SYNC_ERROR = {"error_code": int(ErrorCode.COORDINATOR_NOT_AVAILABLE), "assignment": b"", "protocol_type": None,
               "protocol_name": None}


def _complete(waiter: Any, response: dict[str, Any]) -> None:
    if isinstance(waiter, asyncio.Future) and not waiter.done():
        waiter.set_result(response)


def _commit_error(req: Mapping[str, Any], code: ErrorCode) -> dict[str, Any]:
    return {"topics": [{"name": t.get("name"), "topic_id": t.get("topic_id"), "partitions": [
        {"partition_index": p["partition_index"], "error_code": int(code)} for p in t["partitions"]]}
        for t in req["topics"]]}


def coordinator_config(config: Any) -> GroupCoordinatorConfig:
    """The group coordinator's settings from the broker config (Kafka's names)."""
    return GroupCoordinatorConfig(
        consumer=ConsumerConfig(
            session_timeout_ms=config.get("group.consumer.session.timeout.ms"),
            heartbeat_interval_ms=config.get("group.consumer.heartbeat.interval.ms"),
            max_size=config.get("group.consumer.max.size"),
            assignors=tuple(config.get("group.consumer.assignors")),
            migration_policy=config.get("group.consumer.migration.policy")),
        classic=ClassicConfig(
            min_session_timeout_ms=config.get("group.min.session.timeout.ms"),
            max_session_timeout_ms=config.get("group.max.session.timeout.ms"),
            initial_rebalance_delay_ms=config.get("group.initial.rebalance.delay.ms"),
            max_size=config.get("group.max.size")),
        offsets=OffsetsConfig(
            retention_ms=config.get("offsets.retention.minutes") * 60_000,
            retention_check_interval_ms=config.get("offsets.retention.check.interval.ms"),
            metadata_max_bytes=config.get("offset.metadata.max.bytes")),
        share=ShareGroupConfig(
            session_timeout_ms=config.get("group.share.session.timeout.ms"),
            heartbeat_interval_ms=config.get("group.share.heartbeat.interval.ms"),
            max_size=config.get("group.share.max.size"),
            initialize_retry_interval_ms=config.get("group.share.initialize.retry.interval.ms")))


def build(broker: Any) -> GroupCoordinatorRuntime:
    """Create component `group_coordinator` (call while building components) and follow topic deletions.
    `broker.share_groups` names the same object for the share-group code (not a second component)."""
    runtime = broker.add_component("group_coordinator", GroupCoordinatorRuntime(broker))
    broker.share_groups = runtime
    broker.topics.on_delete(lambda info: broker.spawn(runtime.topics_deleted([info.topic_id], [info.name]),
                                                      "group-coordinator-delete-topic"))
    return runtime



def _share_admin_error(code: ErrorCode, message: str | None) -> dict[str, Any]:
    """A whole-request error of Alter/DeleteShareGroupOffsets."""
    return {"error_code": int(code), "error_message": message, "responses": []}
