"""The share-group half of the group coordinator (KIP-932), sans-IO.

A ShareGroupHeartbeat/ShareGroupDescribe handler calls this with decoded requests and an injected clock and
gets back response values plus the `__consumer_offsets` records to write. Every state change is made by
emitting a record and replaying it (Kafka's GroupMetadataManager does the same through its snapshot
registry), so `replay()` of the written records rebuilds identical state.

The caller must write `records` durably before sending `response`. If that write fails the in-memory state is
ahead of the log: rebuild the coordinator by replaying `__consumer_offsets` (there is no undo).

Heartbeat flow (Kafka's shareGroupHeartbeat):
 1. validate the request; leave (epoch -1) fences the member;
 2. create/update the member; a new member or a new subscription bumps the group epoch, as does a change of
    the subscribed topics' metadata (hash) or newly initialized share-partitions not yet in the assignment;
 3. if the group epoch is ahead of the assignment epoch, recompute the target assignment (simple assignor,
    initialized share-partitions only);
 4. move the member to the assignment epoch with its target partitions (share groups need no revocation);
 5. ask for InitializeShareGroupState for subscribed share-partitions that have no state yet.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
from collections.abc import Callable, Iterable, Mapping
from typing import Any
from uuid import UUID

from broker.groups.records import Record
from broker.groups.result import GroupResult, InitializeRequest, RemovedMember
from broker.groups.share import records as rec
from broker.groups.share.assignor import SimpleShareAssignor
from broker.groups.share.config import ShareGroupConfig
from broker.groups.share.group import (
    JOIN_GROUP_MEMBER_EPOCH,
    LEAVE_GROUP_MEMBER_EPOCH,
    Assignment,
    MemberState,
    ShareGroup,
    ShareMember,
    StatePartitionMetadata,
    TopicPartitions,
    without_partitions,
)
from broker.groups.share.offsets_admin import ShareOffsetsAdmin
from protocol.errors import ErrorCode

# name -> (topic id, partition count), or None if the topic does not exist
TopicInfoLookup = Callable[[str], "tuple[UUID, int] | None"]
# group id -> "classic" | "consumer" | "streams" | "share" | None (unknown to the other coordinators)
GroupTypeLookup = Callable[[str], "str | None"]
# group id -> (session timeout ms, heartbeat interval ms) from its group configs (share.session.timeout.ms,
# share.heartbeat.interval.ms), read on every heartbeat so that a change applies to the running group.
GroupTimingLookup = Callable[[str], "tuple[int, int]"]
# group id -> its share.assignment.interval.ms (group config over the broker's), read when an assignment is due.
AssignmentIntervalLookup = Callable[[str], int]


class _Error(Exception):
    def __init__(self, code: ErrorCode, message: str | None = None) -> None:
        super().__init__(message)
        self.code, self.message = code, message


def _response_assignment(a: Assignment) -> dict[str, Any]:
    return {"topic_partitions": [{"topic_id": t, "partitions": sorted(ps)}
                                 for t, ps in sorted(a.items(), key=lambda kv: str(kv[0])) if ps]}


class ShareGroupManager:
    def __init__(
        self,
        config: ShareGroupConfig | None = None,
        *,
        topic_info: TopicInfoLookup,
        group_type_of: GroupTypeLookup | None = None,
        topic_name: Callable[[UUID], str | None] | None = None,
        assignor: SimpleShareAssignor | None = None,
        group_timing: GroupTimingLookup | None = None,
        assignment_interval: AssignmentIntervalLookup | None = None,
    ) -> None:
        self.config = config or ShareGroupConfig()
        self.group_timing = group_timing
        self._assignment_interval = assignment_interval or (lambda _gid: self.config.assignment_interval_ms)
        self._topic_info = topic_info
        self._group_type_of = group_type_of or (lambda _gid: None)
        self._topic_name_lookup = topic_name
        self.assignor = assignor or SimpleShareAssignor()
        self.groups: dict[str, ShareGroup] = {}
        # Soft state, not persisted (Kafka keeps it in timers / in memory too).
        self._deadlines: dict[tuple[str, str], int] = {}
        self._init_requested: dict[tuple[str, UUID, int], int] = {}
        self._names: dict[UUID, str] = {}
        self.offsets_admin = ShareOffsetsAdmin(self.groups, topic_info=self._lookup, group_type_of=self._group_type_of)

    # ------------------------------------------------------------------------------------------ heartbeat

    def heartbeat(self, request: Mapping[str, Any], now_ms: int, *, client_id: str = "",
                  client_host: str = "") -> GroupResult:
        """Serve a ShareGroupHeartbeat v1 request (decoded Container or dict)."""
        res = GroupResult()
        try:
            self._validate(request)
            self._check_group_type(request["group_id"])
            if request["member_epoch"] == LEAVE_GROUP_MEMBER_EPOCH:
                self._leave(request["group_id"], request["member_id"], res)
            else:
                self._heartbeat(request, now_ms, client_id, client_host, res)
        except _Error as e:
            # Validation happens before any record is emitted, so an error leaves no partial change.
            assert not res.records
            res.response = {"error_code": int(e.code), "error_message": e.message}
        return res

    @staticmethod
    def _validate(request: Mapping[str, Any]) -> None:
        # Kafka's GroupCoordinatorService.throwIfShareGroupHeartbeatRequestIsInvalid (v1: client member ids).
        if not request["member_id"]:
            raise _Error(ErrorCode.INVALID_REQUEST, "MemberId can't be empty.")
        if not request["group_id"]:
            raise _Error(ErrorCode.INVALID_REQUEST, "GroupId can't be empty.")
        if request["rack_id"] == "":
            raise _Error(ErrorCode.INVALID_REQUEST, "RackId can't be empty.")
        epoch = request["member_epoch"]
        if epoch == JOIN_GROUP_MEMBER_EPOCH:
            if not request["subscribed_topic_names"]:
                raise _Error(ErrorCode.INVALID_REQUEST, "SubscribedTopicNames must be set in first request.")
        elif epoch < LEAVE_GROUP_MEMBER_EPOCH:
            raise _Error(ErrorCode.INVALID_REQUEST, "MemberEpoch is invalid.")

    def _check_group_type(self, gid: str) -> None:
        kind = self._group_type_of(gid)
        if kind not in (None, "share"):
            # Kafka does not convert between group types: another type's group id is "not found" here.
            raise _Error(ErrorCode.GROUP_ID_NOT_FOUND, f"Group {gid} is not a share group.")

    def _heartbeat(self, request: Mapping[str, Any], now: int, client_id: str, client_host: str,
                   res: GroupResult) -> None:
        gid, mid, epoch = request["group_id"], request["member_id"], request["member_epoch"]
        names = request["subscribed_topic_names"]
        rack = request["rack_id"]
        cfg = self.config

        group = self.groups.get(gid)
        if group is None:
            if epoch != JOIN_GROUP_MEMBER_EPOCH:
                raise _Error(ErrorCode.GROUP_ID_NOT_FOUND, f"Share group {gid} not found.")
            group = ShareGroup(gid)  # materialized by replaying its first record below
        if len(group.members) >= cfg.max_size and mid not in group.members:
            raise _Error(ErrorCode.GROUP_MAX_SIZE_REACHED,
                         f"The share group has reached its maximum capacity of {cfg.max_size} members.")
        member = group.members.get(mid)
        if member is None:
            if epoch != JOIN_GROUP_MEMBER_EPOCH:
                raise _Error(ErrorCode.UNKNOWN_MEMBER_ID, f"Member {mid} is not a member of group {gid}.")
            member = ShareMember(mid)
            is_new = True
        else:
            is_new = False
            self._check_member_epoch(member, epoch)

        # 1. Member metadata; a subscription change bumps the group epoch.
        updated = dataclasses.replace(
            member,
            rack_id=member.rack_id if rack is None else rack,
            subscribed_topic_names=member.subscribed_topic_names if names is None else frozenset(names),
            client_id=client_id, client_host=client_host)
        subscription_changed = False
        if is_new or not updated.same_metadata(member):
            self._emit(res, rec.member_subscription(gid, updated))
            subscription_changed = updated.subscribed_topic_names != member.subscribed_topic_names
        group = self.groups[gid]
        bump = subscription_changed
        if group.assignment_epoch >= group.group_epoch:
            bump = bump or self._initialized_assignment_pending(group)
        metadata_hash = self._metadata_hash(group.subscribed_topic_names())
        if bump or metadata_hash != group.metadata_hash:
            self._emit(res, rec.group_epoch(gid, group.group_epoch + 1, metadata_hash))

        # 2. Target assignment, at most once per share.assignment.interval.ms: members that join meanwhile
        # keep the last target (none for a new member) and get theirs on a heartbeat after the interval.
        if group.group_epoch > group.assignment_epoch and self._may_assign(group, now):
            self._update_target_assignment(group, now, res)

        # 3. Reconcile this member with the target (other members do it on their own heartbeats).
        member = group.members[mid]
        before = member.assigned_partitions if not is_new else {}
        if member.member_epoch != group.assignment_epoch or subscription_changed:
            target = group.target_assignment.get(mid, {})
            topic_ids = self._topic_ids(member.subscribed_topic_names)
            reconciled = member.with_epoch(group.assignment_epoch) \
                if member.member_epoch != group.assignment_epoch else member
            reconciled = dataclasses.replace(
                reconciled, state=MemberState.STABLE,
                assigned_partitions={t: ps for t, ps in target.items() if t in topic_ids})
            if reconciled != member:
                self._emit(res, rec.current_assignment(gid, reconciled))
            member = group.members[mid]

        session_timeout_ms, heartbeat_interval_ms = self._timing(gid)
        self._deadlines[(gid, mid)] = now + session_timeout_ms
        response: dict[str, Any] = {
            "error_code": 0, "member_id": mid, "member_epoch": member.member_epoch,
            "heartbeat_interval_ms": heartbeat_interval_ms, "assignment": None}
        # Assignment only when joining, on a full request (it carries the subscription) or when it changed.
        if epoch == JOIN_GROUP_MEMBER_EPOCH or names is not None or before != member.assigned_partitions:
            response["assignment"] = _response_assignment(member.assigned_partitions)
        res.response = response

        # 4. Share-partitions that need durable state before they can be assigned.
        self._maybe_initialize(group, now, res)

    @staticmethod
    def _check_member_epoch(member: ShareMember, epoch: int) -> None:
        if epoch == JOIN_GROUP_MEMBER_EPOCH:
            return
        if epoch > member.member_epoch:
            raise _Error(ErrorCode.FENCED_MEMBER_EPOCH,
                         f"The share group member has a greater member epoch ({epoch}) than the one known by "
                         f"the group coordinator ({member.member_epoch}). The member must abandon all its "
                         "partitions and rejoin.")
        if epoch < member.member_epoch and epoch != member.previous_member_epoch:
            # The previous epoch is accepted: the response that moved the member on may have been lost.
            raise _Error(ErrorCode.FENCED_MEMBER_EPOCH,
                         f"The share group member has a smaller member epoch ({epoch}) than the one known by "
                         f"the group coordinator ({member.member_epoch}), and it does not match the previous "
                         f"member epoch ({member.previous_member_epoch}). The member must abandon all its "
                         "partitions and rejoin.")

    def _leave(self, gid: str, mid: str, res: GroupResult) -> None:
        group = self.groups.get(gid)
        if group is None:
            raise _Error(ErrorCode.GROUP_ID_NOT_FOUND, f"Group {gid} not found.")
        if mid not in group.members:
            raise _Error(ErrorCode.UNKNOWN_MEMBER_ID, f"Member {mid} is not a member of group {gid}.")
        self._fence(group, mid, "left", res)
        res.response = {"error_code": 0, "member_id": mid, "member_epoch": LEAVE_GROUP_MEMBER_EPOCH,
                        "heartbeat_interval_ms": 0, "assignment": None}

    def _fence(self, group: ShareGroup, mid: str, reason: str, res: GroupResult) -> None:
        """Remove a member (leave or session expiry) and bump the group epoch; the remaining members get the
        new assignment on their next heartbeat."""
        gid = group.group_id
        assigned = group.members[mid].assigned_partitions
        last = len(group.members) == 1
        self._emit(res, rec.current_assignment_tombstone(gid, mid))
        self._emit(res, rec.target_assignment_tombstone(gid, mid))
        self._emit(res, rec.member_subscription_tombstone(gid, mid))
        epoch = group.group_epoch + 1
        self._emit(res, rec.group_epoch(gid, epoch, self._metadata_hash(group.subscribed_topic_names())))
        if last:
            # The group is empty: its (empty) target assignment is of this epoch, and the next member's
            # assignment is computed at once (no assignment time), as Kafka's shareGroupFenceMember does.
            self._emit(res, rec.target_assignment_epoch(gid, epoch, 0))
        self._deadlines.pop((gid, mid), None)
        res.removed_members.append(RemovedMember(gid, mid, reason, assigned))

    # ----------------------------------------------------------------------------------------- assignment

    def _assignable(self, group: ShareGroup) -> dict[UUID, frozenset[int]]:
        """Initialized share-partitions of topics that still exist (same id) under their recorded name."""
        out: dict[UUID, frozenset[int]] = {}
        md = group.partition_metadata
        for tid, tp in (md.initialized.items() if md else ()):
            info = self._lookup(tp.name)
            if info is not None and info[0] == tid:
                ps = frozenset(p for p in tp.partitions if p < info[1])
                if ps:
                    out[tid] = ps
        return out

    def _may_assign(self, group: ShareGroup, now: int) -> bool:
        """Kafka's canComputeNextTargetAssignment: never computed, no interval, or the interval has passed."""
        if group.assignment_timestamp == 0:
            return True
        interval = self._assignment_interval(group.group_id)
        return interval == 0 or now >= group.assignment_timestamp + interval

    def _initialized_assignment_pending(self, group: ShareGroup) -> bool:
        """True when some initialized share-partition of a subscribed topic is missing from the target
        assignment (Kafka's initializedAssignmentPending): the group epoch must move to assign it."""
        if not group.members:
            return False
        subscribed = self._topic_ids(group.subscribed_topic_names())
        assigned: dict[UUID, set[int]] = {}
        for a in group.target_assignment.values():
            for t, ps in a.items():
                assigned.setdefault(t, set()).update(ps)
        return any(t in subscribed and assigned.get(t) != set(ps) for t, ps in self._assignable(group).items())

    def _update_target_assignment(self, group: ShareGroup, now: int, res: GroupResult) -> None:
        gid = group.group_id
        subscriptions = {mid: self._topic_ids(m.subscribed_topic_names) for mid, m in group.members.items()}
        new = self.assignor.assign(subscriptions, self._assignable(group), group.target_assignment)
        for mid in sorted(new):
            if group.target_assignment.get(mid) != new[mid]:
                self._emit(res, rec.target_assignment(gid, mid, new[mid]))
        for mid in sorted(set(group.target_assignment) - set(new)):
            self._emit(res, rec.target_assignment_tombstone(gid, mid))
        self._emit(res, rec.target_assignment_epoch(gid, group.group_epoch, now))

    # ----------------------------------------------------------------------------- share-partition state

    def _maybe_initialize(self, group: ShareGroup, now: int, res: GroupResult) -> None:
        gid = group.group_id
        md = group.partition_metadata or StatePartitionMetadata()
        need: dict[UUID, TopicPartitions] = {}
        for name in sorted(group.subscribed_topic_names()):
            info = self._lookup(name)
            if info is None:
                continue
            tid, count = info
            have = set(md.initialized[tid].partitions) if tid in md.initialized else set()
            if tid in md.initializing:
                # Requests still in flight count as done until the retry interval has passed. Partitions
                # replayed as initializing have no request time: the request died with the old process.
                have.update(p for p in md.initializing[tid].partitions
                            if now - self._init_requested.get((gid, tid, p), -(2 ** 62))
                            < self.config.initialize_retry_interval_ms)
            missing = frozenset(range(count)) - have
            if missing:
                need[tid] = TopicPartitions(name, missing)
        if not need:
            return
        initializing = dict(md.initializing)
        for tid, tp in need.items():
            old = initializing.get(tid)
            initializing[tid] = TopicPartitions(tp.name, tp.partitions | (old.partitions if old else frozenset()))
        deleting = {t: n for t, n in md.deleting.items() if t not in need}
        self._emit(res, rec.state_partition_metadata(
            gid, StatePartitionMetadata(initializing, dict(md.initialized), deleting)))
        for tid, tp in need.items():
            for p in tp.partitions:
                self._init_requested[(gid, tid, p)] = now
        res.initialize.append(InitializeRequest(gid, group.group_epoch,
                                                {t: tp.partitions for t, tp in need.items()}))

    def initialized(self, group_id: str, topic_id: UUID, partitions: Iterable[int]) -> list[Record]:
        """The share coordinator has initialized these share-partitions: they become assignable (the group
        epoch moves on the next heartbeat, as in Kafka)."""
        group = self.groups.get(group_id)
        parts = frozenset(partitions)
        if group is None or not parts:
            return []
        md = group.partition_metadata or StatePartitionMetadata()
        old = md.initialized.get(topic_id) or md.initializing.get(topic_id)
        name = old.name if old else self._topic_name(topic_id)
        initialized = dict(md.initialized)
        prev = initialized.get(topic_id)
        initialized[topic_id] = TopicPartitions(name, parts | (prev.partitions if prev else frozenset()))
        initializing = without_partitions(md.initializing, topic_id, parts)
        for p in parts:
            self._init_requested.pop((group_id, topic_id, p), None)
        res = GroupResult()
        self._emit(res, rec.state_partition_metadata(
            group_id, StatePartitionMetadata(initializing, initialized, dict(md.deleting))))
        return res.records

    def initialize_failed(self, group_id: str, topic_id: UUID, partitions: Iterable[int]) -> list[Record]:
        """InitializeShareGroupState failed: forget the attempt so a later heartbeat asks again."""
        group = self.groups.get(group_id)
        parts = frozenset(partitions)
        md = group.partition_metadata if group else None
        if md is None or topic_id not in md.initializing:
            return []
        for p in parts:
            self._init_requested.pop((group_id, topic_id, p), None)
        res = GroupResult()
        self._emit(res, rec.state_partition_metadata(group_id, StatePartitionMetadata(
            without_partitions(md.initializing, topic_id, parts), dict(md.initialized), dict(md.deleting))))
        return res.records

    def topics_deleted(self, topic_ids: Iterable[UUID]) -> list[Record]:
        """Forget deleted topics in every group's share-partition metadata (the share coordinator deletes
        their state); groups subscribed to them rebalance on the next heartbeat (metadata hash changes)."""
        gone = set(topic_ids)
        res = GroupResult()
        for gid in sorted(self.groups):
            md = self.groups[gid].partition_metadata
            if md is None or not gone & (md.initializing.keys() | md.initialized.keys() | md.deleting.keys()):
                continue
            self._emit(res, rec.state_partition_metadata(gid, StatePartitionMetadata(
                {t: v for t, v in md.initializing.items() if t not in gone},
                {t: v for t, v in md.initialized.items() if t not in gone},
                {t: v for t, v in md.deleting.items() if t not in gone})))
        for key in [k for k in self._init_requested if k[1] in gone]:
            del self._init_requested[key]
        return res.records

    # ------------------------------------------------------------------------------------ sessions, time

    def expire_sessions(self, now_ms: int) -> GroupResult:
        """Fence members whose session timed out (no heartbeat for group.share.session.timeout.ms)."""
        res = GroupResult()
        self.loaded(now_ms)
        for (gid, mid), deadline in sorted(self._deadlines.items(), key=lambda kv: (kv[1], kv[0])):
            if deadline > now_ms:
                continue
            group = self.groups.get(gid)
            if group is None or mid not in group.members:
                del self._deadlines[(gid, mid)]
                continue
            self._fence(group, mid, "session expired", res)
        return res

    def next_deadline(self) -> int | None:
        """Earliest session deadline (ms), None when no member is being timed."""
        return min(self._deadlines.values(), default=None)

    def loaded(self, now_ms: int) -> None:
        """After replay: start a full session for every member without one. Members survive a restart
        until they time out, as in Kafka (onLoaded schedules their session timeouts)."""
        for gid, group in self.groups.items():
            for mid in group.members:
                self._deadlines.setdefault((gid, mid), now_ms + self._timing(gid)[0])

    # ------------------------------------------------------------------------------------ describe, list

    def describe(self, group_ids: Iterable[str]) -> list[dict[str, Any]]:
        """DescribedGroup values for a ShareGroupDescribe response."""
        out = []
        for gid in group_ids:
            entry, members = self.describe_group(gid)
            entry_members: list[dict[str, Any]] = entry["members"] if members else []
            for build in members:
                entry_members.append(build())
            out.append(entry)
        return out

    def describe_group(self, gid: str) -> tuple[dict[str, Any], list[Callable[[], dict[str, Any]]]]:
        """One DescribedGroup entry without its members, and one builder per member returning its entry, over a
        snapshot taken now (members are immutable values): a caller may yield to the loop between builders."""
        kind = self._group_type_of(gid)
        group = self.groups.get(gid)
        if not gid:
            return {"group_id": gid, "error_code": int(ErrorCode.INVALID_GROUP_ID)}, []
        if kind not in (None, "share"):
            return {"group_id": gid, "error_code": int(ErrorCode.GROUP_ID_NOT_FOUND),
                    "error_message": f"Group {gid} is not a share group."}, []
        if group is None:
            return {"group_id": gid, "error_code": int(ErrorCode.GROUP_ID_NOT_FOUND),
                    "error_message": f"Group {gid} not found."}, []
        entry = {"error_code": 0, "group_id": group.group_id, "group_state": group.state.value,
                 "group_epoch": group.group_epoch, "assignment_epoch": group.assignment_epoch,
                 "assignor_name": self.assignor.name, "members": []}
        return entry, [functools.partial(self._described_member, m) for _, m in sorted(group.members.items())]

    def _described_member(self, m: ShareMember) -> dict[str, Any]:
        return {"member_id": m.member_id, "rack_id": m.rack_id, "member_epoch": m.member_epoch,
                "client_id": m.client_id, "client_host": m.client_host,
                "subscribed_topic_names": sorted(m.subscribed_topic_names),
                "assignment": {"topic_partitions": [
                    {"topic_id": t, "topic_name": self._topic_name(t), "partitions": sorted(ps)}
                    for t, ps in sorted(m.assigned_partitions.items(), key=lambda kv: str(kv[0])) if ps]}}

    def list_groups(self) -> list[tuple[str, str]]:
        """(group id, state) of every share group, for ListGroups."""
        return [(gid, g.state.value) for gid, g in sorted(self.groups.items())]

    def member_assignment(self, group_id: str, member_id: str) -> dict[UUID, frozenset[int]] | None:
        """The partitions the member currently holds, or None if it is not a member of share group
        `group_id` (the share-partition leader serves only members, and only what they are assigned)."""
        group = self.groups.get(group_id)
        member = group.members.get(member_id) if group is not None else None
        return None if member is None else dict(member.assigned_partitions)

    def is_share_group(self, group_id: str) -> bool:
        """For the classic/consumer coordinators: is this group id taken by a share group?"""
        return group_id in self.groups

    # -------------------------------------------------------------------------------------------- replay

    def replay(self, key: bytes | memoryview, value: bytes | memoryview | None) -> bool:
        """Apply one `__consumer_offsets` record; False (ignored) if it is not a share-group record.
        Call `loaded(now_ms)` once the partition has been replayed."""
        if not rec.is_share_record(key):
            return False
        rec.apply(self.groups, rec.decode(key, value))
        return True

    def snapshot(self) -> dict[str, Any]:
        return {gid: g.snapshot() for gid, g in sorted(self.groups.items())}

    # ------------------------------------------------------------------------------------------- helpers

    def _emit(self, res: GroupResult, record: Record) -> None:
        rec.emit(self.groups, res.records, record)

    def _timing(self, gid: str) -> tuple[int, int]:
        if self.group_timing is not None:
            return self.group_timing(gid)
        return self.config.session_timeout_ms, self.config.heartbeat_interval_ms

    def _lookup(self, name: str) -> tuple[UUID, int] | None:
        info = self._topic_info(name)
        if info is not None:
            self._names[info[0]] = name
        return info

    def _topic_ids(self, names: Iterable[str]) -> set[UUID]:
        return {info[0] for n in names if (info := self._lookup(n)) is not None}

    def _topic_name(self, tid: UUID) -> str:
        if self._topic_name_lookup is not None and (name := self._topic_name_lookup(tid)) is not None:
            return name
        return self._names.get(tid, "")

    def _metadata_hash(self, names: Iterable[str]) -> int:
        """Hash of the subscribed topics' (name, id, partition count): a change means a rebalance.
        Kafka hashes more (racks) with its own function; the value is only compared, never interpreted."""
        h = hashlib.blake2b(digest_size=8)
        seen = False
        for name in sorted(names):
            info = self._lookup(name)
            if info is not None:
                h.update(f"{name}\0{info[0]}\0{info[1]}\n".encode())
                seen = True
        return int.from_bytes(h.digest(), "big", signed=True) if seen else 0
