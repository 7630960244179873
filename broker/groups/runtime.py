"""The group coordinator at run time: component `broker.group_coordinator`.

Hosts the sans-IO GroupCoordinator (classic, consumer and share groups, committed offsets) on the coordinator
runtime (broker.coordinator: its shard is broker.groups.shard) over `__consumer_offsets`, and ties it to the
broker:
 * start: the runtime replays every `__consumer_offsets` partition once (each record goes to the part that owns
   its type), then `loaded(now)`;
 * each request's records go to the group's partition (abs(javaHash(groupId)) % partitions, as Kafka) as one
   batch and are fsynced before the response is returned (`write`); a failed append rebuilds the coordinator
   from the log, an offline log directory stops it answering;
 * a timer expires sessions at the coordinator's next deadline and tells listeners which share-group members
   were removed;
 * share-partition state is initialized and deleted through the share coordinator, and the share-group offsets
   admin APIs are served, by ShareStateAdmin (share/state_admin.py) once this runtime has let them through;
 * topic deletions are forgotten in every group (topics_deleted);
 * transactional offset commits (TxnOffsetCommit, KIP-98/447): verified with the transaction coordinator (its
   TxnPartitionVerifier, KIP-890), written as one transactional batch of the producer and held pending; this
   runtime is the TxnMarkerWriter of `__consumer_offsets`: a marker is appended as a control batch, then
   commits or drops the pending offsets of its producer in the groups of that partition.

Constructed with its collaborators (collaborators.py) by the composition root (broker/app.py).

The share-partition leader registers `add_member_removed_listener(fn)`; `fn(group_id, member_id)` runs after
the removal is durable (member left or session expired).
"""

from __future__ import annotations

import asyncio
import functools
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any
from uuid import UUID

import structlog

from broker.cluster.topics import TopicError
from broker.coordinator.coordinator_log import CoordinatorLog
from broker.coordinator.periodic import PeriodicTask
from broker.coordinator.runtime import (
    Appended,
    CoordinatorRuntime,
    CoordinatorWriteError,
    KeyValue,
    LoadSummary,
    WriteOutcome,
)
from broker.groups.collaborators import GroupConfigs, Spawn, TopicAuthorizer, Topics
from broker.groups.coordinator import GroupCoordinator, GroupCoordinatorConfig
from broker.groups.messages import MESSAGES, WRITE_FAILED
from broker.groups.records import Record, group_id_of
from broker.groups.regex_resolver import RegexResolver
from broker.groups.result import GroupResult
from broker.groups.shard import GroupCoordinatorShard
from broker.groups.share.manager import ShareGroupManager
from broker.groups.share.state_admin import (
    ShareStateAdmin,
    StateResetListener,
    admin_error,
)
from broker.groups.streams.manager import StreamsSettings
from broker.groups.streams.topology import MISSING_INTERNAL_TOPICS, InternalTopic
from broker.linear_regex import RegexUnavailable, RegexWorker
from broker.pacing import Pacer
from broker.share_coordinator.persister import Persister
from broker.txn.markers import TopicPartitionKey, TxnPartitionVerifier
from broker.txn.results import TxnMarker
from protocol.errors import ErrorCode
from protocol.java_hash import java_abs, java_string_hash

log = structlog.get_logger(__name__)

TOPIC = "__consumer_offsets"
MemberRemovedListener = Callable[[str, str], Any]


@functools.lru_cache(maxsize=65_536)
def group_partition(group_id: str, num_partitions: int) -> int:
    """Kafka's GroupCoordinatorService.partitionFor: Utils.abs(groupId.hashCode()) % partitions. Cached: Java's
    hash is computed here one UTF-16 unit at a time, and every record of a write asks again (a group id of
    32 767 characters cost 3 ms a record: a session expiry writing hundreds of them held the loop)."""
    return java_abs(java_string_hash(group_id)) % num_partitions


# Kafka's handleOperationException: errors of the log or of the verification a client can act on.
_OPERATION_ERRORS = {
    ErrorCode.UNKNOWN_TOPIC_OR_PARTITION: ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.NOT_ENOUGH_REPLICAS: ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.REQUEST_TIMED_OUT: ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.NOT_LEADER_OR_FOLLOWER: ErrorCode.NOT_COORDINATOR,
    ErrorCode.KAFKA_STORAGE_ERROR: ErrorCode.NOT_COORDINATOR,
}


