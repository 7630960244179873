"""Classic-protocol members of a consumer group (KIP-848 migration), sans-IO, after Kafka's
GroupMetadataManager (classicGroupJoin/Sync/Heartbeat/LeaveToConsumerGroup).

A consumer (JoinGroup/SyncGroup) that joins a consumer group with members is a member like the others, except
that it speaks the classic protocol: its JoinGroup subscription (ConsumerProtocolSubscription) gives its topics
and the partitions it still owns, the server-side assignor assigns it partitions, and:
 * JoinGroup updates the member, bumps the group epoch if its subscription changed, computes the target
   assignment and reconciles the member towards it (partitions it must give up are first removed from its
   assignment; partitions another member still holds come later). The answer comes at once: the member's epoch
   is its generation, the leader is nobody (no client-side assignment);
 * SyncGroup returns its current assignment, encoded as a ConsumerProtocolAssignment in its subscription's
   version, unless the group has moved on (REBALANCE_IN_PROGRESS: rejoin first);
 * Heartbeat answers REBALANCE_IN_PROGRESS whenever the member must rejoin to progress (a newer group epoch,
   partitions to revoke, or released partitions waiting for it);
 * LeaveGroup removes it and bumps the group epoch.
A member that does not rejoin within its rebalance timeout after being told to, or does not sync within it after
joining, is fenced; its session is the classic session timeout. Mixed into ConsumerGroupManager.
"""

from __future__ import annotations

import dataclasses
import uuid
from collections.abc import Callable, Collection, Iterable, Mapping
from typing import Any
from uuid import UUID

import structlog

from broker.groups.consumer import protocol as consumer_protocol
from broker.groups.consumer import records as rec
from broker.groups.consumer.group import ClassicMemberMetadata, ConsumerGroup, ConsumerMember, MemberState
from broker.groups.records import Record
from broker.groups.result import GroupError, GroupResult
from broker.groups.timers import Timers
from protocol.errors import DecodeError, ErrorCode

log = structlog.get_logger(__name__)

UNKNOWN_MEMBER_ID = ""


def join_error(code: ErrorCode, member_id: str = UNKNOWN_MEMBER_ID) -> dict[str, Any]:
    return {"error_code": int(code), "member_id": member_id, "generation_id": -1, "protocol_type": None,
            "protocol_name": None, "leader": "", "skip_assignment": False, "members": []}


def sync_error(code: ErrorCode) -> dict[str, Any]:
    return {"error_code": int(code), "assignment": b"", "protocol_type": None, "protocol_name": None}


