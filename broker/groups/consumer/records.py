"""Consumer group (KIP-848) records on `__consumer_offsets`: building, decoding and replaying them.

Record types 3-8 and 16 as Kafka writes them (values in version 0); replay follows Kafka's
GroupMetadataManager.replay: a value creates the group/member if needed, a tombstone for something unknown is
ignored. ConsumerGroupPartitionMetadata (type 4) is no longer written by Kafka (the metadata hash replaced it)
and is ignored here.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from typing import Any
from uuid import UUID

from broker.groups.consumer.group import (
    LEAVE_GROUP_MEMBER_EPOCH,
    Assignment,
    ClassicMemberMetadata,
    ConsumerGroup,
    ConsumerMember,
    ResolvedRegex,
)
from broker.groups.records import NAME_OF_TYPE, Record
from protocol.coordinator_records import decode_key, decode_value, encode_key, encode_value, record_type

GROUP_METADATA = "ConsumerGroupMetadata"
PARTITION_METADATA = "ConsumerGroupPartitionMetadata"
MEMBER_METADATA = "ConsumerGroupMemberMetadata"
TARGET_ASSIGNMENT_METADATA = "ConsumerGroupTargetAssignmentMetadata"
TARGET_ASSIGNMENT_MEMBER = "ConsumerGroupTargetAssignmentMember"
CURRENT_MEMBER_ASSIGNMENT = "ConsumerGroupCurrentMemberAssignment"
REGULAR_EXPRESSION = "ConsumerGroupRegularExpression"


@dataclass(frozen=True)
class Decoded:
    name: str
    key: Any
    value: Any | None


def _encode(name: str, key: Mapping[str, Any], value: Mapping[str, Any] | None) -> Record:
    return Record(encode_key(name, key), None if value is None else encode_value(name, value))


def decode(key: bytes | memoryview, value: bytes | memoryview | None) -> Decoded:
    name = NAME_OF_TYPE[record_type(key)]
    return Decoded(name, decode_key(name, key), None if value is None else decode_value(name, value))


def _topic_partitions(a: Assignment) -> list[dict[str, Any]]:
    return [{"topic_id": t, "partitions": sorted(ps)} for t, ps in sorted(a.items(), key=lambda kv: str(kv[0]))
            if ps]


def _assignment(items: Iterable[Any]) -> Assignment:
    out: dict[UUID, frozenset[int]] = {}
    for tp in items:
        if tp.partitions:
            out[tp.topic_id] = out.get(tp.topic_id, frozenset()) | frozenset(tp.partitions)
    return out


# ---------------------------------------------------------------------------------------------- builders

def group_epoch(group_id: str, epoch: int, metadata_hash: int) -> Record:
    return _encode(GROUP_METADATA, {"group_id": group_id}, {"epoch": epoch, "metadata_hash": metadata_hash})


def group_epoch_tombstone(group_id: str) -> Record:
    return _encode(GROUP_METADATA, {"group_id": group_id}, None)


def member_subscription(group_id: str, m: ConsumerMember) -> Record:
    classic = None if m.classic is None else {
        "session_timeout_ms": m.classic.session_timeout_ms,
        "supported_protocols": [{"name": n, "metadata": md} for n, md in m.classic.protocols]}
    return _encode(MEMBER_METADATA, {"group_id": group_id, "member_id": m.member_id}, {
        "instance_id": m.instance_id, "rack_id": m.rack_id, "client_id": m.client_id, "client_host": m.client_host,
        "subscribed_topic_names": sorted(m.subscribed_topic_names), "subscribed_topic_regex": m.subscribed_topic_regex,
        "rebalance_timeout_ms": m.rebalance_timeout_ms, "server_assignor": m.server_assignor,
        "classic_member_metadata": classic})


def member_subscription_tombstone(group_id: str, member_id: str) -> Record:
    return _encode(MEMBER_METADATA, {"group_id": group_id, "member_id": member_id}, None)


def target_assignment(group_id: str, member_id: str, a: Assignment) -> Record:
    return _encode(TARGET_ASSIGNMENT_MEMBER, {"group_id": group_id, "member_id": member_id},
                   {"topic_partitions": _topic_partitions(a)})


def target_assignment_tombstone(group_id: str, member_id: str) -> Record:
    return _encode(TARGET_ASSIGNMENT_MEMBER, {"group_id": group_id, "member_id": member_id}, None)


def target_assignment_epoch(group_id: str, epoch: int, timestamp_ms: int) -> Record:
    return _encode(TARGET_ASSIGNMENT_METADATA, {"group_id": group_id},
                   {"assignment_epoch": epoch, "assignment_timestamp": timestamp_ms})


def target_assignment_epoch_tombstone(group_id: str) -> Record:
    return _encode(TARGET_ASSIGNMENT_METADATA, {"group_id": group_id}, None)


def current_assignment(group_id: str, m: ConsumerMember) -> Record:
    return _encode(CURRENT_MEMBER_ASSIGNMENT, {"group_id": group_id, "member_id": m.member_id}, {
        "member_epoch": m.member_epoch, "previous_member_epoch": m.previous_member_epoch, "state": int(m.state),
        "assigned_partitions": _topic_partitions(m.assigned_partitions),
        "partitions_pending_revocation": _topic_partitions(m.partitions_pending_revocation)})


def current_assignment_tombstone(group_id: str, member_id: str) -> Record:
    return _encode(CURRENT_MEMBER_ASSIGNMENT, {"group_id": group_id, "member_id": member_id}, None)


def regex(group_id: str, pattern: str, resolved: ResolvedRegex) -> Record:
    return _encode(REGULAR_EXPRESSION, {"group_id": group_id, "regular_expression": pattern},
                   {"topics": sorted(resolved.topics), "version": resolved.version,
                    "timestamp": resolved.timestamp_ms})


def regex_tombstone(group_id: str, pattern: str) -> Record:
    return _encode(REGULAR_EXPRESSION, {"group_id": group_id, "regular_expression": pattern}, None)


# ------------------------------------------------------------------------------------------------ replay

def apply(groups: dict[str, ConsumerGroup], rec: Decoded) -> None:
    """Apply one decoded consumer-group record to `groups` (mutated in place)."""
    if rec.name == PARTITION_METADATA:
        return  # superseded by the metadata hash in ConsumerGroupMetadataValue
    gid = rec.key.group_id
    group = groups.get(gid)
    v = rec.value
    if group is None:
        if v is None:
            return
        group = groups[gid] = ConsumerGroup(gid)
    if rec.name == GROUP_METADATA:
        if v is None:
            if group.members:
                raise ValueError(f"tombstone for consumer group {gid} which still has members")
            del groups[gid]
        else:
            group.group_epoch, group.metadata_hash = v.epoch, v.get("metadata_hash", 0)
    elif rec.name == MEMBER_METADATA:
        mid = rec.key.member_id
        old = group.members.get(mid)
        if v is None:
            if old is not None:
                if old.member_epoch != LEAVE_GROUP_MEMBER_EPOCH or mid in group.target_assignment:
                    raise ValueError(f"member {mid} of {gid} deleted before its assignment records")
                del group.members[mid]
            return
        classic = v.get("classic_member_metadata")
        group.members[mid] = replace(
            old or ConsumerMember(mid), instance_id=v.instance_id, rack_id=v.rack_id, client_id=v.client_id,
            client_host=v.client_host, subscribed_topic_names=frozenset(v.subscribed_topic_names),
            subscribed_topic_regex=v.subscribed_topic_regex, rebalance_timeout_ms=v.rebalance_timeout_ms,
            server_assignor=v.server_assignor,
            classic=None if classic is None else ClassicMemberMetadata(
                classic.session_timeout_ms, tuple((p.name, bytes(p.metadata)) for p in classic.supported_protocols)))
    elif rec.name == TARGET_ASSIGNMENT_MEMBER:
        if v is None:
            group.target_assignment.pop(rec.key.member_id, None)
        else:
            group.target_assignment[rec.key.member_id] = _assignment(v.topic_partitions)
    elif rec.name == TARGET_ASSIGNMENT_METADATA:
        if v is None:
            if group.target_assignment:
                raise ValueError(f"target assignment tombstone for {gid} while members are still assigned")
            group.assignment_epoch = -1
        else:
            group.assignment_epoch = v.assignment_epoch
    elif rec.name == CURRENT_MEMBER_ASSIGNMENT:
        mid = rec.key.member_id
        old = group.members.get(mid)
        if v is None:
            if old is not None:
                group.members[mid] = replace(old, member_epoch=LEAVE_GROUP_MEMBER_EPOCH,
                                             previous_member_epoch=LEAVE_GROUP_MEMBER_EPOCH,
                                             assigned_partitions={}, partitions_pending_revocation={})
        else:
            group.members[mid] = replace(
                old or ConsumerMember(mid), member_epoch=v.member_epoch,
                previous_member_epoch=v.previous_member_epoch, state=v.state,
                assigned_partitions=_assignment(v.assigned_partitions),
                partitions_pending_revocation=_assignment(v.partitions_pending_revocation))
    elif rec.name == REGULAR_EXPRESSION:
        pattern = rec.key.regular_expression
        if v is None:
            group.resolved_regexes.pop(pattern, None)
        else:
            group.resolved_regexes[pattern] = ResolvedRegex(frozenset(v.topics), v.version, v.timestamp)
