"""Classic groups (JoinGroup, SyncGroup, Heartbeat, LeaveGroup), sans-IO, after Kafka's GroupMetadataManager.

The runtime calls these methods with decoded requests, an injected clock and, for JoinGroup/SyncGroup, a waiter
object for the parked response; each returns a GroupResult (records to write, responses to release after the
write). Time moves only through `tick(now)`, which fires the due timers (member heartbeats, the join and sync
phases, the initial rebalance delay).

Flow of a generation: members JoinGroup (a dynamic member first gets MEMBER_ID_REQUIRED and its id, v4+); the
group prepares a rebalance and parks the joins until every known member has rejoined or the rebalance timeout
fires; then the generation moves on, the protocol every member supports that most prefer is chosen, and the
leader receives the members' metadata; the leader's SyncGroup brings the assignment, which is written as the
group's GroupMetadata record before any member gets its part. Static members (group.instance.id) keep their
place across restarts; a new member id for a known instance id fences the old one (FENCED_INSTANCE_ID).
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import structlog

from broker.config.components import ComponentConfig, fixed, setting
from broker.groups.classic import records as classic_records
from broker.groups.classic.group import ClassicGroup, ClassicMember, ClassicState, Protocols
from broker.groups.result import GroupError, GroupResult
from broker.groups.timers import Timers
from protocol.errors import ErrorCode

log = structlog.get_logger(__name__)

UNKNOWN_MEMBER_ID = ""
GroupTypeLookup = Callable[[str], "str | None"]


# Kafka's classicGroupNewMemberJoinTimeoutMs: a constant there, not a config.
NEW_MEMBER_JOIN_TIMEOUT_MS = 5 * 60 * 1000


@dataclass(frozen=True)
class ClassicConfig(ComponentConfig):
    min_session_timeout_ms: int = setting("group.min.session.timeout.ms")
    max_session_timeout_ms: int = setting("group.max.session.timeout.ms")
    initial_rebalance_delay_ms: int = setting("group.initial.rebalance.delay.ms")  # Kafka: 3000, see README
    max_size: int = setting("group.max.size")
    new_member_join_timeout_ms: int = fixed(NEW_MEMBER_JOIN_TIMEOUT_MS)


def _join_error(code: ErrorCode, member_id: str = UNKNOWN_MEMBER_ID) -> dict[str, Any]:
    return {"error_code": int(code), "member_id": member_id, "generation_id": -1, "protocol_type": None,
            "protocol_name": None, "leader": "", "skip_assignment": False, "members": []}


def _sync_error(code: ErrorCode) -> dict[str, Any]:
    return {"error_code": int(code), "assignment": b"", "protocol_type": None, "protocol_name": None}


MAX_STRING_BYTES = 0x7FFF  # Kafka's string fields (compact ones too) hold at most Short.MAX_VALUE bytes


def new_classic_member_id(client_id: str, instance_id: str | None) -> str:
    """Kafka's `<group.instance.id or client.id>-<UUID>`. The prefix is cut (on a character boundary) so the id
    still fits a string field: a 32 767-byte client or instance id would otherwise make an id that no JoinGroup or
    DescribeGroups response can carry, and the group could not be described any more."""
    suffix = f"-{uuid.uuid4()}"
    prefix = (instance_id or client_id).encode()[:MAX_STRING_BYTES - len(suffix)].decode("utf-8", "ignore")
    return prefix + suffix


def _protocols(request: Mapping[str, Any]) -> Protocols:
    return tuple((p["name"], bytes(p["metadata"])) for p in request["protocols"])


class ClassicGroupManager:
    def __init__(self, config: ClassicConfig | None = None, *, group_type_of: GroupTypeLookup | None = None,
                 new_member_id: Callable[[str, str | None], str] | None = None) -> None:
        self.config = config or ClassicConfig()
        self._group_type_of = group_type_of or (lambda gid: "classic" if gid in self.groups else None)
        self._new_member_id = new_member_id or new_classic_member_id
        self.groups: dict[str, ClassicGroup] = {}
        self.timers: Timers[tuple[str, ...]] = Timers()
        # ("join", group) timer of an initial rebalance -> (delay, remaining) of Kafka's delayed initial join
        self._initial_delay: dict[str, tuple[int, int]] = {}
        self._sync_generation: dict[str, int] = {}

    # =========================================================================================== JoinGroup

    def join(self, req: Mapping[str, Any], version: int, now: int, waiter: Any, *, client_id: str = "",
             client_host: str = "") -> GroupResult:
        """Serve a JoinGroup request; the response goes to `waiter` (now or when the join phase completes).
        `req["rebalance_timeout_ms"]` must already be the session timeout for v0 (the handler does it)."""
        res = GroupResult()
        gid, mid = req["group_id"], req["member_id"]
        cfg = self.config
        if not gid:
            res.complete(waiter, _join_error(ErrorCode.INVALID_GROUP_ID, mid))
            return res
        if not cfg.min_session_timeout_ms <= req["session_timeout_ms"] <= cfg.max_session_timeout_ms:
            res.complete(waiter, _join_error(ErrorCode.INVALID_SESSION_TIMEOUT, mid))
            return res
        if self._group_type_of(gid) not in (None, "classic"):
            res.complete(waiter, _join_error(ErrorCode.INCONSISTENT_GROUP_PROTOCOL))
            return res
        unknown = mid == UNKNOWN_MEMBER_ID
        group = self.groups.get(gid)
        new_group = group is None
        if group is None:
            if not unknown:
                res.complete(waiter, _join_error(ErrorCode.UNKNOWN_MEMBER_ID, mid))
                return res
            group = self.groups[gid] = ClassicGroup(gid, now)
        if not self._accept_joining_member(group, mid):
            old = group.members.get(mid)
            if old is not None:
                res.complete(group.take_join_waiter(old), _join_error(ErrorCode.GROUP_MAX_SIZE_REACHED))
                res.complete(group.take_sync_waiter(old), _sync_error(ErrorCode.GROUP_MAX_SIZE_REACHED))
            group.remove(mid)
            self.timers.cancel(("heartbeat", gid, mid))
            res.complete(waiter, _join_error(ErrorCode.GROUP_MAX_SIZE_REACHED))
        elif unknown:
            res.merge(self._join_new_member(req, version, group, now, waiter, client_id, client_host))
        else:
            res.merge(self._join_existing_member(req, version, group, now, waiter, client_id, client_host))
        if new_group and not res.records:
            # Kafka writes an empty GroupMetadata record so that the new group exists in the log.
            res.records.append(classic_records.empty_group_metadata(gid, group.state_timestamp_ms))
        return res

    def _accept_joining_member(self, group: ClassicGroup, mid: str) -> bool:
        max_size = self.config.max_size
        if group.state in (ClassicState.EMPTY, ClassicState.DEAD):
            return True
        if group.state is ClassicState.PREPARING_REBALANCE:
            # Awaiting members count (not the group size): the last members to rejoin are the ones refused.
            member = group.members.get(mid)
            return (member is not None and member.awaiting_join) or group.awaiting_join_count < max_size
        return mid in group.members or len(group.members) < max_size

    def _join_new_member(self, req: Mapping[str, Any], version: int, group: ClassicGroup, now: int, waiter: Any,
                         client_id: str, client_host: str) -> GroupResult:
        res = GroupResult()
        protocols = _protocols(req)
        if group.state is ClassicState.DEAD:
            res.complete(waiter, _join_error(ErrorCode.COORDINATOR_NOT_AVAILABLE))
            return res
        if not group.supports_protocols(req["protocol_type"], {n for n, _ in protocols}):
            res.complete(waiter, _join_error(ErrorCode.INCONSISTENT_GROUP_PROTOCOL))
            return res
        instance_id = req.get("group_instance_id")
        new_id = self._new_member_id(client_id, instance_id)
        if instance_id is not None:
            existing = group.static_member_id(instance_id)
            if existing is not None:
                log.info("static member rejoins with a new member id", group=group.group_id,
                         instance_id=instance_id, old=existing, new=new_id)
                return self._update_static_member(req, version, group, existing, new_id, now, waiter)
            return self._add_member(req, group, new_id, now, waiter, client_id, client_host)
        if version >= 4:
            # KIP-394: the member must come back with the id we give it, so that a client that never
            # receives this answer does not leave a member behind.
            group.pending_join.add(new_id)
            self.timers.schedule(("heartbeat", group.group_id, new_id), now + req["session_timeout_ms"])
            res.complete(waiter, _join_error(ErrorCode.MEMBER_ID_REQUIRED, new_id))
            return res
        return self._add_member(req, group, new_id, now, waiter, client_id, client_host)

    def _join_existing_member(self, req: Mapping[str, Any], version: int, group: ClassicGroup, now: int,
                              waiter: Any, client_id: str, client_host: str) -> GroupResult:
        res = GroupResult()
        mid = req["member_id"]
        protocols = _protocols(req)
        if group.state is ClassicState.DEAD:
            res.complete(waiter, _join_error(ErrorCode.COORDINATOR_NOT_AVAILABLE, mid))
            return res
        if not group.supports_protocols(req["protocol_type"], {n for n, _ in protocols}):
            res.complete(waiter, _join_error(ErrorCode.INCONSISTENT_GROUP_PROTOCOL, mid))
            return res
        if mid in group.pending_join:
            return self._add_member(req, group, mid, now, waiter, client_id, client_host)
        try:
            self._validate_member(group, mid, req.get("group_instance_id"))
        except GroupError as e:
            res.complete(waiter, _join_error(e.code, mid))
            return res
        member = group.members[mid]
        if group.state is ClassicState.PREPARING_REBALANCE:
            return self._update_member(req, group, member, now, waiter)
        if group.state is ClassicState.COMPLETING_REBALANCE:
            if member.matches(protocols):
                # Same metadata: the member likely lost its JoinGroup response; give it the current generation.
                res.complete(waiter, self._join_response(group, mid, with_members=group.is_leader(mid)))
                return res
            return self._update_member(req, group, member, now, waiter)
        if group.state is ClassicState.STABLE:
            if group.is_leader(mid) or not member.matches(protocols):
                # A leader's JoinGroup always rebalances (it may have seen topic metadata change).
                return self._update_member(req, group, member, now, waiter)
            res.complete(waiter, self._join_response(group, mid, with_members=False))
            return res
        res.complete(waiter, _join_error(ErrorCode.UNKNOWN_MEMBER_ID, mid))
        return res

    def _join_response(self, group: ClassicGroup, mid: str, *, with_members: bool,
                       skip_assignment: bool = False, leader: str | None = None) -> dict[str, Any]:
        return {"error_code": 0, "member_id": mid, "generation_id": group.generation_id,
                "protocol_type": group.protocol_type, "protocol_name": group.protocol_name,
                "leader": group.leader_id if leader is None else leader, "skip_assignment": skip_assignment,
                "members": group.current_members() if with_members else []}

    def _add_member(self, req: Mapping[str, Any], group: ClassicGroup, mid: str, now: int, waiter: Any,
                    client_id: str, client_host: str) -> GroupResult:
        member = ClassicMember(mid, req.get("group_instance_id"), client_id, client_host, req["rebalance_timeout_ms"],
                               req["session_timeout_ms"], req["protocol_type"], _protocols(req), is_new=True)
        if group.state is ClassicState.PREPARING_REBALANCE and group.previous_state is ClassicState.EMPTY:
            group.new_member_added = True  # the initial rebalance may wait a little longer
        group.add(member, waiter)
        # A parked JoinGroup cannot heartbeat: new members get a long join timeout instead of the session.
        self.timers.schedule(("heartbeat", group.group_id, mid), now + self.config.new_member_join_timeout_ms)
        return self._maybe_prepare_rebalance_or_complete_join(group, now)

    def _update_member(self, req: Mapping[str, Any], group: ClassicGroup, member: ClassicMember, now: int,
                       waiter: Any) -> GroupResult:
        res = GroupResult()
        # A JoinGroup replacing a parked one (the client gave up on it): answer the old one.
        res.complete(group.take_join_waiter(member), _join_error(ErrorCode.REBALANCE_IN_PROGRESS, member.member_id))
        group.update_member(member, _protocols(req), req["rebalance_timeout_ms"], req["session_timeout_ms"], waiter)
        return res.merge(self._maybe_prepare_rebalance_or_complete_join(group, now))

    def _update_static_member(self, req: Mapping[str, Any], version: int, group: ClassicGroup, old_id: str,
                              new_id: str, now: int, waiter: Any) -> GroupResult:
        res = GroupResult()
        instance_id = req["group_instance_id"]
        current_leader = group.leader_id
        member, fenced = group.replace_static_member(instance_id, old_id, new_id)
        for fenced_waiter, _kind, response in fenced:
            res.complete(fenced_waiter, response)
        self.timers.cancel(("heartbeat", group.group_id, old_id))
        self._reschedule_heartbeat(group, member, now)
        old_settings = (member.protocols, member.rebalance_timeout_ms, member.session_timeout_ms)
        group.update_member(member, _protocols(req), req["rebalance_timeout_ms"], req["session_timeout_ms"], waiter)
        if group.state is ClassicState.STABLE:
            if group.protocol_name == group.select_protocol():
                # Nothing changes for the others: persist the new member id, no rebalance.
                res.records.append(classic_records.group_metadata(group, group.assignments()))

                def written(ok: bool) -> GroupResult:
                    out = GroupResult()
                    if not ok:
                        group.update_member(member, *old_settings, None)
                        back, _ = group.replace_static_member(instance_id, new_id, old_id)
                        self.timers.cancel(("heartbeat", group.group_id, new_id))
                        self._reschedule_heartbeat(group, back, now)
                        out.complete(waiter, {**_join_error(ErrorCode.COORDINATOR_NOT_AVAILABLE),
                                              "generation_id": group.generation_id, "leader": current_leader or "",
                                              "protocol_type": group.protocol_type,
                                              "protocol_name": group.protocol_name})
                    elif version >= 9:
                        # KIP-814: a returning static leader learns the members but must not reassign.
                        leader = group.is_leader(new_id)
                        out.complete(group.take_join_waiter(member),
                                     self._join_response(group, new_id, with_members=leader, skip_assignment=leader))
                    else:
                        out.complete(group.take_join_waiter(member),
                                     self._join_response(group, new_id, with_members=False,
                                                         leader=current_leader or ""))
                    return out

                res.after_write.append(written)
                return res
            return res.merge(self._maybe_prepare_rebalance_or_complete_join(group, now))
        if group.state is ClassicState.COMPLETING_REBALANCE:
            # The leader may already be assigning with the old member id: rebalance again.
            return res.merge(self._prepare_rebalance(group, now))
        return res.merge(self._maybe_complete_join_phase(group, now))

    # ------------------------------------------------------------------------------------- rebalancing

    def _maybe_prepare_rebalance_or_complete_join(self, group: ClassicGroup, now: int) -> GroupResult:
        if group.can_rebalance():
            return self._prepare_rebalance(group, now)
        return self._maybe_complete_join_phase(group, now)

    def _prepare_rebalance(self, group: ClassicGroup, now: int) -> GroupResult:
        res = GroupResult()
        gid = group.group_id
        if group.state is ClassicState.COMPLETING_REBALANCE:
            self._reset_and_propagate(group, ErrorCode.REBALANCE_IN_PROGRESS, now, res)
        group.pending_sync.clear()
        self.timers.cancel(("sync", gid))
        initial = group.state is ClassicState.EMPTY
        if initial:
            delay = self.config.initial_rebalance_delay_ms
            self._initial_delay[gid] = (delay, max(group.rebalance_timeout_ms() - delay, 0))
            self.timers.schedule(("join", gid), now + delay)
        group.transition(ClassicState.PREPARING_REBALANCE, now)
        log.info("preparing to rebalance group", group=gid, generation=group.generation_id,
                 members=len(group.members))
        if not initial:
            res.merge(self._maybe_complete_join_else_schedule(group, now))
        return res

    def _maybe_complete_join_else_schedule(self, group: ClassicGroup, now: int) -> GroupResult:
        if group.has_all_members_joined():
            return self._complete_join(group, now)
        self._initial_delay.pop(group.group_id, None)
        self.timers.schedule(("join", group.group_id), now + group.rebalance_timeout_ms())
        return GroupResult()

    def _maybe_complete_join_phase(self, group: ClassicGroup, now: int) -> GroupResult:
        if group.state is not ClassicState.PREPARING_REBALANCE:
            return GroupResult()
        if group.previous_state is ClassicState.EMPTY:
            return GroupResult()  # the initial rebalance completes on its (delay) timer
        if not group.has_all_members_joined():
            return GroupResult()
        return self._complete_join(group, now)

    def _complete_join(self, group: ClassicGroup, now: int) -> GroupResult:
        res = GroupResult()
        gid = group.group_id
        self.timers.cancel(("join", gid))
        self._initial_delay.pop(gid, None)
        for member in [m for m in group.not_yet_rejoined() if m.group_instance_id is None]:
            self._remove(group, member.member_id, res)
        if group.state is ClassicState.DEAD:
            return res
        if not group.maybe_elect_new_joined_leader() and group.members:
            # Only members that did not rejoin (static ones) are left: wait a full rebalance timeout more.
            self.timers.schedule(("join", gid), now + group.rebalance_timeout_ms())
            return res
        group.init_next_generation(now)
        if group.is_empty():
            log.info("group is empty", group=gid, generation=group.generation_id)
            res.records.append(classic_records.group_metadata(group, {}))
            return res
        log.info("group formed a generation", group=gid, generation=group.generation_id,
                 members=len(group.members), protocol=group.protocol_name)
        for member in group.members.values():
            response = self._join_response(group, member.member_id, with_members=group.is_leader(member.member_id))
            res.complete(group.take_join_waiter(member), response)
            self._reschedule_heartbeat(group, member, now)
            member.is_new = False
            group.pending_sync.add(member.member_id)
        self._sync_generation[gid] = group.generation_id
        self.timers.schedule(("sync", gid), now + group.rebalance_timeout_ms())
        return res

    def _reset_and_propagate(self, group: ClassicGroup, error: ErrorCode, now: int, res: GroupResult) -> None:
        for member in group.members.values():
            member.assignment = b""
        self._propagate(group, error, now, res)

    def _propagate(self, group: ClassicGroup, error: ErrorCode, now: int, res: GroupResult) -> None:
        ok = error == ErrorCode.NONE
        for member in group.members.values():
            waiter = group.take_sync_waiter(member)
            if waiter is not None:
                res.complete(waiter, {"error_code": int(error), "assignment": member.assignment,
                                      "protocol_type": group.protocol_type if ok else None,
                                      "protocol_name": group.protocol_name if ok else None})
                # Sessions that lapsed while waiting for the leader start again from now.
                self._reschedule_heartbeat(group, member, now)

    def _reschedule_heartbeat(self, group: ClassicGroup, member: ClassicMember, now: int,
                              timeout_ms: int | None = None) -> None:
        timeout = member.session_timeout_ms if timeout_ms is None else timeout_ms
        self.timers.schedule(("heartbeat", group.group_id, member.member_id), now + timeout)

    def _remove(self, group: ClassicGroup, mid: str, res: GroupResult) -> None:
        """Remove a member, answering whatever it has parked (UNKNOWN_MEMBER_ID lets a live client rejoin)."""
        member = group.members.get(mid)
        if member is not None:
            res.complete(group.take_join_waiter(member), _join_error(ErrorCode.UNKNOWN_MEMBER_ID))
            res.complete(group.take_sync_waiter(member), _sync_error(ErrorCode.UNKNOWN_MEMBER_ID))
        group.remove(mid)
        self.timers.cancel(("heartbeat", group.group_id, mid))

    @staticmethod
    def _validate_member(group: ClassicGroup, mid: str, instance_id: str | None) -> None:
        if instance_id is not None:
            existing = group.static_member_id(instance_id)
            if existing is None:
                raise GroupError(ErrorCode.UNKNOWN_MEMBER_ID)
            if existing != mid:
                log.info("static member fenced", group=group.group_id, instance_id=instance_id, member=mid,
                         current=existing)
                raise GroupError(ErrorCode.FENCED_INSTANCE_ID)
        if mid not in group.members:
            raise GroupError(ErrorCode.UNKNOWN_MEMBER_ID)

    # =========================================================================================== SyncGroup

    def sync(self, req: Mapping[str, Any], now: int, waiter: Any) -> GroupResult:
        res = GroupResult()
        gid, mid = req["group_id"], req["member_id"]
        if not gid:
            res.complete(waiter, _sync_error(ErrorCode.INVALID_GROUP_ID))
            return res
        group = self.groups.get(gid)
        if group is None or group.is_empty():
            res.complete(waiter, _sync_error(ErrorCode.UNKNOWN_MEMBER_ID))
            return res
        try:
            self._validate_sync(group, req)
        except GroupError as e:
            res.complete(waiter, _sync_error(e.code))
            return res
        if group.state is ClassicState.PREPARING_REBALANCE:
            res.complete(waiter, _sync_error(ErrorCode.REBALANCE_IN_PROGRESS))
            return res
        member = group.members[mid]
        if group.state is ClassicState.COMPLETING_REBALANCE:
            res.complete(group.take_sync_waiter(member), _sync_error(ErrorCode.REBALANCE_IN_PROGRESS))
            member.sync_waiter = waiter
            self._remove_pending_sync(group, mid)
            if group.is_leader(mid):
                assignment = {a["member_id"]: bytes(a["assignment"]) for a in req["assignments"]}
                for other in group.members:
                    assignment.setdefault(other, b"")
                generation = req["generation_id"]
                res.records.append(classic_records.group_metadata(group, assignment))

                def written(ok: bool) -> GroupResult:
                    out = GroupResult()
                    # The group may have moved on while the record was being written.
                    if group.state is ClassicState.COMPLETING_REBALANCE and group.generation_id == generation \
                            and self.groups.get(gid) is group:
                        if ok:
                            for m in group.members.values():
                                m.assignment = assignment.get(m.member_id, b"")
                            self._propagate(group, ErrorCode.NONE, now, out)
                            group.transition(ClassicState.STABLE, now)
                        else:
                            self._reset_and_propagate(group, ErrorCode.COORDINATOR_NOT_AVAILABLE, now, out)
                            out.merge(self._maybe_prepare_rebalance_or_complete_join(group, now))
                    return out

                res.after_write.append(written)
            return res
        # Stable: the assignment is known.
        self._remove_pending_sync(group, mid)
        res.complete(waiter, {"error_code": 0, "assignment": member.assignment,
                              "protocol_type": group.protocol_type, "protocol_name": group.protocol_name})
        return res

    def _validate_sync(self, group: ClassicGroup, req: Mapping[str, Any]) -> None:
        if group.state is ClassicState.DEAD:
            raise GroupError(ErrorCode.COORDINATOR_NOT_AVAILABLE)
        self._validate_member(group, req["member_id"], req.get("group_instance_id"))
        if req["generation_id"] != group.generation_id:
            raise GroupError(ErrorCode.ILLEGAL_GENERATION)
        for asked, actual in ((req.get("protocol_type"), group.protocol_type),
                              (req.get("protocol_name"), group.protocol_name)):
            if asked is not None and actual is not None and asked != actual:
                raise GroupError(ErrorCode.INCONSISTENT_GROUP_PROTOCOL)

    def _remove_pending_sync(self, group: ClassicGroup, mid: str) -> None:
        group.pending_sync.discard(mid)
        if group.state in (ClassicState.DEAD, ClassicState.EMPTY, ClassicState.PREPARING_REBALANCE) \
                or not group.pending_sync:
            self.timers.cancel(("sync", group.group_id))

    # =========================================================================================== Heartbeat

    def heartbeat(self, req: Mapping[str, Any], now: int) -> GroupResult:
        gid = req["group_id"]
        if not gid:
            return GroupResult({"error_code": int(ErrorCode.INVALID_GROUP_ID)})
        group = self.groups.get(gid)
        if group is None:
            return GroupResult({"error_code": int(ErrorCode.UNKNOWN_MEMBER_ID)})
        try:
            if group.state is ClassicState.DEAD:
                raise GroupError(ErrorCode.COORDINATOR_NOT_AVAILABLE)
            self._validate_member(group, req["member_id"], req.get("group_instance_id"))
            if req["generation_id"] != group.generation_id:
                raise GroupError(ErrorCode.ILLEGAL_GENERATION)
        except GroupError as e:
            return GroupResult({"error_code": int(e.code)})
        if group.state is ClassicState.EMPTY:
            return GroupResult({"error_code": int(ErrorCode.UNKNOWN_MEMBER_ID)})
        self._reschedule_heartbeat(group, group.members[req["member_id"]], now)
        if group.state is ClassicState.PREPARING_REBALANCE:
            return GroupResult({"error_code": int(ErrorCode.REBALANCE_IN_PROGRESS)})
        return GroupResult({"error_code": 0})

    # ========================================================================================== LeaveGroup

    def leave(self, gid: str, members: Iterable[Mapping[str, Any]], now: int) -> GroupResult:
        """`members`: MemberIdentity values (member_id, group_instance_id, reason). The response has `members`
        (one MemberResponse each) or a top-level `error_code`."""
        members = list(members)
        if not gid:
            return GroupResult({"error_code": int(ErrorCode.INVALID_GROUP_ID), "members": []})
        group = self.groups.get(gid)
        if group is None:
            return GroupResult({"error_code": 0, "members": [
                {"member_id": m["member_id"], "group_instance_id": m.get("group_instance_id"),
                 "error_code": int(ErrorCode.UNKNOWN_MEMBER_ID)} for m in members]})
        if group.state is ClassicState.DEAD:
            return GroupResult({"error_code": int(ErrorCode.COORDINATOR_NOT_AVAILABLE), "members": []})
        res = GroupResult()
        answers, left = [], 0
        for identity in members:
            mid, instance_id = identity["member_id"], identity.get("group_instance_id")
            code = ErrorCode.NONE
            if mid == UNKNOWN_MEMBER_ID:
                # Removal by group instance id (admin tools).
                current = group.static_member_id(instance_id) if instance_id is not None else None
                if current is None:
                    code = ErrorCode.UNKNOWN_MEMBER_ID
                else:
                    self._remove(group, current, res)
            elif mid in group.pending_join:
                group.remove(mid)
                self.timers.cancel(("heartbeat", gid, mid))
            else:
                try:
                    self._validate_member(group, mid, instance_id)
                    self._remove(group, mid, res)
                except GroupError as e:
                    code = e.code
            if code == ErrorCode.NONE:
                left += 1
                log.info("member left group", group=gid, member=mid or instance_id,
                         reason=identity.get("reason") or "not provided")
            answers.append({"member_id": mid, "group_instance_id": instance_id, "error_code": int(code)})
        if left:
            if group.state in (ClassicState.STABLE, ClassicState.COMPLETING_REBALANCE):
                res.merge(self._maybe_prepare_rebalance_or_complete_join(group, now))
            elif group.state is ClassicState.PREPARING_REBALANCE:
                res.merge(self._maybe_complete_join_phase(group, now))
        res.response = {"error_code": 0, "members": answers}
        return res

    # ============================================================================================== timers

    def next_deadline(self) -> int | None:
        return self.timers.next_deadline()

    def tick(self, now: int) -> GroupResult:
        res = GroupResult()
        while (key := self.timers.pop_one_expired(now)) is not None:
            kind = key[0]
            if kind == "heartbeat":
                res.merge(self._expire_heartbeat(key[1], key[2], now))
            elif kind == "join":
                res.merge(self._join_timer(key[1], now))
            elif kind == "sync":
                res.merge(self._expire_sync(key[1], now))
        return res

    def _expire_heartbeat(self, gid: str, mid: str, now: int) -> GroupResult:
        res = GroupResult()
        group = self.groups.get(gid)
        if group is None or group.state is ClassicState.DEAD:
            return res
        if mid in group.pending_join:
            log.info("pending member expired", group=gid, member=mid)
            group.remove(mid)
            if group.state is ClassicState.PREPARING_REBALANCE and group.has_all_members_joined():
                res.merge(self._complete_join(group, now))
            return res
        member = group.members.get(mid)
        if member is None or member.has_satisfied_heartbeat():
            return res
        log.info("member session expired, removing it", group=gid, member=mid)
        self._remove(group, mid, res)
        if group.state in (ClassicState.STABLE, ClassicState.COMPLETING_REBALANCE):
            res.merge(self._maybe_prepare_rebalance_or_complete_join(group, now))
        elif group.state is ClassicState.PREPARING_REBALANCE and group.has_all_members_joined():
            res.merge(self._complete_join(group, now))
        return res

    def _join_timer(self, gid: str, now: int) -> GroupResult:
        group = self.groups.get(gid)
        if group is None:
            return GroupResult()
        delayed = self._initial_delay.pop(gid, None)
        if delayed is not None:
            delay, remaining = delayed
            if group.new_member_added and remaining != 0:
                # Members keep arriving: wait once more, within the rebalance timeout.
                group.new_member_added = False
                new_delay = min(self.config.initial_rebalance_delay_ms, remaining)
                self._initial_delay[gid] = (new_delay, max(remaining - delay, 0))
                self.timers.schedule(("join", gid), now + new_delay)
                return GroupResult()
        return self._complete_join(group, now)

    def _expire_sync(self, gid: str, now: int) -> GroupResult:
        group = self.groups.get(gid)
        generation = self._sync_generation.pop(gid, None)
        if group is None or generation != group.generation_id:
            return GroupResult()
        if group.state not in (ClassicState.COMPLETING_REBALANCE, ClassicState.STABLE) or not group.pending_sync:
            return GroupResult()
        res = GroupResult()
        missing = sorted(group.pending_sync)
        log.info("members did not send SyncGroup in time, removing them", group=gid, members=missing)
        for mid in missing:
            self._remove(group, mid, res)
        return res.merge(self._prepare_rebalance(group, now))

    # ========================================================================================= admin, load

    def validate_offset_commit(self, group: ClassicGroup, mid: str, instance_id: str | None, generation: int,
                               now: int, *, transactional: bool = False) -> None:
        """Kafka's ClassicGroup.validateOffsetCommit; raises GroupError. A valid commit keeps the session alive.
        A transactional commit (TxnOffsetCommit) without member id and generation is accepted whatever the
        group's state (its older versions carry neither), and the group's state is not enforced."""
        if group.state is ClassicState.DEAD:
            raise GroupError(ErrorCode.COORDINATOR_NOT_AVAILABLE)
        if generation < 0 and group.state is ClassicState.EMPTY:
            return  # admin client or a consumer without group management
        if generation >= 0 or mid or instance_id is not None:
            self._validate_member(group, mid, instance_id)
            if generation != group.generation_id:
                raise GroupError(ErrorCode.ILLEGAL_GENERATION)
        elif not transactional and group.state is not ClassicState.EMPTY:
            raise GroupError(ErrorCode.UNKNOWN_MEMBER_ID)
        if transactional:
            return
        if group.state is ClassicState.COMPLETING_REBALANCE:
            raise GroupError(ErrorCode.REBALANCE_IN_PROGRESS)
        if group.state in (ClassicState.STABLE, ClassicState.PREPARING_REBALANCE) and mid in group.members:
            self._reschedule_heartbeat(group, group.members[mid], now)

    def get_or_create_simple(self, gid: str, now: int) -> ClassicGroup:
        """An empty classic group without protocol (Kafka's "simple" group for standalone offset commits)."""
        group = self.groups.get(gid)
        if group is None:
            group = self.groups[gid] = ClassicGroup(gid, now)
        return group

    def delete(self, gid: str) -> None:
        """Forget the group (its tombstone is written by the caller); cancels its timers."""
        group = self.groups.pop(gid, None)
        if group is None:
            return
        self.timers.cancel(("join", gid))
        self.timers.cancel(("sync", gid))
        self._initial_delay.pop(gid, None)
        self._sync_generation.pop(gid, None)
        for mid in list(group.members) + list(group.pending_join):
            self.timers.cancel(("heartbeat", gid, mid))

    def give_up(self, gid: str, res: GroupResult) -> None:
        """The group becomes a consumer group (online upgrade): parked JoinGroup and SyncGroup requests are told
        to rejoin (REBALANCE_IN_PROGRESS), then the group and its timers are forgotten (the caller writes its
        tombstone)."""
        group = self.groups[gid]
        for member in group.members.values():
            res.complete(group.take_join_waiter(member), _join_error(ErrorCode.REBALANCE_IN_PROGRESS, member.member_id))
            res.complete(group.take_sync_waiter(member), _sync_error(ErrorCode.REBALANCE_IN_PROGRESS))
        self.delete(gid)

    def adopt(self, group: ClassicGroup, now: int, *, rebalance: bool = True) -> GroupResult:
        """A consumer group that became this classic group (online downgrade): its members heartbeat from now on
        and, when a member left, a rebalance starts, as in Kafka (their clients rejoin and the leader assigns)."""
        self.groups[group.group_id] = group
        for member in group.members.values():
            self._reschedule_heartbeat(group, member, now)
        return self._prepare_rebalance(group, now) if rebalance else GroupResult()

    def describe(self, gid: str) -> dict[str, Any] | None:
        """A DescribeGroups entry, or None if there is no classic group with this id."""
        group = self.groups.get(gid)
        if group is None:
            return None
        stable = group.state is ClassicState.STABLE
        members = [{"member_id": m.member_id, "group_instance_id": m.group_instance_id, "client_id": m.client_id,
                    "client_host": m.client_host, "member_metadata": m.metadata(group.protocol_name) if stable else b"",
                    "member_assignment": m.assignment} for m in group.members.values()]
        return {"error_code": 0, "group_id": gid, "group_state": group.state.value,
                "protocol_type": group.protocol_type or "",
                "protocol_data": (group.protocol_name or "") if stable else "", "members": members}

    def replay(self, key: bytes | memoryview, value: bytes | memoryview | None, now: int) -> None:
        gid = classic_records.key_group(key)
        if value is None:
            self.delete(gid)
        else:
            self.delete(gid)
            self.groups[gid] = classic_records.load(gid, value, now)

    def loaded(self, now: int) -> GroupResult:
        """After replay: members must heartbeat within their session; an over-capacity group rebalances."""
        res = GroupResult()
        for group in self.groups.values():
            for member in group.members.values():
                self._reschedule_heartbeat(group, member, now)
            if len(group.members) > self.config.max_size and group.can_rebalance():
                res.merge(self._prepare_rebalance(group, now))
        return res