class ClassicMembers:
    """JoinGroup/SyncGroup/Heartbeat/LeaveGroup of classic members inside consumer groups; a mixin of
    ConsumerGroupManager (uses its groups, timers, `_emit` and reconciliation)."""

    groups: dict[str, ConsumerGroup]
    timers: Timers[tuple[str, str, str]]
    classic_member_id: Callable[[], str] = staticmethod(lambda: str(uuid.uuid4()))  # Kafka: a random Uuid

    # Provided by ConsumerGroupManager.
    config: Any
    downgrade: Callable[[ConsumerGroup, Collection[str], GroupResult, int, bool], bool] | None

    def _emit(self, res: GroupResult, record: Record) -> None: ...  # pragma: no cover
    def _topic_ids(self, names: Iterable[str]) -> dict[str, tuple[UUID, int]]:
        raise NotImplementedError  # pragma: no cover
    def _metadata_hash(self, group: ConsumerGroup) -> int:
        raise NotImplementedError  # pragma: no cover
    def _update_target_assignment(self, group: ConsumerGroup, now: int, res: GroupResult) -> None: ...  # pragma: no cover
    def _reconcile(self, group: ConsumerGroup, member: ConsumerMember, owned: dict[UUID, set[int]] | None,
                   subscription_changed: bool) -> ConsumerMember:
        raise NotImplementedError  # pragma: no cover
    def _replace_static(self, group: ConsumerGroup, replaced: ConsumerMember, member: ConsumerMember,
                        res: GroupResult) -> None: ...  # pragma: no cover
    def _cancel_timers(self, gid: str, mid: str) -> None: ...  # pragma: no cover
    def fence_members(self, group: ConsumerGroup, mids: Collection[str], res: GroupResult,
                      now: int) -> None: ...  # pragma: no cover

    # ------------------------------------------------------------------------------------------ JoinGroup

    def classic_join(self, req: Mapping[str, Any], version: int, now: int, waiter: Any, *, client_id: str = "",
                     client_host: str = "") -> GroupResult:
        """A JoinGroup to consumer group `req["group_id"]`, which has members (the caller checked the group id
        and the session timeout, as Kafka's service does)."""
        res = GroupResult()
        try:
            res.complete(waiter, self._classic_join(req, version, now, client_id, client_host, res))
        except GroupError as e:
            assert not res.records, "validation must come before any record"
            res.complete(waiter, join_error(e.code, req["member_id"]))
        return res

    def _classic_join(self, req: Mapping[str, Any], version: int, now: int, client_id: str, client_host: str,
                      res: GroupResult) -> dict[str, Any]:
        gid = req["group_id"]
        group = self.groups[gid]
        instance_id = req.get("group_instance_id")
        protocols = tuple((p["name"], bytes(p["metadata"])) for p in req["protocols"])
        unknown = req["member_id"] == UNKNOWN_MEMBER_ID
        mid = self.classic_member_id() if unknown else req["member_id"]
        if mid not in group.members and len(group.members) >= self.config.max_size:
            raise GroupError(ErrorCode.GROUP_MAX_SIZE_REACHED,
                             f"The consumer group has reached its maximum capacity of {self.config.max_size} members.")
        if not group.supports_classic_protocols(req["protocol_type"], {n for n, _ in protocols}):
            raise GroupError(ErrorCode.INCONSISTENT_GROUP_PROTOCOL, f"Member {mid}'s protocols are not supported.")
        if unknown and instance_id is None and version >= 4:
            # KIP-394: a dynamic member first learns its id and comes back with it.
            log.info("dynamic member joins the consumer group, asked to rejoin with its id", group=gid, member=mid)
            return {**join_error(ErrorCode.MEMBER_ID_REQUIRED, mid)}
        try:
            subscription = consumer_protocol.decode_subscription(protocols[0][1])
        except (DecodeError, ValueError):
            raise GroupError(ErrorCode.UNKNOWN_SERVER_ERROR,
                             "Malformed embedded consumer protocol in subscription deserialization.") from None

        replaced: ConsumerMember | None = None
        if instance_id is None:
            member = group.members.get(mid) or ConsumerMember(mid)
        else:
            existing = group.static_member(instance_id)
            if unknown:
                if existing is None:
                    member = group.members.get(mid) or ConsumerMember(mid)
                else:
                    # The instance rejoins with a new member id: the new id takes over its place.
                    replaced = existing
                    member = dataclasses.replace(existing, member_id=mid, member_epoch=0, previous_member_epoch=0,
                                                 partitions_pending_revocation={})
            else:
                member = group.known_static_member(instance_id, mid)
        is_new = mid not in group.members and replaced is None
        before = member
        updated = dataclasses.replace(
            member, instance_id=instance_id if instance_id is not None else member.instance_id,
            rack_id=subscription.rack_id if subscription.rack_id is not None else member.rack_id,
            rebalance_timeout_ms=req["rebalance_timeout_ms"] if req["rebalance_timeout_ms"] != -1
            else member.rebalance_timeout_ms,
            subscribed_topic_names=frozenset(subscription.topics), client_id=client_id, client_host=client_host,
            classic=ClassicMemberMetadata(req["session_timeout_ms"], protocols))

        # ---- no errors from here on: emit and apply ----
        if replaced is not None:
            self._replace_static(group, replaced, member, res)
        elif is_new:
            log.info("member joins the consumer group using the classic protocol", group=gid, member=mid)
        if is_new or not updated.same_metadata(before):
            self._emit(res, rec.member_subscription(gid, updated))
        subscription_changed = updated.subscribed_topic_names != before.subscribed_topic_names
        group = self.groups[gid]
        metadata_hash = self._metadata_hash(group)
        if subscription_changed or metadata_hash != group.metadata_hash:
            self._emit(res, rec.group_epoch(gid, group.group_epoch + 1, metadata_hash))
        if group.group_epoch > group.assignment_epoch:
            self._update_target_assignment(group, now, res)
        owned: dict[UUID, set[int]] = {}
        for name, ps in subscription.owned_partitions.items():
            info = self._topic_ids([name]).get(name)
            if info is not None:
                owned.setdefault(info[0], set()).update(ps)
        current = group.members[mid]
        reconciled = self._reconcile(group, current, owned, subscription_changed)
        if reconciled != current:
            self._emit(res, rec.current_assignment(gid, reconciled))
        member = group.members[mid]
        response = {"error_code": 0, "member_id": mid, "generation_id": member.member_epoch,
                    "protocol_type": consumer_protocol.PROTOCOL_TYPE, "protocol_name": protocols[0][0], "leader": "",
                    "skip_assignment": False, "members": []}
        if replaced is not None and replaced.classic is None and self.downgrade is not None \
                and group.all_classic_except(()) and self.downgrade(group, (), res, now, subscription_changed):
            # It replaced the last consumer-protocol member: the group is a classic group now, rebalancing only
            # if the new member subscribes to other topics than the one it replaced.
            return response
        # Joined: the member must now sync within its rebalance timeout, and heartbeat within its session.
        self.timers.cancel(("join", gid, mid))
        self.timers.cancel(("rebalance", gid, mid))
        self.timers.schedule(("session", gid, mid), now + req["session_timeout_ms"])
        self.timers.schedule(("sync", gid, mid), now + max(req["rebalance_timeout_ms"], 0))
        return response

    # ------------------------------------------------------------------------------------------ SyncGroup

    def _classic_member(self, group: ConsumerGroup, mid: str, instance_id: str | None) -> ConsumerMember:
        """Kafka's validateConsumerGroupMember plus the check that the member speaks the classic protocol."""
        if instance_id is None:
            member = group.members.get(mid)
            if member is None:
                raise GroupError(ErrorCode.UNKNOWN_MEMBER_ID,
                                 f"Member {mid} is not a member of group {group.group_id}.")
        else:
            member = group.known_static_member(
                instance_id, mid, f"Member with instance id {instance_id} is not a member of group {group.group_id}.")
        if member.classic is None:
            raise GroupError(ErrorCode.UNKNOWN_MEMBER_ID, f"Member {member.member_id} does not use the classic "
                             "protocol.")
        return member

    @staticmethod
    def _check_generation(member: ConsumerMember, generation: int) -> None:
        if generation != member.member_epoch:
            raise GroupError(ErrorCode.ILLEGAL_GENERATION,
                             f"The request generation id {generation} is not equal to the member epoch "
                             f"{member.member_epoch} of member {member.member_id}.")

    def _ask_to_rejoin(self, group: ConsumerGroup, member: ConsumerMember, now: int) -> None:
        """The member was told REBALANCE_IN_PROGRESS: it must rejoin within its rebalance timeout."""
        key = ("join", group.group_id, member.member_id)
        if key not in self.timers:
            self.timers.schedule(key, now + max(member.rebalance_timeout_ms, 0))

    def classic_sync(self, req: Mapping[str, Any], now: int, waiter: Any) -> GroupResult:
        res = GroupResult()
        gid, mid = req["group_id"], req["member_id"]
        group = self.groups[gid]
        try:
            member = self._classic_member(group, mid, req.get("group_instance_id"))
            self._check_generation(member, req["generation_id"])
            assert member.classic is not None
            name = member.classic.protocols[0][0]
            if req.get("protocol_type") is not None and req["protocol_type"] != consumer_protocol.PROTOCOL_TYPE:
                raise GroupError(ErrorCode.INCONSISTENT_GROUP_PROTOCOL)
            if req.get("protocol_name") is not None and req["protocol_name"] != name:
                raise GroupError(ErrorCode.INCONSISTENT_GROUP_PROTOCOL)
            if group.group_epoch > member.member_epoch and member.state != MemberState.UNREVOKED_PARTITIONS:
                # A newer epoch: rejoin to catch up (unless the member first has partitions to revoke).
                self._ask_to_rejoin(group, member, now)
                raise GroupError(ErrorCode.REBALANCE_IN_PROGRESS)
        except GroupError as e:
            res.complete(waiter, sync_error(e.code))
            return res
        self.timers.cancel(("sync", gid, member.member_id))
        self.timers.schedule(("session", gid, member.member_id), now + member.classic.session_timeout_ms)
        res.complete(waiter, {"error_code": 0, "protocol_type": req.get("protocol_type"),
                              "protocol_name": req.get("protocol_name"), "assignment": self._assignment_bytes(group, member)})
        return res

    def _assignment_bytes(self, group: ConsumerGroup, member: ConsumerMember) -> bytes:
        """The member's assigned partitions as a ConsumerProtocolAssignment in its subscription's version."""
        assert member.classic is not None
        by_id = {info[0]: name for name, info in self._topic_ids(group.member_topics(member)).items()}
        names = {by_id[tid]: ps for tid, ps in member.assigned_partitions.items() if tid in by_id and ps}
        try:
            version = consumer_protocol.subscription_version(member.classic.protocols[0][1])
        except DecodeError:
            version = 0
        return consumer_protocol.encode_assignment(names, version)

    # ------------------------------------------------------------------------------------------ Heartbeat

    def classic_heartbeat(self, req: Mapping[str, Any], now: int) -> GroupResult:
        gid = req["group_id"]
        group = self.groups[gid]
        try:
            member = self._classic_member(group, req["member_id"], req.get("group_instance_id"))
            self._check_generation(member, req["generation_id"])
        except GroupError as e:
            return GroupResult({"error_code": int(e.code)})
        assert member.classic is not None
        self.timers.schedule(("session", gid, member.member_id), now + member.classic.session_timeout_ms)
        if (member.member_epoch < group.group_epoch or member.state == MemberState.UNREVOKED_PARTITIONS
                or (member.state == MemberState.UNRELEASED_PARTITIONS
                    and not group.waiting_on_unreleased_partition(member))):
            self._ask_to_rejoin(group, member, now)
            return GroupResult({"error_code": int(ErrorCode.REBALANCE_IN_PROGRESS)})
        return GroupResult({"error_code": 0})

    # ----------------------------------------------------------------------------------------- LeaveGroup

    def classic_leave(self, gid: str, members: Iterable[Mapping[str, Any]], now: int) -> GroupResult:
        """A LeaveGroup to a consumer group: any member may be named (by member id, or by instance id for admin
        removals), as Kafka 4.1 allows; they are fenced together (possibly downgrading the group)."""
        group = self.groups[gid]
        res = GroupResult()
        answers = []
        leaving: dict[str, None] = {}
        for identity in members:
            mid, instance_id = identity["member_id"], identity.get("group_instance_id")
            try:
                if instance_id is None:
                    member = group.members.get(mid)
                    if member is None:
                        raise GroupError(ErrorCode.UNKNOWN_MEMBER_ID)
                else:
                    member = group.static_member(instance_id)
                    if member is None:
                        raise GroupError(ErrorCode.UNKNOWN_MEMBER_ID)
                    # Removal by instance id alone (admin tools) names no member id.
                    if mid != UNKNOWN_MEMBER_ID and member.member_id != mid:
                        raise GroupError(ErrorCode.FENCED_INSTANCE_ID)
            except GroupError as e:
                answers.append({"member_id": mid, "group_instance_id": instance_id, "error_code": int(e.code)})
                continue
            log.info("member left the consumer group through LeaveGroup", group=gid, member=member.member_id,
                     instance_id=instance_id, reason=identity.get("reason") or "not provided")
            leaving[member.member_id] = None
            answers.append({"member_id": mid, "group_instance_id": instance_id, "error_code": 0})
        if leaving:
            self.fence_members(group, list(leaving), res, now)
        res.response = {"error_code": 0, "members": answers}
        return res
