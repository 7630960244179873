"""The group coordinator (Kafka's role name), sans-IO: classic, consumer, share and streams groups plus committed offsets,
in one group-id namespace on `__consumer_offsets`.

It owns one state machine per group type and the offset store, dispatches every replayed record to the part
that owns the record type (one replay pass on start), answers which type a group id has (so each part refuses
an id another type uses, with Kafka's errors), and serves what spans group types: offsets, ListGroups,
DescribeGroups, DeleteGroups and the periodic expiry of offsets and empty groups.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any
from uuid import UUID

import structlog

from broker.config.components import ComponentConfig, ConfigSource, setting
from broker.groups import records as group_records
from broker.groups.classic import records as classic_records
from broker.groups.classic.group import ClassicState
from broker.groups.classic.manager import ClassicConfig, ClassicGroupManager
from broker.groups.consumer import migration
from broker.groups.consumer.classic_members import join_error, sync_error
from broker.groups.consumer.group import ConsumerGroup
from broker.groups.consumer.manager import ConsumerConfig, ConsumerGroupManager
from broker.groups.consumer.migration import MigrationPolicy
from broker.groups.consumer.regex import Identity, Resolution
from broker.groups.offsets import (
    INVALID_OFFSET,
    NO_LEADER_EPOCH,
    NO_PRODUCER_ID,
    OffsetAndMetadata,
    OffsetStore,
    commit_record,
)
from broker.groups.offsets import tombstone as offset_tombstone
from broker.groups.records import Owner, Record
from broker.groups.result import GroupError, GroupResult
from broker.groups.share import records as share_records
from broker.groups.share.config import ShareGroupConfig
from broker.groups.share.manager import ShareGroupManager
from broker.groups.streams.config import StreamsConfig
from broker.groups.streams.manager import StreamsGroupManager, StreamsSettings
from protocol.errors import ErrorCode

log = structlog.get_logger(__name__)

# name -> (topic id, partition count), or None if the topic does not exist (internal topics excluded)
TopicInfoLookup = Callable[[str], "tuple[UUID, int] | None"]
TopicNameLookup = Callable[[UUID], "str | None"]
# group id -> (session timeout ms, heartbeat interval ms)
GroupTimingLookup = Callable[[str], "tuple[int, int]"]

NO_AUTHORIZED_OPERATIONS = -2147483648


@dataclass(frozen=True)
class OffsetsConfig(ComponentConfig):
    retention_ms: int = setting("offsets.retention.minutes", scale=60_000)
    retention_check_interval_ms: int = setting("offsets.retention.check.interval.ms")
    metadata_max_bytes: int = setting("offset.metadata.max.bytes")


@dataclass(frozen=True)
class GroupCoordinatorConfig:
    classic: ClassicConfig = field(default_factory=ClassicConfig)
    consumer: ConsumerConfig = field(default_factory=ConsumerConfig)
    offsets: OffsetsConfig = field(default_factory=OffsetsConfig)
    share: ShareGroupConfig = field(default_factory=ShareGroupConfig)
    streams: StreamsConfig = field(default_factory=StreamsConfig)

    @classmethod
    def from_config(cls, config: ConfigSource) -> GroupCoordinatorConfig:
        """The group coordinator's settings from the broker config."""
        return cls(classic=ClassicConfig.from_config(config), consumer=ConsumerConfig.from_config(config),
                   offsets=OffsetsConfig.from_config(config), share=ShareGroupConfig.from_config(config),
                   streams=StreamsConfig.from_config(config))


@dataclass(frozen=True)
class DeletePlan:
    """DeleteGroups in two steps: share groups' share-partition state is deleted through the share coordinator
    first (`share_groups` -> their initialized topic partitions), then `finish` writes the tombstones."""

    results: dict[str, int]  # group id -> error code already decided (not deleted)
    deletable: list[str]
    share_partitions: dict[str, dict[UUID, frozenset[int]]]


