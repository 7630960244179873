"""Consumer groups (KIP-848): ConsumerGroupHeartbeat and ConsumerGroupDescribe, sans-IO, after Kafka's
GroupMetadataManager and CurrentAssignmentBuilder.

Every change is a ConsumerGroup* record emitted and applied by replay. A heartbeat:
 1. validates the request and finds (or creates, with epoch 0) the group and the member; a static member
    rejoining with a new member id takes over its instance's assignment;
 2. updates the member; a new or changed subscription (topic names or a regular expression) or a change of the
    subscribed topics' metadata bumps the group epoch. Regular expressions are validated and resolved before the
    heartbeat is served, off the event loop: `regex_work` says what a heartbeat needs, the runtime resolves it
    (regex.py) and hands the heartbeat the verdicts;
 3. if the group epoch is ahead of the target assignment epoch, the server-side assignor (uniform or range)
    computes a new target assignment;
 4. reconciles this member towards its target: partitions it must give up are revoked first (the member stays
    in its epoch, UNREVOKED_PARTITIONS, until its heartbeat no longer reports them); partitions still held by
    another member are given only once released (UNRELEASED_PARTITIONS); then it moves to the target epoch.
Sessions expire after the session timeout; a member that does not revoke within its rebalance timeout is
fenced. Time moves only through `tick(now)`.
"""

from __future__ import annotations

import base64
import dataclasses
import functools
import hashlib
import uuid
from collections import Counter
from collections.abc import Callable, Collection, Iterable, Mapping
from dataclasses import dataclass
from typing import Any
from uuid import UUID

import structlog

from broker.config.components import ComponentConfig, setting
from broker.groups.consumer import records as rec
from broker.groups.consumer.assignors import ASSIGNORS
from broker.groups.consumer.classic_members import ClassicMembers
from broker.groups.consumer.group import (
    JOIN_GROUP_MEMBER_EPOCH,
    LEAVE_GROUP_MEMBER_EPOCH,
    LEAVE_GROUP_STATIC_MEMBER_EPOCH,
    Assignment,
    ConsumerGroup,
    ConsumerGroupState,
    ConsumerMember,
    MemberState,
    ResolvedRegex,
)
from broker.groups.consumer.regex import Identity, RegexWork, Resolution, ResolutionKey
from broker.groups.records import Record
from broker.groups.result import GroupError, GroupResult
from broker.groups.timers import Timers
from protocol.errors import ErrorCode

log = structlog.get_logger(__name__)

TopicInfoLookup = Callable[[str], "tuple[UUID, int] | None"]
# group id -> (session timeout ms, heartbeat interval ms) from its group configs
GroupTimingLookup = Callable[[str], "tuple[int, int]"]


@dataclass(frozen=True)
class ConsumerConfig(ComponentConfig):
    session_timeout_ms: int = setting("group.consumer.session.timeout.ms")
    heartbeat_interval_ms: int = setting("group.consumer.heartbeat.interval.ms")
    max_size: int = setting("group.consumer.max.size")
    assignors: tuple[str, ...] = setting("group.consumer.assignors")  # the first is the default
    migration_policy: str = setting("group.consumer.migration.policy")


def new_member_id() -> str:
    """A random member id as Kafka prints Uuids (URL-safe base64, no padding)."""
    return base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")


def _tp_list(a: Assignment) -> list[dict[str, Any]]:
    return [{"topic_id": t, "partitions": sorted(ps)} for t, ps in sorted(a.items(), key=lambda kv: str(kv[0]))
            if ps]


def _owned(topic_partitions: Iterable[Any] | None) -> dict[UUID, set[int]] | None:
    if topic_partitions is None:
        return None
    out: dict[UUID, set[int]] = {}
    for tp in topic_partitions:
        out.setdefault(tp["topic_id"], set()).update(tp["partitions"])
    return out


def _is_subset(owned: dict[UUID, set[int]] | None, assigned: Assignment) -> bool:
    if owned is None:
        return False
    return all(ps <= assigned.get(t, frozenset()) for t, ps in owned.items())


def _owns_any(owned: dict[UUID, set[int]] | None, partitions: Assignment) -> bool:
    if owned is None:
        return True  # not reported: assume it still holds them
    return any(ps & partitions.get(t, frozenset()) for t, ps in owned.items())


def check_regex(pattern: str, regexes: Mapping[str, Resolution]) -> None:
    """Raise Kafka's INVALID_REGULAR_EXPRESSION if the verdict on `pattern` says so. The caller ran `regex_work`
    for the request, which checks every pattern a request carries: a missing verdict is a bug, not a client's."""
    verdict = regexes.get(pattern)
    if verdict is None:
        raise RuntimeError(f"regular expression {pattern!r} was not checked before the heartbeat")
    if verdict.error is not None:
        raise GroupError(ErrorCode.INVALID_REGULAR_EXPRESSION, verdict.error)


