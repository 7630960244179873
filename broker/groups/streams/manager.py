"""StreamsGroupHeartbeat and StreamsGroupDescribe: the streams group state machine (KIP-1071), sans-IO.

Kafka's GroupMetadataManager.streamsGroupHeartbeat, step by step: the member is created or updated (a change of
its metadata bumps the group epoch), the first member's topology becomes the group's, the topology is configured
against the broker's topics (missing source topics, internal topics to create, copartitioning: the answer's
status), a group epoch past the target assignment's epoch computes a new target assignment (unless the initial
rebalance delay or the assignment interval holds it back), and the member moves towards its target by the
reconciliation. Everything a heartbeat decides is read from the group as it was before the heartbeat; its records
are applied at the end through the replay (`records.apply`), so nothing changes when it is refused.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

import structlog

from broker.groups.records import Record
from broker.groups.result import GroupError, GroupResult
from broker.groups.streams import records as rec
from broker.groups.streams.assignor import ASSIGNOR_NAME, MemberSpec, assign
from broker.groups.streams.group import (
    EMPTY_TASKS,
    LEAVE_GROUP_MEMBER_EPOCH,
    LEAVE_GROUP_STATIC_MEMBER_EPOCH,
    AssignedTasks,
    Endpoint,
    MemberState,
    StreamsGroup,
    StreamsGroupState,
    StreamsMember,
    Tasks,
    TasksTuple,
)
from broker.groups.streams.reconcile import Reconciler, owned_from_request
from broker.groups.streams.topology import (
    ASSIGNMENT_DELAYED,
    MISSING_CLIENT_TAGS,
    SHUTDOWN_APPLICATION,
    STALE_TOPOLOGY,
    ConfiguredTopology,
    InternalTopic,
    StreamsTopology,
    TopologyInvalid,
    configure,
    invalid_topology_reason,
)
from broker.groups.timers import Timers
from protocol.errors import ErrorCode
from protocol.java_hash import java_hash_order

log = structlog.get_logger(__name__)


@dataclass(frozen=True)
class StreamsSettings:
    """A streams group's effective settings (its group configs over the broker's)."""

    session_timeout_ms: int = 45_000
    heartbeat_interval_ms: int = 5_000
    initial_rebalance_delay_ms: int = 3_000
    assignment_interval_ms: int = 1_000
    num_standby_replicas: int = 0
    rack_aware_assignment_tags: tuple[str, ...] = ()
    task_offset_interval_ms: int = 60_000
    acceptable_recovery_lag: int = 10_000
    max_size: int = 2**31 - 1


@dataclass
class StreamsResult(GroupResult):
    """A heartbeat's result: internal topics to create once its records are durable, too."""

    internal_topics: list[InternalTopic] = field(default_factory=list)


def error_response(code: ErrorCode, message: str | None = None) -> dict[str, Any]:
    return {"error_code": int(code), "error_message": message, "member_id": "", "member_epoch": 0,
            "heartbeat_interval_ms": 0, "status": []}


def _task_list(tasks: Tasks) -> list[dict[str, Any]]:
    return [{"subtopology_id": s, "partitions": sorted(tasks[s])} for s in java_hash_order(tasks) if tasks[s]]


def validate_request(req: Mapping[str, Any]) -> None:
    """Kafka's request checks before the coordinator sees a heartbeat (GroupCoordinatorService)."""
    topology = req.get("topology")
    if topology is not None:
        for s in topology["subtopologies"]:
            if s.get("source_topic_regex"):
                raise GroupError(ErrorCode.INVALID_REQUEST, "Regular expressions for source topics are not "
                                 "supported yet.")

    def empty(value: str | None) -> bool:
        return value is not None and not value.strip()

    for name, text in (("MemberId", req["member_id"]), ("GroupId", req["group_id"]),
                       ("InstanceId", req.get("instance_id")), ("RackId", req.get("rack_id"))):
        if empty(text):
            raise GroupError(ErrorCode.INVALID_REQUEST, f"{name} can't be empty.")
    epoch = req["member_epoch"]
    if epoch == 0:
        if req.get("rebalance_timeout_ms", -1) == -1:
            raise GroupError(ErrorCode.INVALID_REQUEST, "RebalanceTimeoutMs must be provided in first request.")
        for field_name, label in (("active_tasks", "ActiveTasks"), ("standby_tasks", "StandbyTasks"),
                                  ("warmup_tasks", "WarmupTasks")):
            if req.get(field_name):
                raise GroupError(ErrorCode.INVALID_REQUEST, f"{label} must be empty when (re-)joining.")
        if topology is None:
            raise GroupError(ErrorCode.INVALID_REQUEST, "Topology must be non-null when (re-)joining.")
        reason = invalid_topology_reason(topology)
        if reason is not None:
            raise GroupError(ErrorCode.STREAMS_INVALID_TOPOLOGY, reason)
    elif epoch == LEAVE_GROUP_STATIC_MEMBER_EPOCH:
        if req.get("instance_id") is None:
            raise GroupError(ErrorCode.INVALID_REQUEST, "InstanceId can't be null.")
    elif epoch < LEAVE_GROUP_STATIC_MEMBER_EPOCH:
        raise GroupError(ErrorCode.INVALID_REQUEST,
                         f"MemberEpoch is {epoch}, but must be greater than or equal to -2.")
    kinds = [req.get("active_tasks"), req.get("standby_tasks"), req.get("warmup_tasks")]
    if any(k is not None for k in kinds) and any(k is None for k in kinds):
        raise GroupError(ErrorCode.INVALID_REQUEST, "If one task-type is non-null, all must be non-null.")
    if epoch != 0 and topology is not None:
        raise GroupError(ErrorCode.INVALID_REQUEST, "Topology can only be provided when (re-)joining.")