class GroupCoordinator:
    def __init__(self, config: GroupCoordinatorConfig | None = None, *, topic_info: TopicInfoLookup,
                 topic_name: TopicNameLookup | None = None, any_topic: TopicInfoLookup | None = None,
                 topics_version: Callable[[], int] = lambda: 0, acl_version: Callable[[], int] = lambda: 0,
                 new_member_id: Callable[[str, str | None], str] | None = None,
                 consumer_member_id: Callable[[], str] | None = None,
                 share_timing: GroupTimingLookup | None = None,
                 consumer_timing: GroupTimingLookup | None = None,
                 share_assignment_interval: Callable[[str], int] | None = None,
                 streams_settings: Callable[[str], StreamsSettings] | None = None) -> None:
        """`share_timing` / `consumer_timing`: a group's session timeout and heartbeat interval (its group
        configs over the broker's values), read on every heartbeat; None uses the configured values."""
        self.config = config or GroupCoordinatorConfig()
        self._topic_info = topic_info
        self._topic_name = topic_name or (lambda tid: None)
        self._any_topic = any_topic or topic_info
        self._topics_version = topics_version
        self._acl_version = acl_version
        self._new_member_id = new_member_id
        self._consumer_member_id = consumer_member_id
        self._share_timing = share_timing
        self._consumer_timing = consumer_timing
        self._share_assignment_interval = share_assignment_interval
        self._streams_settings = streams_settings
        any_topic = self._any_topic
        self.streams = StreamsGroupManager(
            settings=streams_settings or (lambda gid: StreamsSettings()),
            partition_count=lambda name: (info[1] if (info := any_topic(name)) is not None else None),
            topics_version=topics_version, group_type_of=self.group_type_of,
            empty_classic=lambda gid: gid in self.classic.groups and self.classic.groups[gid].is_empty())
        self.share = ShareGroupManager(self.config.share, topic_info=topic_info, group_type_of=self.group_type_of,
                                       topic_name=topic_name, group_timing=share_timing,
                                       assignment_interval=share_assignment_interval)
        self.classic = ClassicGroupManager(self.config.classic, group_type_of=self.group_type_of,
                                     new_member_id=new_member_id)
        extra = {} if consumer_member_id is None else {"member_id_factory": consumer_member_id}
        self.consumer = ConsumerGroupManager(self.config.consumer, topic_info=topic_info,
                                             topics_version=topics_version, acl_version=acl_version,
                                             group_timing=consumer_timing, **extra)
        self.migration_policy = MigrationPolicy.parse(self.config.consumer.migration_policy)
        self.consumer.downgrade = self._downgrade
        self.offsets = OffsetStore()
        self.skipped_records = 0
        self._now = 0  # time of the replay in progress (simple groups created by offset records)
        self._next_cleanup: int | None = None

    # ------------------------------------------------------------------------------------------------ types

    def group_type_of(self, group_id: str) -> str | None:
        """"classic", "consumer", "share" or "streams" for a group that exists, else None."""
        if group_id in self.classic.groups:
            return "classic"
        if group_id in self.consumer.groups:
            return "consumer"
        if group_id in self.share.groups:
            return "share"
        if group_id in self.streams.groups:
            return "streams"
        return None

    # ----------------------------------------------------------------------------------------------- replay

    def replay(self, key: bytes | memoryview, value: bytes | memoryview | None,
               producer_id: int = NO_PRODUCER_ID, producer_epoch: int = -1) -> bool:
        """Apply one `__consumer_offsets` record (of a transactional batch of `producer_id` when >= 0: only
        offsets are written so); False if no part owns its type (skipped, as Kafka's loader skips unknown record
        types). Call `loaded(now_ms)` once every partition has been replayed."""
        owner = group_records.owner_of(key)
        if owner is Owner.OFFSETS:
            gid = self.offsets.replay(key, value, producer_id, producer_epoch)
            if value is not None and self.group_type_of(gid) is None:
                # Offsets without a group: Kafka's "simple" group (standalone consumers, admin commits).
                self.classic.get_or_create_simple(gid, self._now)
            return True
        if owner is Owner.CLASSIC:
            self.classic.replay(key, value, self._now)
            return True
        if owner is Owner.CONSUMER:
            self.consumer.replay(key, value)
            return True
        if owner is Owner.SHARE:
            return self.share.replay(key, value)
        if owner is Owner.STREAMS:
            self.streams.replay(key, value)
            return True
        self.skipped_records += 1
        return False

    def replay_end_txn(self, producer_id: int, producer_epoch: int, commit: bool,
                       owns: Callable[[str], bool] = lambda group: True) -> list[str]:
        """Apply a transaction marker of `producer_id` (written to a `__consumer_offsets` partition) to the
        groups `owns` accepts, those of that partition: their pending transactional offsets are committed or
        dropped. Returns the groups whose transaction ended."""
        ended = self.offsets.replay_end_txn(producer_id, producer_epoch, commit, owns)
        if ended:
            log.debug("transactional offsets completed", producer_id=producer_id, commit=commit, groups=ended)
        return ended

    def check_marker(self, producer_id: int, producer_epoch: int) -> ErrorCode:
        """A marker of an epoch older than the producer's latest on the offsets log is refused, as Kafka's
        producer state refuses it (INVALID_PRODUCER_EPOCH: the marker comes from a stale coordinator)."""
        if producer_epoch < self.offsets.producer_epochs.get(producer_id, -1):
            return ErrorCode.INVALID_PRODUCER_EPOCH
        return ErrorCode.NONE

    def begin_load(self, now_ms: int) -> None:
        self._now = now_ms

    def loaded(self, now_ms: int) -> GroupResult:
        self.share.loaded(now_ms)
        self.consumer.loaded(now_ms)
        self.streams.loaded(now_ms)
        self._next_cleanup = now_ms + self.config.offsets.retention_check_interval_ms
        return self.classic.loaded(now_ms)

    def fresh(self) -> GroupCoordinator:
        """An empty coordinator with the same configuration (to rebuild state from the log)."""
        fresh = GroupCoordinator(self.config, topic_info=self._topic_info, topic_name=self._topic_name,
                                 any_topic=self._any_topic, topics_version=self._topics_version,
                                 acl_version=self._acl_version, new_member_id=self._new_member_id,
                                 consumer_member_id=self._consumer_member_id, share_timing=self._share_timing,
                                 consumer_timing=self._consumer_timing,
                                 share_assignment_interval=self._share_assignment_interval,
                                 streams_settings=self._streams_settings)
        return fresh

    def _apply(self, res: GroupResult, records: Iterable[Record]) -> None:
        """Emit records whose owner changes state by replay (offsets, share and consumer groups)."""
        for r in records:
            self.replay(r.key, r.value)
            res.records.append(r)

    # ------------------------------------------------------------------------------------------------ timers

    def next_deadline(self) -> int | None:
        deadlines = [d for d in (self.classic.next_deadline(), self.consumer.next_deadline(),
                                 self.share.next_deadline(), self.streams.next_deadline(), self._next_cleanup)
                     if d is not None]
        return min(deadlines, default=None)

    def tick(self, now: int) -> GroupResult:
        """Fire due timers of classic groups and the periodic cleanup (share sessions expire through
        `share.expire_sessions`, which the runtime calls for its member-removed listeners)."""
        res = self.classic.tick(now)
        res.merge(self.consumer.tick(now))
        res.merge(self.streams.tick(now))
        if self._next_cleanup is not None and now >= self._next_cleanup:
            self._next_cleanup = now + self.config.offsets.retention_check_interval_ms
            res.merge(self.cleanup(now))
        return res

    def cleanup(self, now: int) -> GroupResult:
        """Expire offsets (offsets.retention.minutes) and delete empty groups (classic, consumer and streams) whose
        offsets are all gone, as Kafka's periodic cleanupGroupMetadata does. Share groups expire elsewhere (their
        own configs)."""
        res = GroupResult()
        retention = self.config.offsets.retention_ms
        deleted = []
        for gid in sorted(self.classic.groups):
            group = self.classic.groups[gid]
            base = self._expiry_base(gid)
            records, all_expired = self.offsets.expire(gid, now, retention, base, group.is_subscribed_to)
            self._apply(res, records)
            if all_expired and group.is_empty():
                res.records.append(classic_records.tombstone(gid))
                self.classic.delete(gid)
                deleted.append(gid)
        for gid in sorted(self.consumer.groups):
            records, all_expired = self.offsets.expire(gid, now, retention, lambda o: o.commit_timestamp_ms,
                                                       functools.partial(self.consumer.is_subscribed_to, gid))
            self._apply(res, records)
            if all_expired and not self.consumer.groups[gid].members:
                self.consumer.delete(gid, res)
                deleted.append(gid)
        for gid in sorted(self.streams.groups):
            records, all_expired = self.offsets.expire(gid, now, retention, lambda o: o.commit_timestamp_ms,
                                                       functools.partial(self.streams.is_subscribed_to, gid))
            self._apply(res, records)
            if all_expired and not self.streams.groups[gid].members:
                self.streams.delete(gid, res)
                deleted.append(gid)
        if res.records:
            log.info("group metadata cleanup", tombstones=len(res.records), groups_deleted=deleted)
        return res

    def _expiry_base(self, gid: str) -> Callable[[OffsetAndMetadata], int] | None:
        group = self.classic.groups[gid]
        if group.protocol_type is None:
            return lambda o: o.commit_timestamp_ms  # simple group: retention after each commit
        if group.state is ClassicState.EMPTY:
            stamp = group.state_timestamp_ms
            return lambda o: stamp  # retention after the group became empty
        if group.uses_consumer_protocol() and group.subscribed_topics is not None \
                and group.state is ClassicState.STABLE:
            return lambda o: o.commit_timestamp_ms
        return None

    # --------------------------------------------------------------------------------------- classic groups

    def join_group(self, req: Mapping[str, Any], version: int, now: int, waiter: Any, *, client_id: str = "",
                   client_host: str = "") -> GroupResult:
        res = GroupResult()
        gid = req["group_id"]
        if gid and gid in self.consumer.groups:
            if self.consumer.groups[gid].members:
                # A classic member joins a consumer group with members (Kafka admits it whatever the migration
                # policy; the policy only governs conversions of the group).
                cfg = self.classic.config
                if not cfg.min_session_timeout_ms <= req["session_timeout_ms"] <= cfg.max_session_timeout_ms:
                    res.complete(waiter, join_error(ErrorCode.INVALID_SESSION_TIMEOUT, req["member_id"]))
                    return res
                return self.consumer.classic_join(req, version, now, waiter, client_id=client_id,
                                                  client_host=client_host)
            # An empty consumer group becomes a classic group when a classic member joins (as Kafka does).
            log.info("empty consumer group converted to a classic group", group=gid)
            self._delete_consumer_group(gid, res)
        return res.merge(self.classic.join(req, version, now, waiter, client_id=client_id, client_host=client_host))

    def _delete_consumer_group(self, gid: str, res: GroupResult) -> None:
        self.consumer.delete(gid, res)

    def _consumer_group_with_members(self, gid: str) -> ConsumerGroup | None:
        group = self.consumer.groups.get(gid) if gid else None
        return group if group is not None and group.members else None

    def sync_group(self, req: Mapping[str, Any], now: int, waiter: Any) -> GroupResult:
        gid = req["group_id"]
        if self._consumer_group_with_members(gid) is not None:
            return self.consumer.classic_sync(req, now, waiter)
        if gid and self.group_type_of(gid) not in (None, "classic"):
            res = GroupResult()
            res.complete(waiter, sync_error(ErrorCode.UNKNOWN_MEMBER_ID))
            return res
        return self.classic.sync(req, now, waiter)

    def heartbeat(self, req: Mapping[str, Any], now: int) -> GroupResult:
        gid = req["group_id"]
        if self._consumer_group_with_members(gid) is not None:
            return self.consumer.classic_heartbeat(req, now)
        if gid and self.group_type_of(gid) not in (None, "classic"):
            return GroupResult({"error_code": int(ErrorCode.UNKNOWN_MEMBER_ID)})
        return self.classic.heartbeat(req, now)

    def leave_group(self, gid: str, members: Sequence[Mapping[str, Any]], now: int) -> GroupResult:
        if self._consumer_group_with_members(gid) is not None:
            return self.consumer.classic_leave(gid, members, now)
        if gid and self.group_type_of(gid) not in (None, "classic"):
            return GroupResult({"error_code": 0, "members": [
                {"member_id": m["member_id"], "group_instance_id": m.get("group_instance_id"),
                 "error_code": int(ErrorCode.UNKNOWN_MEMBER_ID)} for m in members]})
        return self.classic.leave(gid, members, now)

    # -------------------------------------------------------------------------------------- consumer groups

    def consumer_group_heartbeat(self, req: Mapping[str, Any], version: int, now: int, *, client_id: str = "",
                                 client_host: str = "", identity: Identity = None,
                                 regexes: Mapping[str, Resolution] | None = None) -> GroupResult:
        """`identity` the client's and `regexes` the verdicts for `consumer.regex_work(req, identity)`, which the
        caller resolved off the event loop (consumer/regex.py)."""
        regexes = regexes or {}
        gid = req["group_id"]
        kind = self.group_type_of(gid) if gid else None
        res = GroupResult()
        if kind not in (None, "consumer"):
            error = None
            try:
                self.consumer.prevalidate(req, version, regexes)
            except GroupError as e:
                error = e
            if error is None and kind == "classic" and req["member_epoch"] == 0 \
                    and self.classic.groups[gid].is_empty():
                # An empty classic group gives way to the consumer group (Kafka's maybeDeleteEmptyClassicGroup).
                log.info("empty classic group converted to a consumer group", group=gid)
                res.records.append(classic_records.tombstone(gid))
                self.classic.delete(gid)
                return res.merge(self.consumer.heartbeat(req, version, now, client_id=client_id,
                                                         client_host=client_host, identity=identity,
                                                         regexes=regexes))
            if error is None and kind == "classic" and req["member_epoch"] == 0:
                try:
                    return self._upgrade(req, version, now, client_id, client_host, identity, regexes)
                except GroupError as e:
                    error = e
            if error is None:
                error = GroupError(ErrorCode.GROUP_ID_NOT_FOUND, f"Group {gid} is not a consumer group.")
            res.response = {"error_code": int(error.code), "error_message": error.message, "member_id": None,
                            "member_epoch": 0, "heartbeat_interval_ms": 0, "assignment": None}
            return res
        return self.consumer.heartbeat(req, version, now, client_id=client_id, client_host=client_host,
                                       identity=identity, regexes=regexes)

    # -------------------------------------------------------------------------------------- streams groups

    def streams_group_heartbeat(self, req: Mapping[str, Any], version: int, now: int, *, client_id: str = "",
                                client_host: str = "") -> GroupResult:
        """StreamsGroupHeartbeat. A joining member replaces an empty classic group of its id (Kafka's
        maybeDeleteEmptyClassicGroup); a group of another type answers GROUP_ID_NOT_FOUND."""
        gid = req["group_id"]
        replaces_classic = gid in self.classic.groups
        res = self.streams.heartbeat(req, version, now, client_id=client_id, client_host=client_host)
        if replaces_classic and gid in self.streams.groups:
            log.info("empty classic group converted to a streams group", group=gid)
            res.records.insert(0, classic_records.tombstone(gid))
            self.classic.delete(gid)
        return res

    def _upgrade(self, req: Mapping[str, Any], version: int, now: int, client_id: str, client_host: str,
                 identity: Identity, regexes: Mapping[str, Resolution]) -> GroupResult:
        """A consumer-protocol member joins classic group `gid`, which has members: the group becomes a consumer
        group with them as classic-protocol members (online upgrade), if the policy and the group allow it.
        Raises GroupError (GROUP_ID_NOT_FOUND) if not; a heartbeat refused after the checks changes nothing."""
        gid = req["group_id"]
        classic = self.classic.groups[gid]
        try:
            migration.check_upgrade(classic, self.migration_policy, self.config.consumer.max_size)
            converted = migration.consumer_group_from_classic(classic, self._topic_info)
        except GroupError as e:
            log.info("classic group not upgraded to a consumer group", group=gid, reason=e.message)
            raise

        def convert(out: GroupResult) -> None:
            log.info("classic group upgraded to a consumer group", group=gid, members=len(converted.members),
                     generation=classic.generation_id)
            self.classic.give_up(gid, out)
            out.records.append(classic_records.tombstone(gid))
            # Metadata hash 0, as Kafka's converted group has none yet: the joining heartbeat bumps the epoch.
            for record in migration.consumer_group_records(converted, 0, now):
                self.consumer.emit(out, record)
            for mid, member in converted.members.items():
                assert member.classic is not None
                self.consumer.timers.schedule(("session", gid, mid), now + member.classic.session_timeout_ms)

        return self.consumer.heartbeat(req, version, now, client_id=client_id, client_host=client_host,
                                       group=converted, on_convert=convert, identity=identity, regexes=regexes)

    def _downgrade(self, group: ConsumerGroup, leaving: Collection[str], res: GroupResult, now: int,
                   rebalance: bool) -> bool:
        """The last consumer-protocol members leave a group of classic members: the group becomes a classic group
        and rebalances (online downgrade), if the policy and the group allow it. False: fence as usual. With
        nobody leaving, a classic static member has just taken the place of the last consumer-protocol member:
        the group rebalances only if its subscription differs (`rebalance`), as in Kafka 4.1."""
        gid = group.group_id
        refusal = migration.downgrade_refusal(group, leaving, self.migration_policy, self.config.classic.max_size)
        if refusal is None:
            try:
                classic = migration.classic_group_from_consumer(group, leaving, self._topic_name, now)
            except GroupError as e:
                refusal = e.message
        if refusal is not None:
            log.info("consumer group not downgraded to a classic group", group=gid, reason=refusal)
            return False
        log.info("consumer group downgraded to a classic group", group=gid, leaving=sorted(leaving),
                 members=len(classic.members), generation=classic.generation_id)
        self.consumer.forget(group)
        for record in migration.consumer_group_tombstones(group):
            self.consumer.emit(res, record)
        res.records.append(classic_records.group_metadata(classic, classic.assignments()))
        res.merge(self.classic.adopt(classic, now, rebalance=rebalance))
        return True

    def consumer_group_describe(self, group_ids: Sequence[str]) -> list[dict[str, Any]]:
        out = []
        for gid in group_ids:
            entry, members = self.consumer_group_describe_one(gid)
            entry_members: list[dict[str, Any]] = entry["members"] if members else []
            for build in members:
                entry_members.append(build())
            out.append(entry)
        return out

    def consumer_group_describe_one(self, gid: str) -> tuple[dict[str, Any], list[Callable[[], dict[str, Any]]]]:
        """One ConsumerGroupDescribe entry without its members, and the builders of the members' entries (see
        ConsumerGroupManager.describe_group)."""
        if not gid:
            return {"group_id": gid, "error_code": int(ErrorCode.INVALID_GROUP_ID)}, []
        return self.consumer.describe_group(gid, self._topic_name, self.group_type_of)

    # ---------------------------------------------------------------------------------------------- offsets

    def _validate_commit(self, gid: str, req: Mapping[str, Any], version: int, now: int) -> ErrorCode:
        generation = req["generation_id_or_member_epoch"]
        kind = self.group_type_of(gid)
        if kind is None:
            if generation < 0:
                return ErrorCode.NONE  # a simple group appears with the first offset record
            return ErrorCode.GROUP_ID_NOT_FOUND if version >= 9 else ErrorCode.ILLEGAL_GENERATION
        if kind == "share":
            return ErrorCode.GROUP_ID_NOT_FOUND
        try:
            if kind == "consumer":
                self.consumer.validate_member_epoch(gid, req["member_id"], generation, commit=True, version=version)
                return ErrorCode.NONE
            if kind == "streams":
                self.streams.validate_offset_commit(gid, req["member_id"], req.get("group_instance_id"),
                                                    generation, version)
                return ErrorCode.NONE
            self.classic.validate_offset_commit(self.classic.groups[gid], req["member_id"],
                                                req.get("group_instance_id"), generation, now)
        except GroupError as e:
            return e.code
        return ErrorCode.NONE

    def commit_offsets(self, req: Mapping[str, Any], version: int, now: int) -> GroupResult:
        """Serve OffsetCommit (v2+). Topics are named (v2-v9) or given by id (v10+)."""
        gid = req["group_id"]
        by_id = version >= 10
        retention = req.get("retention_time_ms", -1)
        expire = now + retention if retention is not None and retention >= 0 else None
        group_error = self._validate_commit(gid, req, version, now)
        res = GroupResult()
        records: list[Record] = []
        topics_out = []
        max_metadata = self.config.offsets.metadata_max_bytes
        for topic in req["topics"]:
            name, info, unknown = self._resolve_topic(topic, by_id)
            parts_out = []
            for p in topic["partitions"]:
                index = p["partition_index"]
                if info is None:
                    code = unknown
                elif not 0 <= index < info[1]:
                    code = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                elif group_error != ErrorCode.NONE:
                    code = group_error
                elif p["committed_metadata"] is not None and len(p["committed_metadata"]) > max_metadata:
                    code = ErrorCode.OFFSET_METADATA_TOO_LARGE
                else:
                    code = ErrorCode.NONE
                    epoch = p.get("committed_leader_epoch", NO_LEADER_EPOCH)
                    records.append(commit_record(gid, name, index, OffsetAndMetadata(
                        p["committed_offset"], NO_LEADER_EPOCH if epoch is None else epoch,
                        p["committed_metadata"] or "", now, expire)))
                parts_out.append({"partition_index": index, "error_code": int(code)})
            topics_out.append({"name": name, "topic_id": topic.get("topic_id"), "partitions": parts_out})
        self._apply(res, records)
        res.response = {"topics": topics_out}
        return res

    def _validate_txn_commit(self, gid: str, req: Mapping[str, Any], now: int) -> ErrorCode:
        """Kafka's validateTransactionalOffsetCommit: a group that does not exist is created (a simple group,
        by the replay of the first offset record) if the request has no generation, else ILLEGAL_GENERATION;
        then the group's own offset-commit check, as transactional (a stale member epoch is ILLEGAL_GENERATION)."""
        generation = req["generation_id_or_member_epoch"]
        kind = self.group_type_of(gid)
        if kind is None:
            return ErrorCode.NONE if generation < 0 else ErrorCode.ILLEGAL_GENERATION
        if kind == "share":
            return ErrorCode.GROUP_ID_NOT_FOUND
        try:
            if kind == "consumer":
                self.consumer.validate_member_epoch(gid, req["member_id"], generation, commit=True, version=0,
                                                    transactional=True)
            elif kind == "streams":
                self.streams.validate_offset_commit(gid, req["member_id"], req.get("group_instance_id"),
                                                    generation, 0, transactional=True)
            else:
                self.classic.validate_offset_commit(self.classic.groups[gid], req["member_id"],
                                                    req.get("group_instance_id"), generation, now,
                                                    transactional=True)
        except GroupError as e:
            return ErrorCode.ILLEGAL_GENERATION if e.code == ErrorCode.STALE_MEMBER_EPOCH else e.code
        return ErrorCode.NONE

    def commit_txn_offsets(self, req: Mapping[str, Any], now: int) -> GroupResult:
        """Serve TxnOffsetCommit (Kafka's commitTransactionalOffset) once the transaction coordinator has
        verified that the group's offsets partition is in the producer's transaction. The records (one
        OffsetCommit per partition) go into one transactional batch of the producer, written by the caller
        (`GroupResult.records`); they are applied now as pending offsets of `producer_id`, which the
        transaction's marker commits or drops (`replay_end_txn`). Unknown topics and partitions are answered by
        the handler, as Kafka's KafkaApis does. A refused request answers every partition with the error."""
        gid = req["group_id"]
        pid, epoch = req["producer_id"], req["producer_epoch"]
        res = GroupResult()
        error = ErrorCode.NONE
        if epoch < self.offsets.producer_epochs.get(pid, -1):
            error = ErrorCode.INVALID_PRODUCER_EPOCH  # the offsets log has seen a newer epoch of the producer
        if error == ErrorCode.NONE:
            error = self._validate_txn_commit(gid, req, now)
        max_metadata = self.config.offsets.metadata_max_bytes
        records: list[Record] = []
        topics_out = []
        for topic in req["topics"]:
            parts_out = []
            for p in topic["partitions"]:
                index = p["partition_index"]
                code = error
                if code == ErrorCode.NONE:
                    if p["committed_metadata"] is not None and len(p["committed_metadata"]) > max_metadata:
                        code = ErrorCode.OFFSET_METADATA_TOO_LARGE
                    else:
                        leader_epoch = p.get("committed_leader_epoch", NO_LEADER_EPOCH)
                        records.append(commit_record(gid, topic["name"], index, OffsetAndMetadata(
                            p["committed_offset"], NO_LEADER_EPOCH if leader_epoch is None else leader_epoch,
                            p["committed_metadata"] or "", now)))
                parts_out.append({"partition_index": index, "error_code": int(code)})
            topics_out.append({"name": topic["name"], "partitions": parts_out})
        for r in records:
            self.replay(r.key, r.value, pid, epoch)
            res.records.append(r)
        res.response = {"topics": topics_out}
        return res

    def _resolve_topic(self, topic: Mapping[str, Any], by_id: bool) -> tuple[str, tuple[UUID, int] | None, ErrorCode]:
        """(name, (id, partitions) or None, the error for an unknown topic)."""
        if by_id:
            name = self._topic_name(topic["topic_id"]) or ""
            info = self._any_topic(name) if name else None
            if info is not None and info[0] != topic["topic_id"]:
                info = None
            return name, info, ErrorCode.UNKNOWN_TOPIC_ID
        name = topic["name"]
        return name, self._any_topic(name), ErrorCode.UNKNOWN_TOPIC_OR_PARTITION

    def fetch_offsets(self, gid: str, topics: Sequence[Mapping[str, Any]] | None, version: int,
                      member_id: str | None = None, member_epoch: int = -1, *,
                      require_stable: bool = False) -> dict[str, Any]:
        """One OffsetFetch group (v8+ shape: group_id, topics, error_code; topics by id from v10).
        `topics` None asks for every committed offset of the group. With `require_stable` (v7+, KIP-447) a
        partition with a pending transactional offset answers UNSTABLE_OFFSET_COMMIT, per partition in every
        version, as Kafka's fetchOffsets / fetchAllOffsets; otherwise the committed offset is answered."""
        by_id = version >= 10
        out: list[dict[str, Any]] = []
        kind = self.group_type_of(gid)
        if kind == "consumer" and version >= 9:
            try:
                self.consumer.validate_member_epoch(gid, member_id, member_epoch, commit=False, version=version)
            except GroupError as e:
                return {"group_id": gid, "topics": [], "error_code": int(e.code)}
        if kind == "streams":
            try:
                self.streams.validate_offset_fetch(gid, member_id, member_epoch)
            except GroupError as e:
                return {"group_id": gid, "topics": [], "error_code": int(e.code)}
        # Share groups have no committed offsets here (their start offsets are share state); absent groups
        # answer "no offset" without an error, as Kafka does.
        offsets = self.offsets.group_offsets(gid) if kind in ("classic", "consumer", "streams") else {}
        if topics is None:
            for name, parts in sorted(offsets.items()):
                tid = None
                if by_id:
                    info = self._any_topic(name)
                    if info is None:
                        continue  # the topic is gone: it has no id to answer with
                    tid = info[0]
                out.append({"name": name, "topic_id": tid, "partitions": [
                    self._unstable(p) if require_stable and self.offsets.has_pending(gid, name, p)
                    else self._fetched(p, o) for p, o in sorted(parts.items())]})
            return {"group_id": gid, "topics": out, "error_code": 0}
        for topic in topics:
            if by_id:
                known = self._topic_name(topic["topic_id"])
                if known is None:
                    out.append({"name": "", "topic_id": topic["topic_id"], "partitions": [
                        {**self._fetched(p, None), "error_code": int(ErrorCode.UNKNOWN_TOPIC_ID)}
                        for p in topic["partition_indexes"]]})
                    continue
                name = known
            else:
                name = topic["name"]
            parts = offsets.get(name, {})
            out.append({"name": name, "topic_id": topic.get("topic_id"), "partitions": [
                self._unstable(p) if require_stable and kind is not None and self.offsets.has_pending(gid, name, p)
                else self._fetched(p, parts.get(p)) for p in topic["partition_indexes"]]})
        return {"group_id": gid, "topics": out, "error_code": 0}

    @staticmethod
    def _unstable(partition: int) -> dict[str, Any]:
        return {"partition_index": partition, "committed_offset": INVALID_OFFSET, "committed_leader_epoch": -1,
                "metadata": "", "error_code": int(ErrorCode.UNSTABLE_OFFSET_COMMIT)}

    @staticmethod
    def _fetched(partition: int, o: OffsetAndMetadata | None) -> dict[str, Any]:
        if o is None:
            return {"partition_index": partition, "committed_offset": INVALID_OFFSET,
                    "committed_leader_epoch": -1, "metadata": "", "error_code": 0}
        return {"partition_index": partition, "committed_offset": o.offset, "committed_leader_epoch": o.leader_epoch,
                "metadata": o.metadata, "error_code": 0}

    def delete_offsets(self, gid: str, topics: Sequence[Mapping[str, Any]]) -> GroupResult:
        """Serve OffsetDelete: a group's offsets of topics it is not subscribed to."""
        res = GroupResult()
        if not gid:
            res.response = {"error_code": int(ErrorCode.INVALID_GROUP_ID), "topics": []}
            return res
        kind = self.group_type_of(gid)
        if kind in (None, "share"):
            res.response = {"error_code": int(ErrorCode.GROUP_ID_NOT_FOUND), "topics": []}
            return res
        if kind == "consumer":
            def is_subscribed(topic: str) -> bool:
                return self.consumer.is_subscribed_to(gid, topic)
        elif kind == "streams":
            def is_subscribed(topic: str) -> bool:
                return self.streams.is_subscribed_to(gid, topic)
        else:
            group = self.classic.groups[gid]
            if group.state is ClassicState.DEAD:
                res.response = {"error_code": int(ErrorCode.GROUP_ID_NOT_FOUND), "topics": []}
                return res
            if not group.is_empty() and not group.uses_consumer_protocol():
                res.response = {"error_code": int(ErrorCode.NON_EMPTY_GROUP), "topics": []}
                return res
            is_subscribed = group.is_subscribed_to
        records: list[Record] = []
        topics_out = []
        for topic in topics:
            name = topic["name"]
            exists = self._any_topic(name) is not None
            subscribed = is_subscribed(name)
            parts_out = []
            for p in topic["partitions"]:
                index = p["partition_index"]
                if not exists:
                    code = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                elif subscribed:
                    code = ErrorCode.GROUP_SUBSCRIBED_TO_TOPIC
                else:
                    code = ErrorCode.NONE
                    # committed or pending transactional offsets: a tombstone (Kafka's deleteOffsets)
                    if self.offsets.get(gid, name, index) is not None or self.offsets.has_pending(gid, name, index):
                        records.append(offset_tombstone(gid, name, index))
                parts_out.append({"partition_index": index, "error_code": int(code)})
            topics_out.append({"name": name, "partitions": parts_out})
        self._apply(res, records)
        res.response = {"error_code": 0, "topics": topics_out}
        return res

    def topic_deleted(self, name: str) -> GroupResult:
        """Offsets of a deleted topic go too (Kafka's onPartitionsDeleted)."""
        res = GroupResult()
        self._apply(res, self.offsets.delete_topic(name))
        return res

    # ------------------------------------------------------------------------------------------------ admin

    def list_groups(self, states: Iterable[str] = (), types: Iterable[str] = ()) -> list[dict[str, Any]]:
        """ListGroups entries of every type; filters compare case-insensitively, as Kafka does."""
        states_filter = {s.lower() for s in states}
        types_filter = {t.lower() for t in types}
        return [entry for gid in self.group_ids() if (entry := self.listed_group(gid, states_filter, types_filter))]

    def group_ids(self) -> list[str]:
        """Every group's id, sorted (ListGroups' order)."""
        return sorted([*self.classic.groups, *self.consumer.groups, *self.share.groups, *self.streams.groups])

    def listed_group(self, gid: str, states_filter: Collection[str], types_filter: Collection[str]
                     ) -> dict[str, Any] | None:
        """The ListGroups entry of group `gid` if it exists and passes the (lower-case) filters."""
        if (classic := self.classic.groups.get(gid)) is not None:
            entry = {"group_id": gid, "protocol_type": classic.protocol_type or "",
                     "group_state": classic.state.value, "group_type": "classic"}
        elif (consumer_group := self.consumer.groups.get(gid)) is not None:
            entry = {"group_id": gid, "protocol_type": "consumer", "group_state": consumer_group.state().value,
                     "group_type": "consumer"}
        elif (share_group := self.share.groups.get(gid)) is not None:
            entry = {"group_id": gid, "protocol_type": "share", "group_state": share_group.state.value,
                     "group_type": "share"}
        elif (streams_group := self.streams.groups.get(gid)) is not None:
            entry = {"group_id": gid, "protocol_type": "streams", "group_state": streams_group.state().value,
                     "group_type": "streams"}
        else:
            return None
        if states_filter and entry["group_state"].lower() not in states_filter:
            return None
        if types_filter and entry["group_type"] not in types_filter:
            return None
        return entry

    def describe_groups(self, group_ids: Sequence[str], version: int) -> list[dict[str, Any]]:
        """DescribeGroups: classic groups only. Another type's group, or no group, is "Dead"; from v6 with
        GROUP_ID_NOT_FOUND and a message (Kafka 4)."""
        out = []
        for gid in group_ids:
            described = self.classic.describe(gid)
            if described is not None:
                out.append(described)
                continue
            entry: dict[str, Any] = {"error_code": 0, "group_id": gid, "group_state": "Dead", "protocol_type": "",
                                     "protocol_data": "", "members": []}
            if version >= 6:
                kind = self.group_type_of(gid)
                entry["error_code"] = int(ErrorCode.GROUP_ID_NOT_FOUND)
                entry["error_message"] = (f"Group {gid} not found." if kind is None
                                          else f"Group {gid} is not a classic group.")
            out.append(entry)
        return out

    def plan_delete_groups(self, group_ids: Sequence[str]) -> DeletePlan:
        results: dict[str, int] = {}
        deletable: list[str] = []
        share_partitions: dict[str, dict[UUID, frozenset[int]]] = {}
        for gid in group_ids:
            kind = self.group_type_of(gid)
            if gid in results or gid in deletable:
                continue
            if kind is None:
                results[gid] = int(ErrorCode.GROUP_ID_NOT_FOUND)
            elif kind == "classic":
                state = self.classic.groups[gid].state
                if state is ClassicState.DEAD:
                    results[gid] = int(ErrorCode.GROUP_ID_NOT_FOUND)
                elif state is not ClassicState.EMPTY:
                    results[gid] = int(ErrorCode.NON_EMPTY_GROUP)
                else:
                    deletable.append(gid)
            elif kind == "consumer":
                if self.consumer.groups[gid].members:
                    results[gid] = int(ErrorCode.NON_EMPTY_GROUP)
                else:
                    deletable.append(gid)
            elif kind == "streams":
                if self.streams.groups[gid].members:
                    results[gid] = int(ErrorCode.NON_EMPTY_GROUP)
                else:
                    deletable.append(gid)
            elif kind == "share":
                group = self.share.groups[gid]
                if group.members:
                    results[gid] = int(ErrorCode.NON_EMPTY_GROUP)
                else:
                    deletable.append(gid)
                    md = group.partition_metadata
                    parts: dict[UUID, frozenset[int]] = {}
                    if md is not None:
                        for tid, tp in list(md.initialized.items()) + list(md.initializing.items()):
                            parts[tid] = parts.get(tid, frozenset()) | tp.partitions
                        # A DeleteShareGroupOffsets that did not finish: its topics' state goes too (as Kafka).
                        for tid, name in md.deleting.items():
                            info = self._any_topic(name)
                            if info is not None and info[0] == tid:
                                parts[tid] = parts.get(tid, frozenset()) | frozenset(range(info[1]))
                    share_partitions[gid] = parts
        return DeletePlan(results, deletable, share_partitions)

    def delete_groups(self, group_ids: Sequence[str]) -> GroupResult:
        """Tombstones for these groups (validated again: they may have changed since the plan) and their
        offsets; the response maps group id -> error code."""
        res = GroupResult()
        plan = self.plan_delete_groups(group_ids)
        results = dict(plan.results)
        for gid in plan.deletable:
            kind = self.group_type_of(gid)
            self._apply(res, self.offsets.delete_all(gid))
            if kind == "classic":
                res.records.append(classic_records.tombstone(gid))
                self.classic.delete(gid)
            elif kind == "consumer":
                self._delete_consumer_group(gid, res)
            elif kind == "streams":
                self.streams.delete(gid, res)
            elif kind == "share":
                self._apply(res, [share_records.state_partition_metadata_tombstone(gid),
                                  share_records.target_assignment_epoch_tombstone(gid),
                                  share_records.group_epoch_tombstone(gid)])
            results[gid] = 0
            log.info("group deleted", group=gid, type=kind)
        res.response = {"results": results}
        return res

    def snapshot(self) -> dict[str, Any]:
        return {"share": self.share.snapshot(),
                "consumer": {gid: g.snapshot() for gid, g in sorted(self.consumer.groups.items())},
                "classic": {gid: {"state": g.state.value, "generation": g.generation_id,
                                  "protocol_type": g.protocol_type, "protocol": g.protocol_name,
                                  "leader": g.leader_id,
                                  "members": {mid: (m.group_instance_id, m.assignment) for mid, m in g.members.items()}}
                            for gid, g in sorted(self.classic.groups.items())},
                "offsets": {g: {t: dict(sorted(ps.items())) for t, ps in sorted(ts.items())}
                            for g, ts in sorted(self.offsets.offsets.items())},
                "pending_offsets": {g: {pid: {t: dict(sorted(ps.items())) for t, ps in sorted(ts.items())}
                                        for pid, ts in self.offsets.pending_offsets(g).items()}
                                    for g in sorted(self.offsets.open_transactions)}}