def _described_assignment(topic_name: Callable[[UUID], str | None], *parts: Assignment) -> dict[str, Any]:
    """Kafka's described assignment: the union of the parts (assigned and pending revocation), without topics it
    no longer knows."""
    merged: dict[UUID, set[int]] = {}
    for a in parts:
        for t, ps in a.items():
            merged.setdefault(t, set()).update(ps)
    return {"topic_partitions": [{"topic_id": t, "topic_name": name, "partitions": sorted(ps)}
                                 for t, ps in sorted(merged.items(), key=lambda kv: str(kv[0]))
                                 if ps and (name := topic_name(t)) is not None]}


def _described_member(m: ConsumerMember, target: Assignment, topic_name: Callable[[UUID], str | None]
                      ) -> dict[str, Any]:
    return {"member_id": m.member_id, "instance_id": m.instance_id, "rack_id": m.rack_id,
            "member_epoch": m.member_epoch, "client_id": m.client_id, "client_host": m.client_host,
            "subscribed_topic_names": sorted(m.subscribed_topic_names),
            "subscribed_topic_regex": m.subscribed_topic_regex or "",  # Kafka: "" without one
            "assignment": _described_assignment(topic_name, m.assigned_partitions, m.partitions_pending_revocation),
            "target_assignment": _described_assignment(topic_name, target),
            "member_type": 0 if m.uses_classic_protocol else 1}


