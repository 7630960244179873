"""Streams-group records on `__consumer_offsets` (Kafka's record types 15 to 20, key and value version 0):
building them and applying them to the groups, the one function replay and serving share.

Replay follows Kafka's GroupMetadataManager.replay for the streams records: a record with a value creates the
group or member if needed, a tombstone of something unknown is ignored, and a group goes with its
StreamsGroupMetadata tombstone once it has no members.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import replace
from typing import Any

from broker.groups.records import Record
from broker.groups.streams.group import (
    LEAVE_GROUP_MEMBER_EPOCH,
    ActiveTasks,
    AssignedTasks,
    Endpoint,
    MemberState,
    StreamsGroup,
    StreamsMember,
    Tasks,
    TasksTuple,
)
from broker.groups.streams.topology import StreamsTopology
from protocol.coordinator_records import (
    decode_key,
    decode_value,
    encode_key,
    encode_value,
    record_type,
    record_type_of,
)

GROUP_METADATA = "StreamsGroupMetadata"
MEMBER_METADATA = "StreamsGroupMemberMetadata"
TARGET_ASSIGNMENT_METADATA = "StreamsGroupTargetAssignmentMetadata"
TARGET_ASSIGNMENT_MEMBER = "StreamsGroupTargetAssignmentMember"
CURRENT_MEMBER_ASSIGNMENT = "StreamsGroupCurrentMemberAssignment"
TOPOLOGY = "StreamsGroupTopology"
RECORD_NAMES = (GROUP_METADATA, MEMBER_METADATA, TARGET_ASSIGNMENT_METADATA, TARGET_ASSIGNMENT_MEMBER,
                CURRENT_MEMBER_ASSIGNMENT, TOPOLOGY)
RECORD_TYPES: dict[int, str] = {record_type_of(n): n for n in RECORD_NAMES}


def _encode(name: str, key: Mapping[str, Any], value: Mapping[str, Any] | None) -> Record:
    return Record(encode_key(name, key), None if value is None else encode_value(name, value))


def _task_ids(tasks: Tasks) -> list[dict[str, Any]]:
    return [{"subtopology_id": s, "partitions": sorted(ps)} for s, ps in sorted(tasks.items()) if ps]


def _task_ids_with_epochs(tasks: ActiveTasks) -> list[dict[str, Any]]:
    out = []
    for s, ps in sorted(tasks.items()):
        if ps:
            parts = sorted(ps)
            out.append({"subtopology_id": s, "partitions": parts, "assignment_epochs": [ps[p] for p in parts]})
    return out


# ---------------------------------------------------------------------------------------------- builders
def group_metadata(g: StreamsGroup, epoch: int, metadata_hash: int, validated_topology_epoch: int,
                   configs: Mapping[str, str]) -> Record:
    return _encode(GROUP_METADATA, {"group_id": g.group_id}, {
        "epoch": epoch, "metadata_hash": metadata_hash, "validated_topology_epoch": validated_topology_epoch,
        "last_assignment_configs": [{"key": k, "value": v} for k, v in sorted(configs.items())],
        "stored_description_topology_epoch": -1, "failed_description_topology_epoch": -1})


def topology(group_id: str, t: StreamsTopology) -> Record:
    return _encode(TOPOLOGY, {"group_id": group_id}, t.to_record())


def member_metadata(group_id: str, m: StreamsMember) -> Record:
    return _encode(MEMBER_METADATA, {"group_id": group_id, "member_id": m.member_id}, {
        "instance_id": m.instance_id, "rack_id": m.rack_id, "client_id": m.client_id,
        "client_host": m.client_host, "rebalance_timeout_ms": m.rebalance_timeout_ms,
        "topology_epoch": m.topology_epoch, "process_id": m.process_id,
        "user_endpoint": None if m.user_endpoint is None else {"host": m.user_endpoint.host,
                                                               "port": m.user_endpoint.port},
        "client_tags": [{"key": k, "value": v} for k, v in m.client_tags]})


def target_assignment(group_id: str, member_id: str, t: TasksTuple) -> Record:
    return _encode(TARGET_ASSIGNMENT_MEMBER, {"group_id": group_id, "member_id": member_id}, {
        "active_tasks": _task_ids(t.active), "standby_tasks": _task_ids(t.standby),
        "warmup_tasks": _task_ids(t.warmup)})


def target_assignment_metadata(group_id: str, epoch: int, timestamp_ms: int) -> Record:
    return _encode(TARGET_ASSIGNMENT_METADATA, {"group_id": group_id},
                   {"assignment_epoch": epoch, "assignment_timestamp": timestamp_ms})


def current_assignment(group_id: str, m: StreamsMember) -> Record:
    return _encode(CURRENT_MEMBER_ASSIGNMENT, {"group_id": group_id, "member_id": m.member_id}, {
        "member_epoch": m.member_epoch, "previous_member_epoch": m.previous_member_epoch, "state": int(m.state),
        "active_tasks": _task_ids_with_epochs(m.assigned.active), "standby_tasks": _task_ids(m.assigned.standby),
        "warmup_tasks": _task_ids(m.assigned.warmup),
        "active_tasks_pending_revocation": _task_ids_with_epochs(m.pending_revocation.active),
        "standby_tasks_pending_revocation": _task_ids(m.pending_revocation.standby),
        "warmup_tasks_pending_revocation": _task_ids(m.pending_revocation.warmup)})


def member_tombstones(group_id: str, member_id: str) -> list[Record]:
    """A member's removal: its current assignment, target assignment and metadata, in Kafka's order."""
    key = {"group_id": group_id, "member_id": member_id}
    return [_encode(CURRENT_MEMBER_ASSIGNMENT, key, None), _encode(TARGET_ASSIGNMENT_MEMBER, key, None),
            _encode(MEMBER_METADATA, key, None)]


def group_tombstones(g: StreamsGroup) -> list[Record]:
    """Everything of a group (Kafka's StreamsGroup.createGroupTombstoneRecords)."""
    gid = g.group_id
    out = [_encode(CURRENT_MEMBER_ASSIGNMENT, {"group_id": gid, "member_id": m}, None) for m in g.members]
    out += [_encode(TARGET_ASSIGNMENT_MEMBER, {"group_id": gid, "member_id": m}, None) for m in g.members]
    out.append(_encode(TARGET_ASSIGNMENT_METADATA, {"group_id": gid}, None))
    out += [_encode(MEMBER_METADATA, {"group_id": gid, "member_id": m}, None) for m in g.members]
    out.append(_encode(GROUP_METADATA, {"group_id": gid}, None))
    out.append(_encode(TOPOLOGY, {"group_id": gid}, None))
    return out


# ------------------------------------------------------------------------------------------------ replay
def is_streams_record(key: bytes | memoryview) -> bool:
    return len(key) >= 2 and record_type(key) in RECORD_TYPES


def _tasks(items: Iterable[Any]) -> Tasks:
    out: dict[str, frozenset[int]] = {}
    for t in items:
        if t.partitions:
            out[t.subtopology_id] = out.get(t.subtopology_id, frozenset()) | frozenset(t.partitions)
    return out


def _active(items: Iterable[Any]) -> ActiveTasks:
    out: dict[str, dict[int, int]] = {}
    for t in items:
        epochs = list(t.assignment_epochs or [])
        for i, p in enumerate(t.partitions):
            out.setdefault(t.subtopology_id, {})[p] = epochs[i] if i < len(epochs) else 0
    return out


def apply(groups: dict[str, StreamsGroup], key: bytes | memoryview, value: bytes | memoryview | None) -> None:
    """Apply one streams-group record to `groups` (mutated in place)."""
    name = RECORD_TYPES[record_type(key)]
    k = decode_key(name, key)
    v = None if value is None else decode_value(name, value)
    gid = k.group_id
    group = groups.get(gid)
    if group is None:
        if v is None:
            return
        group = groups[gid] = StreamsGroup(gid)
    if name == GROUP_METADATA:
        if v is None:
            if group.members:
                raise ValueError(f"tombstone for streams group {gid} which still has members")
            del groups[gid]
            return
        group.group_epoch, group.metadata_hash = v.epoch, v.metadata_hash
        group.validated_topology_epoch = v.validated_topology_epoch
        group.last_assignment_configs = {c.key: c.value for c in (v.last_assignment_configs or [])}
    elif name == TOPOLOGY:
        if v is None:
            group.topology = None
        else:
            group.topology = StreamsTopology.from_wire(_plain(v))
        group.configured = None
        group.configured_for = None
    elif name == MEMBER_METADATA:
        mid = k.member_id
        old = group.members.get(mid)
        if v is None:
            if old is not None:
                group.remove_member(mid)
            return
        endpoint = None if v.user_endpoint is None else Endpoint(v.user_endpoint.host, v.user_endpoint.port)
        group.put_member(replace(old or StreamsMember(mid), instance_id=v.instance_id, rack_id=v.rack_id,
                                 client_id=v.client_id, client_host=v.client_host,
                                 rebalance_timeout_ms=v.rebalance_timeout_ms, topology_epoch=v.topology_epoch,
                                 process_id=v.process_id, user_endpoint=endpoint,
                                 client_tags=tuple((c.key, c.value) for c in v.client_tags)))
    elif name == TARGET_ASSIGNMENT_MEMBER:
        if v is None:
            group.target.pop(k.member_id, None)
        else:
            group.target[k.member_id] = TasksTuple(_tasks(v.active_tasks), _tasks(v.standby_tasks),
                                                   _tasks(v.warmup_tasks))
    elif name == TARGET_ASSIGNMENT_METADATA:
        if v is None:
            group.assignment_epoch, group.assignment_timestamp = -1, 0
        else:
            group.assignment_epoch, group.assignment_timestamp = v.assignment_epoch, v.assignment_timestamp
    elif name == CURRENT_MEMBER_ASSIGNMENT:
        mid = k.member_id
        old = group.members.get(mid)
        if v is None:
            if old is not None:
                group.put_member(replace(old, member_epoch=LEAVE_GROUP_MEMBER_EPOCH,
                                         previous_member_epoch=LEAVE_GROUP_MEMBER_EPOCH,
                                         assigned=AssignedTasks(), pending_revocation=AssignedTasks()))
            return
        group.put_member(replace(
            old or StreamsMember(mid), member_epoch=v.member_epoch, previous_member_epoch=v.previous_member_epoch,
            state=MemberState(v.state) if v.state in MemberState._value2member_map_ else MemberState.UNKNOWN,
            assigned=AssignedTasks(_active(v.active_tasks), _tasks(v.standby_tasks), _tasks(v.warmup_tasks)),
            pending_revocation=AssignedTasks(_active(v.active_tasks_pending_revocation),
                                             _tasks(v.standby_tasks_pending_revocation),
                                             _tasks(v.warmup_tasks_pending_revocation))))


def _plain(x: Any) -> Any:
    """A decoded record struct as plain dicts and lists (the topology is built from either)."""
    if isinstance(x, list):
        return [_plain(i) for i in x]
    if hasattr(x, "items"):
        return {k: _plain(v) for k, v in x.items() if not k.startswith("_")}
    return x