def txn_verification_error(code: ErrorCode, version: int) -> ErrorCode:
    """The TxnOffsetCommit answer for a failed verification of the offsets partition (Kafka's
    AddPartitionsToTxnManager and CoordinatorPartitionWriter): a fenced producer is INVALID_PRODUCER_EPOCH; a
    partition not in the transaction TRANSACTION_ABORTABLE from v4 (genericError), INVALID_TXN_STATE below."""
    if code == ErrorCode.PRODUCER_FENCED:
        return ErrorCode.INVALID_PRODUCER_EPOCH
    if code == ErrorCode.TRANSACTION_ABORTABLE and version < 4:
        return ErrorCode.INVALID_TXN_STATE
    return _OPERATION_ERRORS.get(code, code)


def _now_ms() -> int:
    return int(time.time() * 1000)


class GroupCoordinatorRuntime:
    def __init__(self, config: GroupCoordinatorConfig, coordinator_log: CoordinatorLog, topics: Topics,
                 group_configs: GroupConfigs, persister: Persister, spawn: Spawn, *,
                 txn_verifier: Callable[[], TxnPartitionVerifier], authorizer: TopicAuthorizer,
                 regex_worker: RegexWorker,
                 consumer_enabled: bool, share_enabled: bool, streams_enabled: bool = True,
                 clock: Callable[[], int] = _now_ms) -> None:
        """`config` the coordinator's settings, `coordinator_log` the `__consumer_offsets`
        log, `topics` the broker's topics, `group_configs` their effective values per group, `persister` the
        share coordinator, `spawn` for background tasks; `txn_verifier()` the transaction coordinator (a late-bound
        reference: it is built after this runtime, which is its marker writer), asked whether a TxnOffsetCommit's
        offsets partition is in the producer's transaction; `authorizer` who may DESCRIBE which topics (regular
        expression subscriptions resolve to those), `regex_worker` the process that compiles and matches them;
        `consumer_enabled` / `share_enabled` / `streams_enabled` whether the consumer group protocol and the
        streams group protocol (group.coordinator.rebalance.protocols) and share groups (group.share.enable)
        are on."""
        self._streams_config = config.streams
        self._clock = clock
        self._txn_verifier = txn_verifier
        self._spawn = spawn
        self._topics = topics
        self._group_configs = group_configs
        self.log = coordinator_log
        self.regexes = RegexResolver(topics.registry, authorizer, regex_worker)
        self._shard = GroupCoordinatorShard(GroupCoordinator(
            config,
            topic_info=self._topic_info,
            topic_name=lambda tid: (info.name if (info := topics.registry.by_id(tid)) is not None else None),
            any_topic=self._any_topic,
            topics_version=lambda: topics.registry.version, acl_version=lambda: authorizer.acl_version,
            share_timing=self._share_timing, consumer_timing=self._consumer_timing,
            share_assignment_interval=self._share_assignment_interval,
            streams_settings=self._streams_settings),
            clock=clock, partition_for=self.partition_for, num_partitions=lambda: coordinator_log.num_partitions)
        self.runtime: CoordinatorRuntime[GroupResult] = CoordinatorRuntime(
            log=coordinator_log, shard=self._shard, spawn=spawn, name="group coordinator records",
            on_reloaded=self._reloaded, on_failed=self._failed)
        self._timers = PeriodicTask("group-coordinator-timers", self.expire_now, next_due_s=self._next_due_s,
                                    failure_event="group coordinator timers failed", retry_after_s=1.0)
        self.consumer_enabled = consumer_enabled
        self.streams_enabled = streams_enabled
        self.share_enabled = share_enabled
        # Parked JoinGroup/SyncGroup responses -> the answer they get if the coordinator must be rebuilt.
        self._waiters: dict[asyncio.Future[dict[str, Any]], dict[str, Any]] = {}
        self._resigned = False  # its log directory went offline: it answers from memory no more
        self._listeners: list[MemberRemovedListener] = []
        self._deleted_listeners: list[Callable[[str], Any]] = []
        self.share_admin = ShareStateAdmin(persister, topics, share=lambda: self.coordinator.share,
                                           write=self._write, spawn=spawn)

    @property
    def coordinator(self) -> GroupCoordinator:
        """The sans-IO coordinator (a fresh one replaces it when the runtime rebuilds it from the log)."""
        return self._shard.coordinator

    @property
    def loaded(self) -> bool:
        """Every `__consumer_offsets` partition loaded, and its log directory online."""
        return self.runtime.active

    @property
    def share(self) -> ShareGroupManager:
        """The share-group part of the coordinator (replaced with the rest after a reload)."""
        return self.coordinator.share

    def _share_timing(self, group_id: str) -> tuple[int, int]:
        """share.session.timeout.ms and share.heartbeat.interval.ms of the group (override or broker value)."""
        cfg = self._group_configs.group_settings(group_id)
        return cfg.share_session_timeout_ms, cfg.share_heartbeat_interval_ms

    def _share_assignment_interval(self, group_id: str) -> int:
        """share.assignment.interval.ms of the group (override or broker value)."""
        return self._group_configs.group_settings(group_id).share_assignment_interval_ms

    def _streams_settings(self, group_id: str) -> StreamsSettings:
        """The streams group's settings: its group configs over the broker's values."""
        cfg = self._group_configs.group_settings(group_id)
        broker = self._streams_config
        return StreamsSettings(
            session_timeout_ms=cfg.streams_session_timeout_ms, heartbeat_interval_ms=cfg.streams_heartbeat_interval_ms,
            initial_rebalance_delay_ms=cfg.streams_initial_rebalance_delay_ms,
            assignment_interval_ms=cfg.streams_assignment_interval_ms,
            num_standby_replicas=cfg.streams_num_standby_replicas,
            rack_aware_assignment_tags=cfg.streams_rack_aware_assignment_tags,
            task_offset_interval_ms=cfg.streams_task_offset_interval_ms,
            acceptable_recovery_lag=cfg.streams_acceptable_recovery_lag, max_size=broker.max_size)

    def _consumer_timing(self, group_id: str) -> tuple[int, int]:
        """consumer.session.timeout.ms and consumer.heartbeat.interval.ms of the group (override or broker)."""
        cfg = self._group_configs.group_settings(group_id)
        return cfg.consumer_session_timeout_ms, cfg.consumer_heartbeat_interval_ms

    def _topic_info(self, name: str) -> tuple[UUID, int] | None:
        info = self._topics.registry.get(name)
        if info is None or info.internal:
            return None
        return info.topic_id, info.num_partitions

    def _any_topic(self, name: str) -> tuple[UUID, int] | None:
        info = self._topics.registry.get(name)
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

    async def _partitions_of(self, group_ids: Iterable[str]) -> set[int]:
        """The `__consumer_offsets` partitions of `group_ids`, yielding to the loop between ids: a request may name
        a hundred thousand distinct ones, each a Java string hash."""
        pacer = Pacer()
        out = set()
        for gid in set(group_ids):
            out.add(self.partition_for(gid))
            await pacer.pace()
        return out

    async def start(self) -> None:
        loaded = self.runtime.load(range(self.log.num_partitions))
        after_load = loaded.result
        log.info("groups loaded", partitions=self.log.num_partitions, records=loaded.records,
                 classic_groups=len(self.coordinator.classic.groups), share_groups=len(self.share.groups),
                 groups_with_offsets=len(self.coordinator.offsets.offsets),
                 skipped_records=self.coordinator.skipped_records, seconds=round(loaded.seconds, 3))
        self.runtime.schedule(self._timers)
        if not after_load.empty:
            self._spawn(self._run(after_load), "group-coordinator-after-load")

    def _reloaded(self, _summary: LoadSummary[GroupResult]) -> None:
        """After a failed append the runtime rebuilt the coordinator from the log (its after-load work is dropped:
        the parked requests it would answer belonged to the state just dropped, and members rejoin)."""
        log.warning("reloading the group coordinator from the log after a failed append")
        self._release_waiters()

    def _release_waiters(self) -> None:
        waiters, self._waiters = self._waiters, {}
        for fut, response in waiters.items():
            if not fut.done():
                fut.set_result(response)

    # --- writing -----------------------------------------------------------------------------------------------
    async def write(self, records: Sequence[Record], group_ids: Iterable[str] = ()) -> bool:
        """Append `records` (one batch per group partition) and wait until durable; also waits for earlier
        appends of `group_ids`' partitions. False if the records could not be written (the coordinator has then
        been rebuilt from the log, or stopped answering if its log directory is offline)."""
        return await self._write(records, group_ids)

    async def _write(self, records: Sequence[Record], group_ids: Iterable[str] = ()) -> bool:
        by_partition: dict[int, list[KeyValue]] = {}
        for r in records:
            by_partition.setdefault(self.partition_for(group_id_of(r.key)), []).append((r.key, r.value))
        wait_for = {self.partition_for(g) for g in group_ids}
        return await self.runtime.write(by_partition, wait_for) is WriteOutcome.COMMITTED

    def _failed(self, _partitions: Iterable[int]) -> None:
        """The log directory is offline: memory may be ahead of the disk and cannot be rebuilt from it. Stop
        answering from it (COORDINATOR_LOAD_IN_PROGRESS), as Kafka's coordinator resigns the partitions of a
        failed log directory; the broker is stopping and a restart replays what is on disk."""
        if not self._resigned:
            self._resigned = True
            log.error("group coordinator unloaded: its log directory is offline")
        self._release_waiters()

    # --- requests ----------------------------------------------------------------------------------------------
    async def share_heartbeat(self, request: Mapping[str, Any], client_id: str = "", client_host: str = "") -> dict[str, Any]:
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
                    "error_message": WRITE_FAILED}
        self._timers.wake()  # a new session deadline may be the earliest one
        self._after(res)
        # Share-partitions whose initialization starts here are assigned by a later heartbeat, once the share
        # coordinator has initialized them (as Kafka: the first heartbeat of a new group's member is answered
        # with an empty assignment, the partitions come with the next heartbeat after initialization).
        return res.response or {"error_code": int(ErrorCode.UNKNOWN_SERVER_ERROR)}

    async def share_describe(self, group_ids: Sequence[str]) -> list[dict[str, Any]]:
        if not self.loaded:
            return [{"group_id": g, "error_code": int(ErrorCode.COORDINATOR_LOAD_IN_PROGRESS)} for g in group_ids]
        await self.runtime.barrier(await self._partitions_of(group_ids))
        return await _describe_paced(group_ids, self.share.describe_group)

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
            self.share_admin.initialize_later(init)

    # --- results of the sans-IO coordinator ---------------------------------------------------------------------
    def waiter(self, fallback: dict[str, Any]) -> asyncio.Future[dict[str, Any]]:
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
        self._timers.wake()  # timers may have been scheduled or cancelled: recompute the earliest deadline
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
                                       client_host: str, principal: str = "User:ANONYMOUS",
                                       host: str = "") -> dict[str, Any]:
        """`principal` and `host` (the client's address) are whose DESCRIBE permission filters the topics the
        member's regular expression resolves to."""
        if not self.loaded:
            return {"error_code": int(ErrorCode.COORDINATOR_LOAD_IN_PROGRESS), "member_epoch": 0}
        if not self.consumer_enabled:
            return {"error_code": int(ErrorCode.UNSUPPORTED_VERSION), "member_epoch": 0,
                    "error_message": "The consumer group protocol is disabled (group.coordinator.rebalance.protocols)."}
        identity = self.regexes.identity(principal, host)
        if not self.coordinator.consumer.regex_work(req, identity):
            res = self.coordinator.consumer_group_heartbeat(req, version, self._clock(), client_id=client_id,
                                                            client_host=client_host, identity=identity)
        else:
            # Regular expressions to check or resolve: off the loop, then served at once with the verdicts.
            async with self.regexes.group_lock(req["group_id"]):
                work = self.coordinator.consumer.regex_work(req, identity)  # again: the lock may have waited
                try:
                    verdicts = await self.regexes.resolve(work) if work else {}
                except RegexUnavailable:
                    return {"error_code": int(ErrorCode.COORDINATOR_NOT_AVAILABLE), "member_epoch": 0,
                            "error_message": "The regular expressions could not be resolved; retry."}
                if not self.loaded:
                    return {"error_code": int(ErrorCode.COORDINATOR_LOAD_IN_PROGRESS), "member_epoch": 0}
                res = self.coordinator.consumer_group_heartbeat(req, version, self._clock(), client_id=client_id,
                                                                client_host=client_host, identity=identity,
                                                                regexes=verdicts)
        return await self._serve(res, req["group_id"], {
            "error_code": int(ErrorCode.COORDINATOR_NOT_AVAILABLE), "member_epoch": 0,
            "error_message": WRITE_FAILED})

    # --- streams groups ----------------------------------------------------------------------------------------
    async def streams_group_heartbeat(self, req: Mapping[str, Any], version: int, client_id: str,
                                      client_host: str, may_create: Callable[[str], bool] = lambda topic: True
                                      ) -> dict[str, Any]:
        """Serve a StreamsGroupHeartbeat once its records are durable; the internal topics the group's topology
        is missing are then created (as Kafka's broker does after the heartbeat), each answer telling
        MISSING_INTERNAL_TOPICS until they exist."""
        if not self.loaded:
            return {"error_code": int(ErrorCode.COORDINATOR_LOAD_IN_PROGRESS), "member_epoch": 0, "status": []}
        if not self.streams_enabled:
            return {"error_code": int(ErrorCode.UNSUPPORTED_VERSION), "member_epoch": 0, "status": [],
                    "error_message": "The streams group protocol is disabled (group.coordinator.rebalance.protocols)."}
        res = self.coordinator.streams_group_heartbeat(req, version, self._clock(), client_id=client_id,
                                                       client_host=client_host)
        response = await self._serve(res, req["group_id"], {
            "error_code": int(ErrorCode.COORDINATOR_NOT_AVAILABLE), "member_epoch": 0, "status": [],
            "error_message": WRITE_FAILED})
        topics = getattr(res, "internal_topics", [])
        if topics and response.get("error_code") == 0:
            allowed = [t for t in topics if may_create(t.name)]
            refused = [t.name for t in topics if t not in allowed]
            if refused:
                # As Kafka's KafkaApis: topics the client may not CREATE are named in the status, not created.
                response = {**response, "status": _unauthorized_create(response.get("status") or [], refused)}
            await self._create_internal_topics(req["group_id"], allowed)
        return response

    async def _create_internal_topics(self, group_id: str, topics: Sequence[InternalTopic]) -> None:
        for t in topics:
            if self._topics.registry.get(t.name) is not None:
                continue
            try:
                await self._topics.create_topic(t.name, num_partitions=t.partitions,
                                                replication_factor=t.replication_factor or -1, assignments=[],
                                                configs=list(t.configs), validate_only=False)
                log.info("streams group internal topic created", group=group_id, topic=t.name,
                         partitions=t.partitions)
            except TopicError as e:
                log.warning("streams group internal topic not created", group=group_id, topic=t.name,
                            error=e.code.name, reason=e.message)

    async def streams_group_describe(self, group_ids: Sequence[str]) -> list[dict[str, Any]]:
        if not self.loaded:
            return [{"group_id": g, "error_code": int(ErrorCode.COORDINATOR_LOAD_IN_PROGRESS)} for g in group_ids]
        await self.runtime.barrier(await self._partitions_of(group_ids))
        return await _describe_paced(group_ids, lambda gid: (self.coordinator.streams.describe(gid), []))

    async def consumer_group_describe(self, group_ids: Sequence[str]) -> list[dict[str, Any]]:
        if not self.loaded:
            return [{"group_id": g, "error_code": int(ErrorCode.COORDINATOR_LOAD_IN_PROGRESS)} for g in group_ids]
        await self.runtime.barrier(await self._partitions_of(group_ids))
        return await _describe_paced(group_ids, self.coordinator.consumer_group_describe_one)

    # --- offsets -----------------------------------------------------------------------------------------------
    async def commit_offsets(self, req: Mapping[str, Any], version: int) -> dict[str, Any]:
        if not self.loaded:
            return _commit_error(req, ErrorCode.COORDINATOR_LOAD_IN_PROGRESS)
        res = self.coordinator.commit_offsets(req, version, self._clock())
        return await self._serve(res, req["group_id"], _commit_error(req, ErrorCode.COORDINATOR_NOT_AVAILABLE))

    async def commit_txn_offsets(self, req: Mapping[str, Any], version: int) -> dict[str, Any]:
        """Serve TxnOffsetCommit (topics already checked by the handler): verify with the transaction coordinator
        that the group's offsets partition is in the producer's transaction (AddOffsetsToTxn added it; Kafka
        verifies for every version, KIP-890 part 1), then write the offsets as one transactional batch of the
        producer; they stay pending until the transaction's marker. Answers once durable."""
        gid = req["group_id"]
        if not self.loaded:
            return _txn_commit_error(req, ErrorCode.COORDINATOR_LOAD_IN_PROGRESS)
        if not gid:
            return _txn_commit_error(req, ErrorCode.INVALID_GROUP_ID)
        pid, epoch = req["producer_id"], req["producer_epoch"]
        offsets_partition: TopicPartitionKey = (TOPIC, self.partition_for(gid))
        # the transactional batch opens a transaction in the partition's state: load it off the loop first (the
        # append below would otherwise scan the partition on the loop the first time)
        await self.log.load_transaction_state([offsets_partition[1]])
        if not self.log.has_ongoing_transaction(offsets_partition[1], pid, epoch):
            # As Kafka, only the producer's first write of a transaction here is verified: once it has one open
            # at this epoch, the partition already belongs to that transaction.
            verifier = self._txn_verifier()
            # v5 (transaction.version 2, KIP-890 part 2): the partition is added to the transaction here, not by
            # an AddOffsetsToTxn (Kafka's `addPartition` operation)
            verified = await verifier.verify_partitions(req["transactional_id"], pid, epoch, [offsets_partition],
                                                        add=version >= 5)
            code = verified.get(offsets_partition, ErrorCode.UNKNOWN_SERVER_ERROR)
            if code != ErrorCode.NONE:
                return _txn_commit_error(req, txn_verification_error(ErrorCode(code), version))
        if not self.loaded:
            return _txn_commit_error(req, ErrorCode.COORDINATOR_LOAD_IN_PROGRESS)
        res = self.coordinator.commit_txn_offsets(req, self._clock())
        try:
            # one transactional batch of the producer (without records: the wait for the partition's appends)
            appended = self.runtime.append(offsets_partition[1], [(r.key, r.value) for r in res.records],
                                           producer_id=pid, producer_epoch=epoch)
        except CoordinatorWriteError:
            return _txn_commit_error(req, ErrorCode.COORDINATOR_NOT_AVAILABLE)
        if await self.runtime.commit([appended]) is not WriteOutcome.COMMITTED:
            return _txn_commit_error(req, ErrorCode.COORDINATOR_NOT_AVAILABLE)
        return res.response or {"topics": []}

    async def write_txn_markers(self, markers: Sequence[TxnMarker]) -> dict[TopicPartitionKey, ErrorCode]:
        """TxnMarkerWriter for `__consumer_offsets`: each marker is appended to its partition as a COMMIT/ABORT
        control batch, then the pending transactional offsets of its producer in the partition's groups are
        committed or dropped (what the replay of that batch does); NONE once durable. A marker older than the
        producer's epoch on the log is refused (INVALID_PRODUCER_EPOCH), as Kafka's producer state does."""
        out: dict[TopicPartitionKey, ErrorCode] = {}
        written: list[tuple[TopicPartitionKey, Appended]] = []
        # the partitions' transaction state is loaded off the loop first; from here on each marker's append and
        # its replay happen in one loop step, so memory follows the log's order
        await self.log.load_transaction_state({m.partition for m in markers
                                               if m.topic == TOPIC and 0 <= m.partition < self.log.num_partitions})
        for m in markers:
            key = (m.topic, m.partition)
            if m.topic != TOPIC or not 0 <= m.partition < self.log.num_partitions:
                out[key] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                continue
            if not self.loaded:
                out[key] = ErrorCode.COORDINATOR_LOAD_IN_PROGRESS  # retried by the marker channel
                continue
            code = self.coordinator.check_marker(m.producer_id, m.producer_epoch)
            if code != ErrorCode.NONE:
                log.warning("transaction marker refused", partition=m.partition, producer_id=m.producer_id,
                            producer_epoch=m.producer_epoch, error=code.name)
                out[key] = code
                continue
            try:
                # appended, then replayed: the pending offsets of the producer in the partition's groups settle
                code, appended = self.runtime.append_end_transaction_marker(
                    m.partition, producer_id=m.producer_id, producer_epoch=m.producer_epoch, commit=m.commit,
                    coordinator_epoch=m.coordinator_epoch)
            except CoordinatorWriteError:
                out[key] = ErrorCode.KAFKA_STORAGE_ERROR  # retried
                continue
            if appended is None:
                log.warning("transaction marker refused by the partition", partition=m.partition,
                            producer_id=m.producer_id, producer_epoch=m.producer_epoch, error=code.name)
                out[key] = code
                continue
            written.append((key, appended))
        for key, appended in written:
            committed = await self.runtime.commit([appended]) is WriteOutcome.COMMITTED
            out[key] = ErrorCode.NONE if committed else ErrorCode.KAFKA_STORAGE_ERROR
        return out

    async def fetch_offsets(self, groups: Sequence[Mapping[str, Any]], version: int, require_stable: bool
                            ) -> list[dict[str, Any]]:
        """One answer per requested group (group_id, member_id, member_epoch, topics or None)."""
        if not self.loaded:
            return [{"group_id": g["group_id"], "topics": [], "error_code": int(ErrorCode.COORDINATOR_LOAD_IN_PROGRESS)}
                    for g in groups]
        # Offsets whose records are still being written are not answered before they are durable.
        await self.runtime.barrier(await self._partitions_of(g["group_id"] for g in groups))
        pacer = Pacer()
        out = []
        for g in groups:  # yielding between groups: thousands of groups with thousands of offsets each
            out.append(self.coordinator.fetch_offsets(g["group_id"], g["topics"], version, g.get("member_id"),
                                                      g.get("member_epoch", -1), require_stable=require_stable))
            await pacer.pace()
        return out

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
        await self.runtime.barrier(range(self.log.num_partitions))
        states_filter = {s.lower() for s in states}
        types_filter = {t.lower() for t in types}
        pacer = Pacer()
        out = []
        for gid in self.coordinator.group_ids():
            # yields between groups (each entry is built at once); a group deleted meanwhile is left out
            if (entry := self.coordinator.listed_group(gid, states_filter, types_filter)) is not None:
                out.append(entry)
            await pacer.pace()
        return 0, out

    async def describe_groups(self, group_ids: Sequence[str], version: int) -> list[dict[str, Any]]:
        if not self.loaded:
            return [{"group_id": g, "error_code": int(ErrorCode.COORDINATOR_LOAD_IN_PROGRESS), "group_state": "",
                     "protocol_type": "", "protocol_data": "", "members": []} for g in group_ids]
        await self.runtime.barrier(await self._partitions_of(group_ids))
        pacer = Pacer()
        described: dict[str, dict[str, Any]] = {}
        for gid in group_ids:  # each distinct group once (its copies share the entry), yielding between groups
            await pacer.pace()
            if gid not in described:
                described[gid] = self.coordinator.describe_groups([gid], version)[0]
        return [described[gid] for gid in group_ids]

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
            code = await self.share_admin.delete_group_state(gid, plan.share_partitions.get(gid, {}))
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

    # --- share-group offsets (DescribeShareGroupOffsets, AlterShareGroupOffsets, DeleteShareGroupOffsets) -------
    def add_share_state_reset_listener(self, fn: StateResetListener) -> None:
        """`fn(group_id, {topic_id: partitions})` after AlterShareGroupOffsets or DeleteShareGroupOffsets
        replaced or deleted those share-partitions' durable state: the share-partition leader drops its copy."""
        self.share_admin.add_reset_listener(fn)

    def _share_admin_refusal(self) -> tuple[ErrorCode, str] | None:
        if not self.loaded:
            return ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, MESSAGES[ErrorCode.COORDINATOR_LOAD_IN_PROGRESS]
        if not self.share_enabled:
            return ErrorCode.UNSUPPORTED_VERSION, "Share groups are disabled (group.share.enable=false)."
        return None

    async def describe_share_offsets(self, group_id: str, topics: Sequence[tuple[str, Sequence[int]]] | None
                                     ) -> dict[str, Any]:
        """One DescribeShareGroupOffsets group (ShareStateAdmin.describe_offsets) once the group's earlier
        records are durable."""
        refusal = self._share_admin_refusal()
        if refusal is not None:
            return {"group_id": group_id, "topics": [], "error_code": int(refusal[0]), "error_message": refusal[1]}
        await self.runtime.barrier([self.partition_for(group_id)])
        return await self.share_admin.describe_offsets(group_id, topics)

    async def _share_offsets_admin_start(self, group_id: str) -> dict[str, Any] | None:
        """The error response of an Alter/DeleteShareGroupOffsets that cannot go on, else None once the group's
        earlier records are durable."""
        refusal = self._share_admin_refusal()
        if refusal is not None:
            return admin_error(*refusal)
        if not group_id:
            return admin_error(ErrorCode.INVALID_GROUP_ID, MESSAGES[ErrorCode.INVALID_GROUP_ID])
        await self.runtime.barrier([self.partition_for(group_id)])
        return None

    async def alter_share_offsets(self, group_id: str, topics: Sequence[tuple[str, Sequence[tuple[int, int]]]]
                                  ) -> dict[str, Any]:
        """AlterShareGroupOffsets (ShareStateAdmin.alter_offsets): {error_code, error_message, responses}."""
        refused = await self._share_offsets_admin_start(group_id)
        return refused if refused is not None else await self.share_admin.alter_offsets(group_id, topics)

    async def delete_share_offsets(self, group_id: str, topic_names: Sequence[str]) -> dict[str, Any]:
        """DeleteShareGroupOffsets (ShareStateAdmin.delete_offsets): {error_code, error_message, responses}."""
        refused = await self._share_offsets_admin_start(group_id)
        return refused if refused is not None else await self.share_admin.delete_offsets(group_id, topic_names)

    # --- topic deletion ----------------------------------------------------------------------------------------
    async def topics_deleted(self, topic_ids: Iterable[UUID], names: Iterable[str] = ()) -> None:
        records = self.share.topics_deleted(topic_ids)
        if records:
            await self._write(records)
        for name in names:
            await self._run(self.coordinator.topic_deleted(name))

    # --- session expiry ----------------------------------------------------------------------------------------
    def _next_due_s(self) -> float | None:
        """Seconds until the coordinator's earliest deadline (sessions, rebalances, the offsets cleanup)."""
        deadline = self.coordinator.next_deadline()
        return None if deadline is None else (deadline - self._clock()) / 1000

    async def expire_now(self) -> None:
        now = self._clock()
        res = self.share.expire_sessions(now)
        if (res.records or res.removed_members) and await self._write(res.records):
            self._after(res)
        await self._run(self.coordinator.tick(now))