class ConsumerGroupManager(ClassicMembers):
    def __init__(self, config: ConsumerConfig | None = None, *, topic_info: TopicInfoLookup,
                 topics_version: Callable[[], int] = lambda: 0,
                 acl_version: Callable[[], int] = lambda: 0,
                 group_timing: GroupTimingLookup | None = None,
                 member_id_factory: Callable[[], str] = new_member_id) -> None:
        self.config = config or ConsumerConfig()
        self._topic_info = topic_info
        self._topics_version = topics_version
        self._acl_version = acl_version
        self.group_timing = group_timing
        self._new_member_id = member_id_factory
        self.groups: dict[str, ConsumerGroup] = {}
        self.timers: Timers[tuple[str, str, str]] = Timers()
        # Soft state: group -> pattern -> the key its resolution was made under (regex.py), and group -> member ->
        # the identity of its last heartbeat (whose DESCRIBE permission filters the member's pattern).
        self._regex_keys: dict[str, dict[str, ResolutionKey]] = {}
        self._identities: dict[str, dict[str, Identity]] = {}
        # ("rebalance", group, member) timer -> the member epoch whose revocation it waits for
        self._rebalance_epoch: dict[tuple[str, str, str], int] = {}
        # Set by the coordinator: (group, leaving members, result, now, rebalance) -> True if it turned the group
        # into a classic group (online downgrade) instead of fencing the members.
        self.downgrade: Callable[[ConsumerGroup, Collection[str], GroupResult, int, bool], bool] | None = None

    # ------------------------------------------------------------------------------------------ helpers

    def _timing(self, gid: str) -> tuple[int, int]:
        if self.group_timing is not None:
            return self.group_timing(gid)
        return self.config.session_timeout_ms, self.config.heartbeat_interval_ms

    def _emit(self, res: GroupResult, record: Record) -> None:
        # The exact bytes handed out are what changes the state.
        rec.apply(self.groups, rec.decode(record.key, record.value))
        res.records.append(record)

    def emit(self, res: GroupResult, record: Record) -> None:
        """Apply and hand out a consumer-group record built elsewhere (group conversions)."""
        self._emit(res, record)

    def _topic_ids(self, names: Iterable[str]) -> dict[str, tuple[UUID, int]]:
        return {n: info for n in names if (info := self._topic_info(n)) is not None}

    def _metadata_hash(self, group: ConsumerGroup) -> int:
        """Hash of the subscribed topics' (name, id, partition count): a change means a new assignment.
        Kafka hashes more (racks) with its own function; the value is only ever compared."""
        h = hashlib.blake2b(digest_size=8)
        infos = self._topic_ids(group.subscribed_topic_names())
        for name in sorted(infos):
            tid, n = infos[name]
            h.update(f"{name}\0{tid}\0{n}\n".encode())
        return int.from_bytes(h.digest(), "big", signed=True) if infos else 0

    # ========================================================================================= heartbeat

    def heartbeat(self, req: Mapping[str, Any], version: int, now: int, *, client_id: str = "",
                  client_host: str = "", group: ConsumerGroup | None = None,
                  on_convert: Callable[[GroupResult], None] | None = None, identity: Identity = None,
                  regexes: Mapping[str, Resolution] | None = None) -> GroupResult:
        """Serve a ConsumerGroupHeartbeat (v0/v1). `group` is given when the facade converts a classic group with
        members: the heartbeat is validated against it, and `on_convert(result)` emits the conversion (and
        registers the group) only once every check has passed, so a refused heartbeat changes nothing.
        `identity` is the client's (regex.Identity); `regexes` the verdicts for `regex_work(req, identity)`."""
        res = GroupResult()
        try:
            self._validate(req, version)
            if req["member_epoch"] in (LEAVE_GROUP_MEMBER_EPOCH, LEAVE_GROUP_STATIC_MEMBER_EPOCH):
                res.response = self._leave(req, now, res)
            else:
                res.response = self._heartbeat(req, now, client_id, client_host, res, group, on_convert, identity,
                                               regexes or {})
        except GroupError as e:
            assert not res.records, "validation must come before any record"
            res.response = {"error_code": int(e.code), "error_message": e.message, "member_id": None,
                            "member_epoch": 0, "heartbeat_interval_ms": 0, "assignment": None}
        return res

    def prevalidate(self, req: Mapping[str, Any], version: int, regexes: Mapping[str, Resolution]) -> None:
        """The checks that do not depend on the group (request shape, assignor, regular expression)."""
        self._validate(req, version)
        if req.get("subscribed_topic_regex"):
            check_regex(req["subscribed_topic_regex"], regexes)

    def _validate(self, req: Mapping[str, Any], version: int) -> None:
        epoch = req["member_epoch"]
        member_id_required = version >= 1 or epoch > 0 or epoch == LEAVE_GROUP_MEMBER_EPOCH
        if member_id_required and not req["member_id"].strip():
            raise GroupError(ErrorCode.INVALID_REQUEST, "MemberId can't be empty.")
        if not req["group_id"].strip():
            raise GroupError(ErrorCode.INVALID_REQUEST, "GroupId can't be empty.")
        for key, what in (("instance_id", "InstanceId"), ("rack_id", "RackId")):
            if req.get(key) is not None and not req[key].strip():
                raise GroupError(ErrorCode.INVALID_REQUEST, f"{what} can't be empty.")
        if epoch == JOIN_GROUP_MEMBER_EPOCH:
            if req["rebalance_timeout_ms"] == -1:
                raise GroupError(ErrorCode.INVALID_REQUEST, "RebalanceTimeoutMs must be provided in first request.")
            if req["topic_partitions"] is None or req["topic_partitions"]:
                raise GroupError(ErrorCode.INVALID_REQUEST, "TopicPartitions must be empty when (re-)joining.")
            # An empty subscription is one (the member joins and is assigned nothing): only absence is refused.
            if req["subscribed_topic_names"] is None and req.get("subscribed_topic_regex") is None:
                raise GroupError(ErrorCode.INVALID_REQUEST, "Either SubscribedTopicNames or SubscribedTopicRegex "
                                 "must be non-null when (re-)joining.")
        elif epoch == LEAVE_GROUP_STATIC_MEMBER_EPOCH:
            if req.get("instance_id") is None:
                raise GroupError(ErrorCode.INVALID_REQUEST, "InstanceId can't be null.")
        elif epoch < LEAVE_GROUP_STATIC_MEMBER_EPOCH:
            raise GroupError(ErrorCode.INVALID_REQUEST, "MemberEpoch is invalid.")
        assignor = req.get("server_assignor")
        if assignor is not None and assignor not in self.config.assignors:
            raise GroupError(ErrorCode.UNSUPPORTED_ASSIGNOR,
                             f"ServerAssignor {assignor} is not supported. Supported assignors: "
                             f"{', '.join(self.config.assignors)}.")

    @staticmethod
    def _check_epoch(member: ConsumerMember, epoch: int, owned: dict[UUID, set[int]] | None) -> None:
        if epoch > member.member_epoch:
            raise GroupError(ErrorCode.FENCED_MEMBER_EPOCH,
                             f"The consumer group member has a greater member epoch ({epoch}) than the one known by "
                             f"the group coordinator ({member.member_epoch}). The member must abandon all its "
                             "partitions and rejoin.")
        if epoch < member.member_epoch and (epoch != member.previous_member_epoch
                                            or not _is_subset(owned, member.assigned_partitions)):
            # The previous epoch is accepted when the answer that moved the member on may have been lost.
            raise GroupError(ErrorCode.FENCED_MEMBER_EPOCH,
                             f"The consumer group member has a smaller member epoch ({epoch}) than the one known "
                             f"by the group coordinator ({member.member_epoch}). The member must abandon all its "
                             "partitions and rejoin.")

    def _heartbeat(self, req: Mapping[str, Any], now: int, client_id: str, client_host: str, res: GroupResult,
                   converted: ConsumerGroup | None, on_convert: Callable[[GroupResult], None] | None,
                   identity: Identity, regexes: Mapping[str, Resolution]) -> dict[str, Any]:
        gid, mid, epoch = req["group_id"], req["member_id"], req["member_epoch"]
        instance_id = req.get("instance_id")
        owned = _owned(req["topic_partitions"])
        names = req["subscribed_topic_names"]
        regex = req.get("subscribed_topic_regex")
        group = converted or self.groups.get(gid)
        if group is None:
            if epoch != JOIN_GROUP_MEMBER_EPOCH:
                raise GroupError(ErrorCode.GROUP_ID_NOT_FOUND, f"Consumer group {gid} not found.")
            group = ConsumerGroup(gid)  # materialized by replaying its first records
        if len(group.members) >= self.config.max_size and (not mid or mid not in group.members):
            raise GroupError(ErrorCode.GROUP_MAX_SIZE_REACHED,
                             f"The consumer group has reached its maximum capacity of {self.config.max_size} members.")
        if not mid:
            mid = self._new_member_id()  # v0: the coordinator names the member

        # 1. Find the member (validations only: nothing is emitted before every check has passed).
        replaced: ConsumerMember | None = None
        if instance_id is None:
            member = group.members.get(mid)
            if member is None:
                if epoch != JOIN_GROUP_MEMBER_EPOCH:
                    raise GroupError(ErrorCode.UNKNOWN_MEMBER_ID, f"Member {mid} is not a member of group {gid}.")
                member = ConsumerMember(mid)
            else:
                self._check_epoch(member, epoch, owned)
        else:
            existing = group.static_member(instance_id)
            if epoch == JOIN_GROUP_MEMBER_EPOCH:
                if existing is None:
                    member = group.members.get(mid) or ConsumerMember(mid)
                else:
                    if not existing.uses_classic_protocol and existing.member_epoch != LEAVE_GROUP_STATIC_MEMBER_EPOCH:
                        raise GroupError(ErrorCode.UNRELEASED_INSTANCE_ID,
                                         f"Static member {mid} with instance id {instance_id} cannot join the group "
                                         f"because the instance id is owned by {existing.member_id} member.")
                    replaced = existing
                    member = dataclasses.replace(existing, member_id=mid, member_epoch=0, previous_member_epoch=0,
                                                 partitions_pending_revocation={})
            else:
                member = group.known_static_member(instance_id, mid)
                self._check_epoch(member, epoch, owned)
        is_new = mid not in group.members and replaced is None
        before = member
        updated = dataclasses.replace(
            member,
            instance_id=instance_id if instance_id is not None else member.instance_id,
            rack_id=req.get("rack_id") if req.get("rack_id") is not None else member.rack_id,
            rebalance_timeout_ms=req["rebalance_timeout_ms"] if req["rebalance_timeout_ms"] != -1
            else member.rebalance_timeout_ms,
            server_assignor=req.get("server_assignor") if req.get("server_assignor") is not None
            else member.server_assignor,
            subscribed_topic_names=frozenset(names) if names is not None else member.subscribed_topic_names,
            subscribed_topic_regex=(regex or None) if regex is not None else member.subscribed_topic_regex,
            client_id=client_id, client_host=client_host, classic=None)
        new_regex = updated.subscribed_topic_regex
        if new_regex and new_regex != before.subscribed_topic_regex and new_regex not in group.resolved_regexes:
            check_regex(new_regex, regexes)

        # ---- no errors from here on: emit and apply ----
        assignor_before = self._preferred_assignor(group)
        if on_convert is not None:
            on_convert(res)
        if replaced is not None:
            self._replace_static(group, replaced, member, res)
        elif is_new:
            log.info("member joins the consumer group", group=gid, member=mid)
        subscription_changed = False
        if is_new or not updated.same_metadata(before):
            self._emit(res, rec.member_subscription(gid, updated))
            subscription_changed = (updated.subscribed_topic_names != before.subscribed_topic_names
                                    or updated.subscribed_topic_regex != before.subscribed_topic_regex)
        group = self.groups[gid]
        self._identities.setdefault(gid, {})[mid] = identity
        bump = updated.subscribed_topic_names != before.subscribed_topic_names
        # A change of the group's preferred server assignor is a new assignment too (Kafka 4.4).
        bump |= self._preferred_assignor(group) != assignor_before
        bump |= self._update_regexes(group, before.subscribed_topic_regex if not is_new else None,
                                     updated.subscribed_topic_regex, now, res, regexes)
        metadata_hash = self._metadata_hash(group)
        if bump or metadata_hash != group.metadata_hash:
            self._emit(res, rec.group_epoch(gid, group.group_epoch + 1, metadata_hash))

        # 2. Target assignment.
        if group.group_epoch > group.assignment_epoch:
            self._update_target_assignment(group, now, res)

        # 3. Reconcile this member towards its target.
        member = group.members[mid]
        reconciled = self._reconcile(group, member, owned, subscription_changed)
        if reconciled != member:
            self._emit(res, rec.current_assignment(gid, reconciled))
        member = group.members[mid]
        self._schedule(group, member, now)

        session_ms, interval_ms = self._timing(gid)
        response: dict[str, Any] = {"error_code": 0, "error_message": None, "member_id": mid,
                                    "member_epoch": member.member_epoch, "heartbeat_interval_ms": interval_ms,
                                    "assignment": None}
        full = epoch == JOIN_GROUP_MEMBER_EPOCH or (
            req["rebalance_timeout_ms"] != -1 and (names is not None or regex is not None) and owned is not None)
        if full or member.assigned_partitions != before.assigned_partitions or replaced is not None:
            response["assignment"] = {"topic_partitions": _tp_list(member.assigned_partitions)}
        return response

    def _replace_static(self, group: ConsumerGroup, replaced: ConsumerMember, member: ConsumerMember,
                        res: GroupResult) -> None:
        """A static member rejoining with a new member id takes over the old id's target assignment."""
        gid, mid = group.group_id, member.member_id
        log.info("static member rejoins with a new member id", group=gid, instance_id=member.instance_id,
                 old=replaced.member_id, new=mid)
        target = group.target_assignment.get(replaced.member_id, {})
        self._remove_member_records(gid, replaced.member_id, res)
        self._emit(res, rec.member_subscription(gid, member))
        self._emit(res, rec.target_assignment(gid, mid, target))
        self._emit(res, rec.current_assignment(gid, member))
        self._cancel_timers(gid, replaced.member_id)

    def _cancel_timers(self, gid: str, mid: str) -> None:
        for kind in ("session", "rebalance", "join", "sync"):
            self.timers.cancel((kind, gid, mid))
        self._rebalance_epoch.pop(("rebalance", gid, mid), None)
        self._identities.get(gid, {}).pop(mid, None)

    def _schedule(self, group: ConsumerGroup, member: ConsumerMember, now: int) -> None:
        session_ms, _ = self._timing(group.group_id)
        self.timers.schedule(("session", group.group_id, member.member_id), now + session_ms)
        key = ("rebalance", group.group_id, member.member_id)
        if member.state == MemberState.UNREVOKED_PARTITIONS:
            if key not in self.timers:
                self.timers.schedule(key, now + max(member.rebalance_timeout_ms, 0))
                self._rebalance_epoch[key] = member.member_epoch
        else:
            self.timers.cancel(key)
            self._rebalance_epoch.pop(key, None)

    # ----------------------------------------------------------------------------------------- regexes

    def regex_work(self, req: Mapping[str, Any], identity: Identity) -> RegexWork:
        """What the heartbeat `req` from a client of `identity` needs resolved before it is served: its pattern
        checked, and every pattern of the group whose resolution is missing or was made under another key (topics,
        ACLs, or the identities of its subscribers have changed). A pattern none of whose subscribers has
        heartbeated since the coordinator loaded keeps its resolution until one does."""
        regex = req.get("subscribed_topic_regex")
        if req["member_epoch"] in (LEAVE_GROUP_MEMBER_EPOCH, LEAVE_GROUP_STATIC_MEMBER_EPOCH):
            return RegexWork()
        check = frozenset({regex}) if regex else frozenset()
        gid, mid = req["group_id"], req["member_id"]
        group = self.groups.get(gid)
        known = self._identities.get(gid, {})
        identities: dict[str, set[Identity]] = {}
        if group is not None:
            for m in group.members.values():
                pattern = m.subscribed_topic_regex
                if m.member_id == mid and regex is not None:
                    continue  # the request replaces this member's pattern
                if pattern and m.member_id in known:
                    identities.setdefault(pattern, set()).add(known[m.member_id])
        if regex:
            identities.setdefault(regex, set()).add(identity)
        elif group is not None and (member := group.members.get(mid)) is not None and member.subscribed_topic_regex:
            identities.setdefault(member.subscribed_topic_regex, set()).add(identity)
        topics_version, acl_version = self._topics_version(), self._acl_version()
        resolved = group.resolved_regexes if group is not None else {}
        keys = self._regex_keys.get(gid, {})
        resolve = {}
        for pattern, ids in identities.items():
            key = ResolutionKey(topics_version, acl_version, frozenset(ids))
            if pattern not in resolved or keys.get(pattern) != key:
                resolve[pattern] = key.identities
        return RegexWork(check, resolve)

    def _update_regexes(self, group: ConsumerGroup, old: str | None, new: str | None, now: int,
                        res: GroupResult, regexes: Mapping[str, Resolution]) -> bool:
        """Drop the resolution of a pattern nobody uses any more and record the resolutions the heartbeat was
        given (`regex_work`). True if the group must rebalance."""
        gid = group.group_id
        bump = False
        used = group.subscribed_regexes()
        keys = self._regex_keys.setdefault(gid, {})
        if old and old != new and not used.get(old) and old in group.resolved_regexes:
            self._emit(res, rec.regex_tombstone(gid, old))
            keys.pop(old, None)
        if new and new != old and new in group.resolved_regexes:
            bump = True  # the member now subscribes to topics that are already known
        for pattern in sorted(used):
            verdict = regexes.get(pattern)
            if verdict is None or verdict.key is None:
                continue
            topics = verdict.topics
            if topics is None:
                # Valid, but too costly to match against the topics: it resolves to none, never to what it
                # resolved to under other topics, ACLs or members.
                log.warning("regular expression too costly to resolve; it matches no topic", group=gid,
                            regex=pattern)
                topics = frozenset()
            previous = group.resolved_regexes.get(pattern)
            if previous is None or previous.topics != topics:
                self._emit(res, rec.regex(gid, pattern, ResolvedRegex(topics, verdict.key.topics_version, now)))
                bump = True
            keys[pattern] = verdict.key
        return bump

    # ---------------------------------------------------------------------------------------- assignment

    def _preferred_assignor(self, group: ConsumerGroup) -> str:
        votes = Counter(m.server_assignor for m in group.members.values()
                        if m.server_assignor is not None and m.server_assignor in self.config.assignors)
        if not votes:
            return str(self.config.assignors[0])
        return max(votes, key=lambda a: (votes[a], -self.config.assignors.index(a)))

    def _update_target_assignment(self, group: ConsumerGroup, now: int, res: GroupResult) -> None:
        gid = group.group_id
        name = self._preferred_assignor(group)
        infos = self._topic_ids(group.subscribed_topic_names())
        subscriptions = {mid: {infos[t][0] for t in group.member_topics(m) if t in infos}
                         for mid, m in group.members.items()}
        partitions = {tid: n for tid, n in infos.values()}
        target = ASSIGNORS[name].assign(subscriptions, partitions, group.target_assignment,
                                        {mid: m.instance_id for mid, m in group.members.items()})
        for mid in sorted(target):
            new = {t: ps for t, ps in target[mid].items() if ps}
            if group.target_assignment.get(mid) != new:
                self._emit(res, rec.target_assignment(gid, mid, new))
        self._emit(res, rec.target_assignment_epoch(gid, group.group_epoch, now))
        log.info("computed a new target assignment", group=gid, epoch=group.group_epoch, assignor=name,
                 members=len(target))

    def _reconcile(self, group: ConsumerGroup, member: ConsumerMember, owned: dict[UUID, set[int]] | None,
                   subscription_changed: bool) -> ConsumerMember:
        """Kafka's CurrentAssignmentBuilder: one step of the member towards its target assignment."""
        target_epoch = group.assignment_epoch
        if member.reconciled_to(target_epoch) and not subscription_changed:
            return member
        subscribed = {info[0] for info in self._topic_ids(group.member_topics(member)).values()}
        if member.state == MemberState.STABLE:
            if member.member_epoch != target_epoch:
                return self._next(group, member, owned, subscribed)
            if subscription_changed:
                return self._drop_unsubscribed(member, owned, subscribed)
            return member
        if member.state == MemberState.UNREVOKED_PARTITIONS:
            if _owns_any(owned, member.partitions_pending_revocation):
                return self._drop_unsubscribed(member, owned, subscribed) if subscription_changed else member
            return self._next(group, member, owned, subscribed)
        if member.state == MemberState.UNRELEASED_PARTITIONS:
            return self._next(group, member, owned, subscribed)
        # Unknown state (a newer coordinator wrote it): the member must start over without partitions.
        if owned is None or owned:
            raise GroupError(ErrorCode.FENCED_MEMBER_EPOCH, "The consumer group member is in a unknown state. "
                             "The member must abandon all its partitions and rejoin.")
        return self._next(group, member, owned, subscribed)

    def _drop_unsubscribed(self, member: ConsumerMember, owned: dict[UUID, set[int]] | None,
                           subscribed: set[UUID]) -> ConsumerMember:
        """Revoke at once the partitions of topics the member no longer subscribes to."""
        gone = {t: ps for t, ps in member.assigned_partitions.items() if t not in subscribed}
        if not gone:
            return member
        assigned = {t: ps for t, ps in member.assigned_partitions.items() if t in subscribed}
        revoking = dict(member.partitions_pending_revocation)
        for t, ps in gone.items():
            revoking[t] = revoking.get(t, frozenset()) | ps
        if _owns_any(owned, revoking):
            return dataclasses.replace(member, state=MemberState.UNREVOKED_PARTITIONS, assigned_partitions=assigned,
                                       partitions_pending_revocation=revoking)
        return dataclasses.replace(member, assigned_partitions=assigned)

    def _next(self, group: ConsumerGroup, member: ConsumerMember, owned: dict[UUID, set[int]] | None,
              subscribed: set[UUID]) -> ConsumerMember:
        target_epoch = group.assignment_epoch
        target = group.target_assignment.get(member.member_id, {})
        holders = group.partition_owner_epochs()
        unreleased = False
        assigned: dict[UUID, frozenset[int]] = {}
        revoking: dict[UUID, frozenset[int]] = {}
        pending: dict[UUID, frozenset[int]] = {}
        for tid in set(target) | set(member.assigned_partitions):
            want = target.get(tid, frozenset()) if tid in subscribed else frozenset()
            have = member.assigned_partitions.get(tid, frozenset())
            keep = have & want
            give_up = have - keep
            mine_revoking = member.partitions_pending_revocation.get(tid, frozenset())
            to_add = set()
            for p in want - keep:
                holder = holders.get((tid, p))
                if holder is not None and p not in mine_revoking:
                    unreleased = True  # another member still holds it
                else:
                    to_add.add(p)
            if keep:
                assigned[tid] = keep
            if give_up:
                revoking[tid] = give_up
            if to_add:
                pending[tid] = frozenset(to_add)
        if revoking and _owns_any(owned, revoking):
            # Revocation first: the member keeps its epoch until its heartbeat no longer reports them.
            return dataclasses.replace(member.with_epoch(member.member_epoch), state=MemberState.UNREVOKED_PARTITIONS,
                                       assigned_partitions=assigned, partitions_pending_revocation=revoking)
        for tid, ps in pending.items():
            assigned[tid] = assigned.get(tid, frozenset()) | ps
        moved = member.with_epoch(target_epoch)
        return dataclasses.replace(
            moved, state=MemberState.UNRELEASED_PARTITIONS if unreleased else MemberState.STABLE,
            assigned_partitions=assigned, partitions_pending_revocation={})

    # ============================================================================================== leave

    def _leave(self, req: Mapping[str, Any], now: int, res: GroupResult) -> dict[str, Any]:
        gid, mid, epoch = req["group_id"], req["member_id"], req["member_epoch"]
        instance_id = req.get("instance_id")
        group = self.groups.get(gid)
        if group is None:
            raise GroupError(ErrorCode.GROUP_ID_NOT_FOUND, f"Consumer group {gid} not found.")
        if instance_id is None:
            member = group.members.get(mid)
            if member is None:
                raise GroupError(ErrorCode.UNKNOWN_MEMBER_ID, f"Member {mid} is not a member of group {gid}.")
        else:
            member = group.known_static_member(instance_id, mid)
            if epoch == LEAVE_GROUP_STATIC_MEMBER_EPOCH:
                # A temporary leave: the instance keeps its assignment for the session timeout.
                log.info("static member temporarily left the consumer group", group=gid, member=mid,
                         instance_id=instance_id)
                leaving = dataclasses.replace(member, member_epoch=LEAVE_GROUP_STATIC_MEMBER_EPOCH,
                                              partitions_pending_revocation={})
                self._emit(res, rec.current_assignment(gid, leaving))
                self.timers.cancel(("rebalance", gid, mid))
                return {"error_code": 0, "error_message": None, "member_id": mid,
                        "member_epoch": LEAVE_GROUP_STATIC_MEMBER_EPOCH, "heartbeat_interval_ms": 0,
                        "assignment": None}
        log.info("member left the consumer group", group=gid, member=mid)
        self.fence(group, member.member_id, res, now)
        return {"error_code": 0, "error_message": None, "member_id": mid, "member_epoch": epoch,
                "heartbeat_interval_ms": 0, "assignment": None}

    def _remove_member_records(self, gid: str, mid: str, res: GroupResult) -> None:
        # The order matters: replay checks that a member is gone from the assignments before it goes.
        self._emit(res, rec.current_assignment_tombstone(gid, mid))
        self._emit(res, rec.target_assignment_tombstone(gid, mid))
        self._emit(res, rec.member_subscription_tombstone(gid, mid))

    def fence(self, group: ConsumerGroup, mid: str, res: GroupResult, now: int) -> None:
        """Remove a member (leave, session, rebalance, join or sync timeout); see `fence_members`."""
        self.fence_members(group, [mid], res, now)

    def fence_members(self, group: ConsumerGroup, mids: Collection[str], res: GroupResult, now: int) -> None:
        """Remove members and bump the group epoch once; the remaining members get the new assignment on their
        next heartbeat. When the last members using the consumer protocol go and classic members remain, the
        `downgrade` hook may turn the group into a classic group instead."""
        gid = group.group_id
        if self.downgrade is not None and group.all_classic_except(mids) \
                and self.downgrade(group, mids, res, now, True):
            return
        for mid in mids:
            member = group.members[mid]
            self._remove_member_records(gid, mid, res)
            pattern = member.subscribed_topic_regex
            if pattern and not group.subscribed_regexes().get(pattern) and pattern in group.resolved_regexes:
                self._emit(res, rec.regex_tombstone(gid, pattern))
                self._regex_keys.get(gid, {}).pop(pattern, None)
            self._cancel_timers(gid, mid)
        self._emit(res, rec.group_epoch(gid, group.group_epoch + 1, self._metadata_hash(group)))
        if not group.members:
            # Nothing to assign: the empty group's target is of the new epoch at once (Kafka 4.4).
            self._emit(res, rec.target_assignment_epoch(gid, group.group_epoch, 0))

    def forget(self, group: ConsumerGroup) -> None:
        """Drop the timers and soft state of a group that stops being a consumer group (downgrade)."""
        for mid in group.members:
            self._cancel_timers(group.group_id, mid)
        self._regex_keys.pop(group.group_id, None)
        self._identities.pop(group.group_id, None)

    # ============================================================================================= timers

    def next_deadline(self) -> int | None:
        return self.timers.next_deadline()

    def tick(self, now: int) -> GroupResult:
        res = GroupResult()
        while (key := self.timers.pop_one_expired(now)) is not None:
            kind, gid, mid = key
            group = self.groups.get(gid)
            if group is None or mid not in group.members:
                continue
            if kind == "session":
                log.info("consumer group member session expired", group=gid, member=mid)
                self.fence(group, mid, res, now)
            elif kind in ("join", "sync"):
                log.info("classic member of a consumer group did not rejoin or sync in time", group=gid,
                         member=mid, phase=kind)
                self.fence(group, mid, res, now)
            elif kind == "rebalance":
                expected = self._rebalance_epoch.pop(key, None)
                member = group.members[mid]
                if member.state == MemberState.UNREVOKED_PARTITIONS and member.member_epoch == expected:
                    log.info("consumer group member did not revoke its partitions in time", group=gid, member=mid)
                    self.fence(group, mid, res, now)
        return res

    def loaded(self, now: int) -> None:
        """After replay: members must heartbeat within their session, revocations within their timeout."""
        for gid, group in self.groups.items():
            session_ms, _ = self._timing(gid)
            for mid, member in group.members.items():
                if member.classic is not None:
                    # Classic members only have their own session (their join and sync timers are soft state).
                    self.timers.schedule(("session", gid, mid), now + member.classic.session_timeout_ms)
                    continue
                self.timers.schedule(("session", gid, mid), now + session_ms)
                if member.state == MemberState.UNREVOKED_PARTITIONS:
                    key = ("rebalance", gid, mid)
                    self.timers.schedule(key, now + max(member.rebalance_timeout_ms, 0))
                    self._rebalance_epoch[key] = member.member_epoch

    # ======================================================================================= admin, replay

    def describe(self, group_ids: Iterable[str], topic_name: Callable[[UUID], str | None],
                 group_type_of: Callable[[str], str | None]) -> list[dict[str, Any]]:
        out = []
        for gid in group_ids:
            entry, members = self.describe_group(gid, topic_name, group_type_of)
            entry_members: list[dict[str, Any]] = entry["members"] if members else []
            for build in members:
                entry_members.append(build())
            out.append(entry)
        return out

    def describe_group(self, gid: str, topic_name: Callable[[UUID], str | None],
                       group_type_of: Callable[[str], str | None]
                       ) -> tuple[dict[str, Any], list[Callable[[], dict[str, Any]]]]:
        """A DescribedGroup entry without its members, and one builder per member that returns the member's entry
        (to append to the entry's `members` in order). The builders read a snapshot taken now (members and target
        assignments are immutable values), so a caller may yield to the loop between them (a group of thousands
        of members, each with thousands of partitions) and still describe the group as it was at this call."""
        group = self.groups.get(gid)
        if group is None:
            kind = group_type_of(gid)
            return {"group_id": gid, "error_code": int(ErrorCode.GROUP_ID_NOT_FOUND),
                    "error_message": f"Group {gid} not found." if kind is None
                    else f"Group {gid} is not a consumer group."}, []
        entry: dict[str, Any] = {
            "error_code": 0, "error_message": None, "group_id": gid, "group_state": group.state().value,
            "group_epoch": group.group_epoch, "assignment_epoch": group.assignment_epoch,
            "assignor_name": self._preferred_assignor(group), "members": []}
        target = group.target_assignment
        builders: list[Callable[[], dict[str, Any]]] = [functools.partial(_described_member, m, target.get(m.member_id, {}), topic_name)
                    for _, m in sorted(group.members.items())]
        return entry, builders

    def tombstones(self, gid: str) -> list[Record]:
        """Records deleting an empty group (DeleteGroups, expiry, conversion to a classic group)."""
        group = self.groups[gid]
        out = [rec.regex_tombstone(gid, r) for r in sorted(group.resolved_regexes)]
        out += [rec.target_assignment_epoch_tombstone(gid), rec.group_epoch_tombstone(gid)]
        return out

    def delete(self, gid: str, res: GroupResult) -> None:
        for record in self.tombstones(gid):
            self._emit(res, record)
        self._regex_keys.pop(gid, None)
        self._identities.pop(gid, None)

    def replay(self, key: bytes | memoryview, value: bytes | memoryview | None) -> None:
        rec.apply(self.groups, rec.decode(key, value))

    def is_subscribed_to(self, gid: str, topic: str) -> bool:
        group = self.groups.get(gid)
        return group is not None and topic in group.subscribed_topic_names()

    def validate_member_epoch(self, gid: str, mid: str | None, epoch: int, *, commit: bool, version: int,
                              transactional: bool = False) -> None:
        """Kafka's ConsumerGroup.validateOffsetCommit / validateOffsetFetch; raises GroupError. A transactional
        commit has no OffsetCommit version to check."""
        group = self.groups[gid]
        if epoch < 0 and (not group.members if commit else mid is None):
            return  # the admin client, or a consumer without group management, on an empty group
        member = group.members.get(mid or "")
        if member is None:
            raise GroupError(ErrorCode.UNKNOWN_MEMBER_ID, f"Member {mid} is not a member of group {gid}.")
        if commit and not transactional and not member.uses_classic_protocol and version < 9:
            raise GroupError(ErrorCode.UNSUPPORTED_VERSION, "OffsetCommit version 9 or above must be used by "
                             "members using the modern group protocol")
        if epoch != member.member_epoch:
            if member.uses_classic_protocol:
                raise GroupError(ErrorCode.ILLEGAL_GENERATION,
                                 f"The received generation id {epoch} does not match the expected generation id "
                                 f"{member.member_epoch}.")
            raise GroupError(ErrorCode.STALE_MEMBER_EPOCH,
                             f"The received member epoch {epoch} does not match the expected member epoch "
                             f"{member.member_epoch}.")

    def state_of(self, gid: str) -> ConsumerGroupState:
        return self.groups[gid].state()