def _epoch_relevant(old: StreamsMember, new: StreamsMember) -> bool:
    """Kafka's hasEpochRelevantMemberConfigChanged: what a static member may change without a new assignment."""
    return (old.topology_epoch, old.rack_id, old.client_tags, old.process_id) != \
        (new.topology_epoch, new.rack_id, new.client_tags, new.process_id)


TaskOffsets = dict[tuple[str, int], int]  # (subtopology id, partition) -> offset


def _task_offsets(items: list[Any] | None, last: TaskOffsets) -> TaskOffsets:
    """A heartbeat's TaskOffsets (or TaskEndOffsets): the list sent, or the last one when it sent none."""
    if items is None:
        return last
    out: TaskOffsets = {}
    for o in items:
        key = (o["subtopology_id"], o["partition"])
        if key in out:
            raise GroupError(ErrorCode.INVALID_REQUEST, f"Task offsets contain a duplicate entry for subtopology "
                             f"{key[0]} and partition {key[1]}.")
        out[key] = o["offset"]
    return out


def _owned_within(owned: list[Any] | None, assigned: Mapping[str, Any]) -> bool:
    if owned is None:
        return True
    for t in owned:
        have = assigned.get(t["subtopology_id"], ())
        if any(p not in have for p in t["partitions"]):
            return False
    return True