_JOIN_ERROR = {"error_code": int(ErrorCode.COORDINATOR_NOT_AVAILABLE), "member_id": "", "generation_id": -1,
               "protocol_type": None, "protocol_name": None, "leader": "", "skip_assignment": False, "members": []}
_SYNC_ERROR = {"error_code": int(ErrorCode.COORDINATOR_NOT_AVAILABLE), "assignment": b"", "protocol_type": None,
               "protocol_name": None}


async def _describe_paced(group_ids: Sequence[str], describe_one: Callable[[str], tuple[dict[str, Any], list[
        Callable[[], dict[str, Any]]]]]) -> list[dict[str, Any]]:
    """One entry per requested id, in order, as Kafka answers (a repeated id too); each distinct group is described
    once (its copies share the entry) from a snapshot, member by member, yielding to the loop between members
    whenever the slice is used up: thousands of groups, members or partitions never hold the loop."""
    pacer = Pacer()
    described: dict[str, dict[str, Any]] = {}
    for gid in group_ids:
        await pacer.pace()  # a million copies of one id (a 1 MiB request of empty ids) are a million steps too
        if gid in described:
            continue
        entry, members = describe_one(gid)
        described[gid] = entry
        entry_members: list[dict[str, Any]] = entry["members"] if members else []
        for build in members:
            entry_members.append(build())
            await pacer.pace()
    return [described[gid] for gid in group_ids]