class StreamsGroupManager:
    def __init__(self, *, settings: Callable[[str], StreamsSettings],
                 partition_count: Callable[[str], int | None], topics_version: Callable[[], int],
                 group_type_of: Callable[[str], str | None], empty_classic: Callable[[str], bool]) -> None:
        """`settings(group_id)` the group's settings, read on each use; `partition_count(topic)` a topic's
        partitions (None: no such topic); `topics_version()` moves on whenever topics change (the groups'
        topologies are configured again); `group_type_of(group_id)` any group's type; `empty_classic(group_id)`
        whether a classic group has no members (a joining streams member replaces it, as in Kafka: the
        group coordinator then deletes it)."""
        self._empty_classic = empty_classic
        self._settings = settings
        self._partition_count = partition_count
        self._topics_version = topics_version
        self._group_type_of = group_type_of
        self.groups: dict[str, StreamsGroup] = {}
        self.timers: Timers[tuple[Any, ...]] = Timers()
        # soft: the task offsets and task end offsets each member last reported (Kafka's MemberTaskOffsets)
        self.task_offsets: dict[tuple[str, str], tuple[TaskOffsets, TaskOffsets]] = {}

    # ----------------------------------------------------------------------------------------------- replay
    def replay(self, key: bytes | memoryview, value: bytes | memoryview | None) -> None:
        rec.apply(self.groups, key, value)

    def _apply(self, res: GroupResult, records: Iterable[Record]) -> None:
        for r in records:
            rec.apply(self.groups, r.key, r.value)
            res.records.append(r)

    def loaded(self, now_ms: int) -> None:
        """Sessions of the members found in the log start now."""
        for gid, g in self.groups.items():
            for mid in g.members:
                self.timers.schedule(("session", gid, mid), now_ms + self._settings(gid).session_timeout_ms)

    def next_deadline(self) -> int | None:
        return self.timers.next_deadline()

    def delete(self, gid: str, res: GroupResult) -> None:
        group = self.groups.get(gid)
        if group is None:
            return
        self._apply(res, rec.group_tombstones(group))
        self.groups.pop(gid, None)
        self._cancel_group_timers(gid)
        for mid in group.members:
            self.task_offsets.pop((gid, mid), None)

    def _cancel_group_timers(self, gid: str) -> None:
        self.timers.cancel(("initial", gid))

    # ------------------------------------------------------------------------------------------------ tick
    def tick(self, now: int) -> GroupResult:
        res = GroupResult()
        while (expired := self.timers.pop_one_expired(now)) is not None:
            key = expired
            kind, gid = key[0], key[1]
            group = self.groups.get(gid)
            if group is None:
                continue
            if kind == "initial":
                self._delayed_assignment(group, now, res)
            elif kind in ("session", "rebalance"):
                mid = key[2]
                member = group.members.get(mid)
                if member is None:
                    continue
                if kind == "rebalance" and (member.state is not MemberState.UNREVOKED_TASKS
                                            or member.member_epoch != key[3]):
                    continue
                reason = "the member session expired" if kind == "session" else \
                    "the member failed to revoke its tasks within the rebalance timeout"
                log.info("streams member fenced", group=gid, member=mid, reason=reason)
                self._fence(group, member, res)
        return res

    def _delayed_assignment(self, group: StreamsGroup, now: int, res: GroupResult) -> None:
        if not group.members or group.group_epoch <= group.assignment_epoch:
            return
        configured = self._configured(group, group.topology, now) if group.topology is not None else None
        if configured is None:
            return
        records: list[Record] = []
        self._compute_target(group, group.group_epoch, None, configured, records, now,
                             group.last_assignment_configs)
        self._apply(res, records)

    # --------------------------------------------------------------------------------------------- heartbeat
    def heartbeat(self, req: Mapping[str, Any], version: int, now: int, *, client_id: str = "",
                  client_host: str = "") -> StreamsResult:
        res = StreamsResult()
        try:
            validate_request(req)
            if req["member_epoch"] in (LEAVE_GROUP_MEMBER_EPOCH, LEAVE_GROUP_STATIC_MEMBER_EPOCH):
                self._leave(req, res)
            else:
                self._heartbeat(req, version, now, client_id, client_host, res)
        except GroupError as e:
            res.records.clear()
            res.internal_topics.clear()
            res.response = error_response(e.code, e.message)
        return res

    def _group_for(self, gid: str, joining: bool) -> StreamsGroup | None:
        """The streams group (None: a new one is to be created), or GroupError."""
        kind = self._group_type_of(gid)
        if kind == "streams":
            return self.groups[gid]
        if kind is None:
            if joining:
                return None
            raise GroupError(ErrorCode.GROUP_ID_NOT_FOUND, f"Streams group {gid} not found.")
        if kind == "classic" and joining and self._empty_classic(gid):
            return None  # the empty classic group gives way (the caller writes its tombstone)
        raise GroupError(ErrorCode.GROUP_ID_NOT_FOUND, f"Group {gid} is not a streams group.")

    def _leave(self, req: Mapping[str, Any], res: StreamsResult) -> None:
        gid, mid, epoch = req["group_id"], req["member_id"], req["member_epoch"]
        kind = self._group_type_of(gid)
        if kind is None:
            raise GroupError(ErrorCode.GROUP_ID_NOT_FOUND, f"Group {gid} not found.")
        if kind != "streams":
            raise GroupError(ErrorCode.GROUP_ID_NOT_FOUND, f"Group {gid} is not a streams group.")
        group = self.groups[gid]
        if req.get("shutdown_application") and group.shutdown_request_member_id is None:
            group.shutdown_request_member_id = mid
        instance_id = req.get("instance_id")
        if instance_id is None:
            member = group.members.get(mid)
            if member is None:
                raise GroupError(ErrorCode.UNKNOWN_MEMBER_ID, f"Member {mid} is not a member of group {gid}.")
        else:
            member = group.static_member(instance_id)
            if member is None:
                raise GroupError(ErrorCode.UNKNOWN_MEMBER_ID, f"Instance id {instance_id} is unknown.")
            if member.member_id != mid:
                raise GroupError(ErrorCode.FENCED_INSTANCE_ID, f"Static member {mid} with instance id "
                                 f"{instance_id} was fenced by member {member.member_id}.")
            if epoch == LEAVE_GROUP_STATIC_MEMBER_EPOCH:
                # The static member will come back: it keeps its place and its tasks.
                leaving = replace(member, member_epoch=LEAVE_GROUP_STATIC_MEMBER_EPOCH,
                                  pending_revocation=AssignedTasks(),
                                  assigned=replace(member.assigned, active={
                                      s: dict.fromkeys(ps, 0) for s, ps in member.assigned.active.items()}))
                self._apply(res, [rec.current_assignment(gid, leaving)])
                res.response = {"error_code": 0, "error_message": None, "member_id": mid,
                                "member_epoch": LEAVE_GROUP_STATIC_MEMBER_EPOCH, "heartbeat_interval_ms": 0,
                                "status": []}
                return
        log.info("streams member left", group=gid, member=mid)
        self._fence(group, member, res)
        res.response = {"error_code": 0, "error_message": None, "member_id": mid, "member_epoch": epoch,
                        "heartbeat_interval_ms": 0, "status": []}

    def _fence(self, group: StreamsGroup, member: StreamsMember, res: GroupResult) -> None:
        """Kafka's streamsGroupFenceMember: the member's records go and the group epoch is bumped."""
        gid = group.group_id
        records = rec.member_tombstones(gid, member.member_id)
        epoch = group.group_epoch + 1
        records.append(rec.group_metadata(group, epoch, group.metadata_hash, group.validated_topology_epoch,
                                          group.last_assignment_configs))
        if len(group.members) == 1:
            records.append(rec.target_assignment_metadata(gid, epoch, 0))
        self._apply(res, records)
        for key in (("session", gid, member.member_id),):
            self.timers.cancel(key)
        self.task_offsets.pop((gid, member.member_id), None)

    def _configured(self, group: StreamsGroup, topology: StreamsTopology | None, now: int
                    ) -> ConfiguredTopology | None:
        if topology is None:
            return None
        return configure(topology, self._partition_count)

    def _heartbeat(self, req: Mapping[str, Any], version: int, now: int, client_id: str, client_host: str,
                   res: StreamsResult) -> None:
        gid, mid, epoch = req["group_id"], req["member_id"], req["member_epoch"]
        joining = epoch == 0
        found = self._group_for(gid, joining)
        records: list[Record] = []
        status: list[dict[str, Any]] = []
        settings = self._settings(gid)
        new_group = found is None
        group = StreamsGroup(gid) if found is None else found
        instance_id = req.get("instance_id")
        if joining and group.static_member(instance_id) is None and mid not in group.members \
                and len(group.members) >= settings.max_size:
            raise GroupError(ErrorCode.GROUP_MAX_SIZE_REACHED,
                             f"The streams group has reached its maximum capacity of {settings.max_size} members.")
        replaced: StreamsMember | None = None
        if instance_id is None:
            found_member = group.members.get(mid)
            if found_member is None:
                if not joining:
                    raise GroupError(ErrorCode.UNKNOWN_MEMBER_ID, f"Member {mid} is not a member of group {gid}.")
                found_member = StreamsMember(mid)
            member = found_member
            if epoch != 0:
                self._check_epoch(member, epoch, req)
        else:
            member, replaced = self._static_member(group, mid, epoch, instance_id, joining, req, records)
        topology_req = req.get("topology")
        endpoint_req = req.get("user_endpoint")
        endpoint = None if endpoint_req is None else Endpoint(endpoint_req["host"], endpoint_req["port"])
        tags = req.get("client_tags")
        updated = replace(
            member,
            instance_id=req.get("instance_id") if req.get("instance_id") is not None else member.instance_id,
            rack_id=req.get("rack_id") if req.get("rack_id") is not None else member.rack_id,
            rebalance_timeout_ms=req["rebalance_timeout_ms"] if req.get("rebalance_timeout_ms", -1) != -1
            else member.rebalance_timeout_ms,
            topology_epoch=topology_req["epoch"] if topology_req is not None else member.topology_epoch,
            client_id=client_id, client_host=client_host,
            process_id=req["process_id"] if req.get("process_id") is not None else member.process_id,
            client_tags=tuple(sorted((t["key"], t["value"]) for t in tags)) if tags is not None
            else member.client_tags,
            user_endpoint=endpoint if joining or endpoint is not None else member.user_endpoint)
        recompute = False
        if updated != member or (instance_id is None and mid not in group.members):
            records.append(rec.member_metadata(gid, updated))
            # A static member's change re-plans the group only if it matters to the assignment.
            recompute = instance_id is None or _epoch_relevant(member, updated)
        # The topology: the first member's is the group's; a later one must be the same.
        topology = group.topology
        if topology_req is not None:
            sent = StreamsTopology.from_wire(topology_req)
            if topology is None:
                records.append(rec.topology(gid, sent))
                topology = sent
            elif topology.epoch > sent.epoch:
                pass  # a member with a stale topology: told by STALE_TOPOLOGY
            elif topology != sent:
                raise GroupError(ErrorCode.INVALID_REQUEST, "Topology updates are not supported yet.")
        if group.topology is not None and updated.topology_epoch < group.topology.epoch:
            status.append({"status_code": STALE_TOPOLOGY, "status_detail": f"The member's topology epoch "
                           f"{updated.topology_epoch} is behind the group's topology epoch {group.topology.epoch}."})
        assert topology is not None
        # Configure the topology when it is new or the topics changed since.
        metadata_hash = group.metadata_hash
        version_now = self._topics_version()
        configured = group.configured
        if group.topology is None or configured is None or group.configured_for != (version_now, topology.epoch):
            new_hash = self._metadata_hash(topology)
            reconfigure = group.topology is None or configured is None
            if new_hash != group.metadata_hash:
                metadata_hash = new_hash
                recompute = True
                reconfigure = True
            try:
                if reconfigure or configured is None:
                    configured = configure(topology, self._partition_count)
            except TopologyInvalid as e:
                raise GroupError(ErrorCode.STREAMS_INVALID_TOPOLOGY, str(e)) from None
            group.configured, group.configured_for = configured, (version_now, topology.epoch)
        assert configured is not None
        validated = -1
        if configured.ready:
            validated = topology.epoch
            assert configured.subtopologies is not None
            for tasks in (req.get("active_tasks"), req.get("standby_tasks"), req.get("warmup_tasks")):
                for t in tasks or ():
                    sub = configured.subtopologies.get(t["subtopology_id"])
                    if sub is None:
                        raise GroupError(ErrorCode.INVALID_REQUEST,
                                         f"Subtopology {t['subtopology_id']} does not exist in the topology.")
                    for p in t["partitions"]:
                        if p < 0 or p >= sub.number_of_tasks:
                            raise GroupError(ErrorCode.INVALID_REQUEST, f"Task {p} for subtopology "
                                             f"{t['subtopology_id']} is invalid. Number of tasks for this "
                                             f"subtopology: {sub.number_of_tasks}")
        if req.get("task_offsets") is not None or req.get("task_end_offsets") is not None:
            # A list sent replaces the member's last one (Kafka's MemberTaskOffsets.update); the assignor below
            # ranks standby candidates by them. Kafka keeps them on the group object, which the heartbeat creating
            # the group replaces when its records are replayed: those of that first heartbeat are dropped.
            offsets, ends = self.task_offsets.get((gid, mid), ({}, {}))
            reported = (_task_offsets(req.get("task_offsets"), offsets),
                        _task_offsets(req.get("task_end_offsets"), ends))
            if not new_group:
                self.task_offsets[(gid, mid)] = reported
        if validated != group.validated_topology_epoch:
            recompute = True
        configs = {"num.standby.replicas": str(settings.num_standby_replicas)}
        if settings.rack_aware_assignment_tags:
            configs["rack.aware.assignment.tags"] = ",".join(settings.rack_aware_assignment_tags)
        if not recompute and configs != group.last_assignment_configs:
            recompute = True
        group_epoch = group.group_epoch
        if recompute:
            group_epoch += 1
            records.append(rec.group_metadata(group, group_epoch, metadata_hash, validated, configs))
        if not group.members and settings.initial_rebalance_delay_ms > 0 and ("initial", gid) not in self.timers:
            self.timers.schedule(("initial", gid), now + settings.initial_rebalance_delay_ms)
        # The target assignment.
        previous_id = replaced.member_id if replaced is not None else mid
        target_epoch, target = group.assignment_epoch, group.target.get(previous_id, EMPTY_TASKS)
        if ("initial", gid) in self.timers:
            status.append({"status_code": ASSIGNMENT_DELAYED, "status_detail": "Assignment delayed due to the "
                           "configured initial rebalance delay."})
            target = EMPTY_TASKS
        elif group.assignment_epoch < group_epoch:
            interval = settings.assignment_interval_ms
            if group.assignment_timestamp != 0 and interval != 0 and now < group.assignment_timestamp + interval:
                status.append({"status_code": ASSIGNMENT_DELAYED, "status_detail": "Assignment delayed due to "
                               "the configured assignment interval."})
            else:
                targets = self._compute_target(group, group_epoch, updated, configured, records, now, configs,
                                               replaced=previous_id)
                target_epoch, target = group_epoch, targets.get(mid, EMPTY_TASKS)
        # Reconcile the member's assignment.
        reconciled = updated
        if not updated.is_reconciled_to(target_epoch):
            owned = owned_from_request(req.get("active_tasks"), req.get("standby_tasks"), req.get("warmup_tasks"))
            reconciled = Reconciler(
                updated, target_epoch, target,
                active_owner=lambda s, p: group.active_owner.get((s, p)),
                standby_owners=lambda s, p: group.standby_owners.get((s, p), set()),
                warmup_owners=lambda s, p: group.warmup_owners.get((s, p), set()),
                owned=owned).build()
            if reconciled != updated:
                records.append(rec.current_assignment(gid, reconciled))
                if reconciled.state is MemberState.UNREVOKED_TASKS:
                    self.timers.schedule(("rebalance", gid, mid, reconciled.member_epoch),
                                         now + reconciled.rebalance_timeout_ms)
        # Apply: from here on the group is what the records say.
        if new_group:
            self.groups[gid] = group
        self._apply(res, records)
        group = self.groups[gid]
        if group.configured is None:
            group.configured, group.configured_for = configured, (version_now, topology.epoch)
        self.timers.schedule(("session", gid, mid), now + settings.session_timeout_ms)
        if req.get("shutdown_application") and group.shutdown_request_member_id is None:
            group.shutdown_request_member_id = mid
        response: dict[str, Any] = {
            "error_code": 0, "error_message": None, "member_id": reconciled.member_id,
            "member_epoch": reconciled.member_epoch, "heartbeat_interval_ms": settings.heartbeat_interval_ms,
            "task_offset_interval_ms": settings.task_offset_interval_ms,
            "acceptable_recovery_lag": settings.acceptable_recovery_lag,
            # v0's AcceptableRecoveryLagLegacy stays 0: Kafka 4.4 sets only the v1 field.
            "acceptable_recovery_lag_legacy": 0,
            "active_tasks": None, "standby_tasks": None, "warmup_tasks": None,
            "topology_description_required": False, "partitions_by_user_endpoint": None,
            "endpoint_information_epoch": 0}
        changed = reconciled.assigned != member.assigned
        if joining or changed:
            response["active_tasks"] = _task_list(reconciled.assigned.active_sets())
            response["standby_tasks"] = _task_list(reconciled.assigned.standby)
            response["warmup_tasks"] = _task_list(reconciled.assigned.warmup)
        endpoint_changed = (member.user_endpoint != reconciled.user_endpoint) if mid in group.members \
            and not new_group else reconciled.user_endpoint is not None
        endpoint_epoch = group.endpoint_information_epoch
        if endpoint_changed or (changed and reconciled.user_endpoint is not None):
            endpoint_epoch += 1
        if not new_group:
            # Kafka bumps the epoch on a new group's object that its replay then replaces: a group's first
            # heartbeat answers 0 and leaves the epoch at 0.
            group.endpoint_information_epoch = endpoint_epoch
        if endpoint_epoch != req.get("endpoint_information_epoch", 0):
            response["partitions_by_user_endpoint"] = self._endpoints(group, reconciled)
        response["endpoint_information_epoch"] = group.endpoint_information_epoch
        if configured.error is not None:
            res.internal_topics.extend(configured.to_create)
            status.append({"status_code": configured.error.status, "status_detail": configured.error.message})
        if group.shutdown_request_member_id is not None:
            status.append({"status_code": SHUTDOWN_APPLICATION, "status_detail": f"Streams group member "
                           f"{group.shutdown_request_member_id} encountered a fatal error and requested a shutdown "
                           "for the entire application."})
        tags_required = configs.get("rack.aware.assignment.tags", "").strip()
        if version >= 1 and tags_required:
            have = {k for k, _ in reconciled.client_tags}
            missing = [t.strip() for t in tags_required.split(",") if t.strip() not in have]
            if missing:
                status.append({"status_code": MISSING_CLIENT_TAGS, "status_detail": "Missing required client tags "
                               f"for rack-aware standby assignment: [{', '.join(missing)}]. Configure them via "
                               "'client.tag.<tagKey>' in your Streams config."})
        response["status"] = status
        res.response = response

    def _static_member(self, group: StreamsGroup, mid: str, epoch: int, instance_id: str, joining: bool,
                       req: Mapping[str, Any], records: list[Record]) -> tuple[StreamsMember, StreamsMember | None]:
        """Kafka's getOrMaybeCreateStaticStreamsGroupMember: (the member, the member it replaces or None). A static
        member rejoining after its temporary leave (epoch -2) takes over its place under its new member id."""
        gid = group.group_id
        existing = group.static_member(instance_id)
        if joining:
            if existing is None:
                return group.members.get(mid) or StreamsMember(mid), None
            if existing.member_epoch != LEAVE_GROUP_STATIC_MEMBER_EPOCH:
                raise GroupError(ErrorCode.UNRELEASED_INSTANCE_ID, f"Static member {mid} with instance id "
                                 f"{instance_id} cannot join the group because the instance id is owned by "
                                 f"{existing.member_id} member.")
            member = replace(existing, member_id=mid, member_epoch=0, previous_member_epoch=0)
            records.extend(rec.member_tombstones(gid, existing.member_id))
            records.append(rec.member_metadata(gid, member))
            records.append(rec.target_assignment(gid, mid, group.target.get(existing.member_id, EMPTY_TASKS)))
            records.append(rec.current_assignment(gid, member))
            self.timers.cancel(("session", gid, existing.member_id))
            self.task_offsets.pop((gid, existing.member_id), None)  # Kafka drops them with the old member
            log.info("static streams member rejoined", group=gid, member=mid, instance_id=instance_id,
                     replaced=existing.member_id)
            return member, existing
        if existing is None:
            raise GroupError(ErrorCode.UNKNOWN_MEMBER_ID, f"Instance id {instance_id} is unknown.")
        if existing.member_id != mid:
            raise GroupError(ErrorCode.FENCED_INSTANCE_ID, f"Static member {mid} with instance id {instance_id} "
                             f"was fenced by member {existing.member_id}.")
        self._check_epoch(existing, epoch, req)
        return existing, None

    def _check_epoch(self, member: StreamsMember, epoch: int, req: Mapping[str, Any]) -> None:
        if epoch > member.member_epoch:
            raise GroupError(ErrorCode.FENCED_MEMBER_EPOCH, f"The streams group member has a greater member epoch "
                             f"({epoch}) than the one known by the group coordinator ({member.member_epoch}). The "
                             "member must abandon all its partitions and rejoin.")
        if epoch < member.member_epoch and (
                epoch != member.previous_member_epoch
                or not _owned_within(req.get("active_tasks"), member.assigned.active)
                or not _owned_within(req.get("standby_tasks"), member.assigned.standby)
                or not _owned_within(req.get("warmup_tasks"), member.assigned.warmup)):
            raise GroupError(ErrorCode.FENCED_MEMBER_EPOCH, f"The streams group member has a smaller member epoch "
                             f"({epoch}) than the one known by the group coordinator ({member.member_epoch}). The "
                             "member must abandon all its partitions and rejoin.")

    def _metadata_hash(self, topology: StreamsTopology) -> int:
        """A hash of the required topics that exist and their partition counts (a change re-plans the group)."""
        items = sorted((t, n) for t in topology.required_topics() if (n := self._partition_count(t)) is not None)
        if not items:
            return 0
        digest = hashlib.blake2b(repr(items).encode(), digest_size=8).digest()
        return int.from_bytes(digest, "big", signed=True)

    def _compute_target(self, group: StreamsGroup, epoch: int, updated: StreamsMember | None,
                        configured: ConfiguredTopology, records: list[Record], now: int,
                        configs: Mapping[str, str], replaced: str | None = None) -> dict[str, TasksTuple]:
        """`replaced`: the member id `updated` takes over (a static member rejoining under a new id), whose
        target assignment is its previous one."""
        members = dict(group.members)
        previous = dict(group.target)
        if updated is not None:
            if replaced is not None and replaced != updated.member_id:
                members.pop(replaced, None)
                previous[updated.member_id] = previous.pop(replaced, EMPTY_TASKS)
            members[updated.member_id] = updated
        if configured.ready and configured.subtopologies:
            specs = [MemberSpec(mid, m.process_id,
                                TasksTuple(m.assigned.active_sets(), m.assigned.standby, m.assigned.warmup),
                                self.task_offsets.get((group.group_id, mid), ({}, {}))[0])
                     for mid, m in members.items()]
            targets = assign(specs, configured.subtopologies, int(configs.get("num.standby.replicas", "0")))
        else:
            targets = dict.fromkeys(members, EMPTY_TASKS)
        for mid in members:
            new = targets.get(mid, EMPTY_TASKS)
            if previous.get(mid) != new:
                records.append(rec.target_assignment(group.group_id, mid, new))
        records.append(rec.target_assignment_metadata(group.group_id, epoch, now))
        log.info("streams target assignment computed", group=group.group_id, epoch=epoch, assignor=ASSIGNOR_NAME)
        return targets

    def _endpoints(self, group: StreamsGroup, updated: StreamsMember) -> list[dict[str, Any]]:
        """PartitionsByUserEndpoint: one entry per member with an endpoint, the heartbeating member last."""
        out = []
        for mid, m in group.members.items():
            if mid != updated.member_id:
                entry = self._endpoint_entry(group, m)
                if entry is not None:
                    out.append(entry)
        entry = self._endpoint_entry(group, updated)
        if entry is not None:
            out.append(entry)
        return out

    def _endpoint_entry(self, group: StreamsGroup, m: StreamsMember) -> dict[str, Any] | None:
        if m.user_endpoint is None:
            return None
        subs = group.configured.subtopologies if group.configured is not None else None

        def partitions(tasks: Tasks) -> list[dict[str, Any]]:
            out = []
            for sid, parts in tasks.items():
                sub = (subs or {}).get(sid)
                if sub is None:
                    continue
                for topic in (*sub.source_topics, *sub.repartition_source_topics):
                    n = self._partition_count(topic) or 0
                    ps = sorted(p for p in parts if p < n)
                    if ps:
                        out.append({"topic": topic, "partitions": ps})
            return out

        standby = dict(m.assigned.standby)
        for sid, ps in m.assigned.warmup.items():
            standby[sid] = standby.get(sid, frozenset()) | ps
        return {"user_endpoint": {"host": m.user_endpoint.host, "port": m.user_endpoint.port},
                "active_partitions": partitions(m.assigned.active_sets()), "standby_partitions": partitions(standby)}

    # --------------------------------------------------------------------------------------------- describe
    def describe(self, gid: str) -> dict[str, Any]:
        group = self.groups.get(gid)
        if group is None:
            kind = self._group_type_of(gid)
            message = f"Group {gid} not found." if kind is None else f"Group {gid} is not a streams group."
            return {"error_code": int(ErrorCode.GROUP_ID_NOT_FOUND), "error_message": message, "group_id": gid,
                    "group_state": "", "group_epoch": 0, "assignment_epoch": 0, "topology": None,
                    "members": [], "assignor_name": None}
        configured = group.configured
        if configured is not None and configured.ready:
            topology = configured.describe()
        elif group.topology is not None:
            topology = group.topology.describe()
        else:
            topology = None
        members = []
        for mid, m in group.members.items():
            t = group.target.get(mid)
            offsets, ends = self.task_offsets.get((gid, mid), ({}, {}))
            members.append({
                "member_id": mid, "member_epoch": m.member_epoch, "instance_id": m.instance_id,
                "rack_id": m.rack_id, "client_id": m.client_id, "client_host": m.client_host,
                "topology_epoch": m.topology_epoch, "process_id": m.process_id,
                "user_endpoint": None if m.user_endpoint is None else {"host": m.user_endpoint.host,
                                                                       "port": m.user_endpoint.port},
                "client_tags": [{"key": k, "value": v} for k, v in m.client_tags],
                "task_offsets": [{"subtopology_id": s, "partition": p, "offset": o}
                                 for (s, p), o in sorted(offsets.items())],
                "task_end_offsets": [{"subtopology_id": s, "partition": p, "offset": o}
                                     for (s, p), o in sorted(ends.items())],
                "assignment": {"active_tasks": _task_list(m.assigned.active_sets()),
                               "standby_tasks": _task_list(m.assigned.standby),
                               "warmup_tasks": _task_list(m.assigned.warmup)},
                "target_assignment": {"active_tasks": _task_list(t.active), "standby_tasks": _task_list(t.standby),
                                      "warmup_tasks": _task_list(t.warmup)} if t is not None else
                {"active_tasks": [], "standby_tasks": [], "warmup_tasks": []},
                "is_classic": False})
        return {"error_code": 0, "error_message": None, "group_id": gid, "group_state": group.state().value,
                "group_epoch": group.group_epoch, "assignment_epoch": group.assignment_epoch,
                "topology": topology, "members": members, "assignor_name": ASSIGNOR_NAME}

    # ----------------------------------------------------------------------------------------------- offsets
    def validate_offset_commit(self, gid: str, member_id: str, instance_id: str | None, epoch: int,
                               version: int, transactional: bool = False) -> None:
        """Kafka's StreamsGroup.validateOffsetCommit (GroupError if refused)."""
        group = self.groups[gid]
        if epoch < 0 and not group.members:
            return
        if transactional and epoch == -1 and member_id == "" and instance_id is None:
            return
        member = group.members.get(member_id)
        if member is None:
            raise GroupError(ErrorCode.UNKNOWN_MEMBER_ID, f"Member {member_id} is not a member of group {gid}.")
        if not transactional and version < 9:
            raise GroupError(ErrorCode.UNSUPPORTED_VERSION, "OffsetCommit version 9 or above must be used by "
                             "members using the streams group protocol")
        if epoch > member.member_epoch:
            raise GroupError(ErrorCode.STALE_MEMBER_EPOCH, f"Received member epoch {epoch} is newer than current "
                             f"member epoch {member.member_epoch}.")
        if epoch < member.member_epoch:
            raise GroupError(ErrorCode.STALE_MEMBER_EPOCH, f"Received member epoch {epoch} is older than current "
                             f"member epoch {member.member_epoch}.")

    def validate_offset_fetch(self, gid: str, member_id: str | None, epoch: int) -> None:
        group = self.groups[gid]
        if member_id is None and epoch < 0:
            return
        member = group.members.get(member_id or "")
        if member is None:
            raise GroupError(ErrorCode.UNKNOWN_MEMBER_ID, f"Member {member_id} is not a member of group {gid}.")
        if epoch != member.member_epoch:
            raise GroupError(ErrorCode.STALE_MEMBER_EPOCH)

    def is_subscribed_to(self, gid: str, topic: str) -> bool:
        group = self.groups.get(gid)
        if group is None or group.topology is None or group.state() is StreamsGroupState.EMPTY:
            return False
        return any(topic in s.source_topics for s in group.topology.subtopologies.values())