def _unauthorized_create(status: list[dict[str, Any]], refused: Sequence[str]) -> list[dict[str, Any]]:
    detail = f"Unauthorized to CREATE on topics {','.join(refused)}."
    out = list(status)
    for i, s in enumerate(out):
        if s["status_code"] == MISSING_INTERNAL_TOPICS:
            out[i] = {**s, "status_detail": f"{s['status_detail']}; {detail}"}
            return out
    return [*out, {"status_code": MISSING_INTERNAL_TOPICS, "status_detail": detail}]


def _complete(waiter: Any, response: dict[str, Any]) -> None:
    if isinstance(waiter, asyncio.Future) and not waiter.done():
        waiter.set_result(response)


def _commit_error(req: Mapping[str, Any], code: ErrorCode) -> dict[str, Any]:
    return {"topics": [{"name": t.get("name"), "topic_id": t.get("topic_id"), "partitions": [
        {"partition_index": p["partition_index"], "error_code": int(code)} for p in t["partitions"]]}
        for t in req["topics"]]}


def _txn_commit_error(req: Mapping[str, Any], code: ErrorCode) -> dict[str, Any]:
    return {"topics": [{"name": t["name"], "partitions": [
        {"partition_index": p["partition_index"], "error_code": int(code)} for p in t["partitions"]]}
        for t in req["topics"]]}

