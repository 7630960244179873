"""Share-group coordinator records on `__consumer_offsets`: building, encoding, decoding and replaying.

Wire format (Kafka's CoordinatorRecordSerde):
    key   = int16 record type (the key schema's apiKey) + key struct (version 0)
    value = int16 value version + value struct, or None for a tombstone

Replay follows Kafka's GroupMetadataManager.replay(...) for the share records: a record with a value creates
the group/member if needed; tombstones for unknown groups or members are ignored.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from typing import Any
from uuid import UUID

from broker.groups.records import Record
from broker.groups.share.group import (
    LEAVE_GROUP_MEMBER_EPOCH,
    Assignment,
    ShareGroup,
    ShareMember,
    StatePartitionMetadata,
    TopicPartitions,
)
from protocol.coordinator_records import (
    decode_key,
    decode_value,
    encode_key,
    encode_value,
    record_type,
    record_type_of,
)
from protocol.errors import DecodeError

MEMBER_METADATA = "ShareGroupMemberMetadata"
GROUP_METADATA = "ShareGroupMetadata"
TARGET_ASSIGNMENT_METADATA = "ShareGroupTargetAssignmentMetadata"
TARGET_ASSIGNMENT_MEMBER = "ShareGroupTargetAssignmentMember"
CURRENT_MEMBER_ASSIGNMENT = "ShareGroupCurrentMemberAssignment"
STATE_PARTITION_METADATA = "ShareGroupStatePartitionMetadata"
RECORD_NAMES = (MEMBER_METADATA, GROUP_METADATA, TARGET_ASSIGNMENT_METADATA, TARGET_ASSIGNMENT_MEMBER,
                CURRENT_MEMBER_ASSIGNMENT, STATE_PARTITION_METADATA)


# The record type is the key schema's apiKey (10..15 for share groups).
RECORD_TYPES: dict[int, str] = {record_type_of(n): n for n in RECORD_NAMES}
TYPE_OF: dict[str, int] = {n: t for t, n in RECORD_TYPES.items()}


@dataclass(frozen=True)
class DecodedRecord:
    name: str  # e.g. "ShareGroupMetadata"
    key: Any  # Container
    value: Any | None  # Container, None for a tombstone


def encode(name: str, key: Mapping[str, Any], value: Mapping[str, Any] | None) -> Record:
    return Record(encode_key(name, key), None if value is None else encode_value(name, value))


def is_share_record(key: bytes | memoryview) -> bool:
    return len(key) >= 2 and record_type(key) in RECORD_TYPES


def decode(key: bytes | memoryview, value: bytes | memoryview | None) -> DecodedRecord:
    """Decode a share-group record; DecodeError for malformed bytes or a non-share record type."""
    rtype = record_type(key)
    name = RECORD_TYPES.get(rtype)
    if name is None:
        raise DecodeError(f"record type {rtype} is not a share-group record")
    k = decode_key(name, key)
    if value is None:
        return DecodedRecord(name, k, None)
    return DecodedRecord(name, k, decode_value(name, value))


# ---------------------------------------------------------------------------------------------- builders

def _topic_partitions(a: Assignment) -> list[dict[str, Any]]:
    return [{"topic_id": t, "partitions": sorted(ps)} for t, ps in sorted(a.items(), key=lambda kv: str(kv[0]))
            if ps]


def group_epoch(group_id: str, epoch: int, metadata_hash: int) -> Record:
    return encode(GROUP_METADATA, {"group_id": group_id}, {"epoch": epoch, "metadata_hash": metadata_hash})


def group_epoch_tombstone(group_id: str) -> Record:
    return encode(GROUP_METADATA, {"group_id": group_id}, None)


def member_subscription(group_id: str, m: ShareMember) -> Record:
    return encode(MEMBER_METADATA, {"group_id": group_id, "member_id": m.member_id}, {
        "rack_id": m.rack_id, "client_id": m.client_id, "client_host": m.client_host,
        "subscribed_topic_names": sorted(m.subscribed_topic_names)})


def member_subscription_tombstone(group_id: str, member_id: str) -> Record:
    return encode(MEMBER_METADATA, {"group_id": group_id, "member_id": member_id}, None)


def target_assignment(group_id: str, member_id: str, a: Assignment) -> Record:
    return encode(TARGET_ASSIGNMENT_MEMBER, {"group_id": group_id, "member_id": member_id},
                  {"topic_partitions": _topic_partitions(a)})


def target_assignment_tombstone(group_id: str, member_id: str) -> Record:
    return encode(TARGET_ASSIGNMENT_MEMBER, {"group_id": group_id, "member_id": member_id}, None)


def target_assignment_epoch(group_id: str, epoch: int, timestamp_ms: int) -> Record:
    return encode(TARGET_ASSIGNMENT_METADATA, {"group_id": group_id},
                  {"assignment_epoch": epoch, "assignment_timestamp": timestamp_ms})


def target_assignment_epoch_tombstone(group_id: str) -> Record:
    return encode(TARGET_ASSIGNMENT_METADATA, {"group_id": group_id}, None)


def current_assignment(group_id: str, m: ShareMember) -> Record:
    return encode(CURRENT_MEMBER_ASSIGNMENT, {"group_id": group_id, "member_id": m.member_id}, {
        "member_epoch": m.member_epoch, "previous_member_epoch": m.previous_member_epoch,
        "state": int(m.state), "assigned_partitions": _topic_partitions(m.assigned_partitions)})


def current_assignment_tombstone(group_id: str, member_id: str) -> Record:
    return encode(CURRENT_MEMBER_ASSIGNMENT, {"group_id": group_id, "member_id": member_id}, None)


def state_partition_metadata(group_id: str, md: StatePartitionMetadata) -> Record:
    def infos(d: Mapping[UUID, TopicPartitions]) -> list[dict[str, Any]]:
        return [{"topic_id": t, "topic_name": tp.name, "partitions": sorted(tp.partitions)}
                for t, tp in sorted(d.items(), key=lambda kv: str(kv[0]))]

    return encode(STATE_PARTITION_METADATA, {"group_id": group_id}, {
        "initializing_topics": infos(md.initializing),
        "initialized_topics": infos(md.initialized),
        "deleting_topics": [{"topic_id": t, "topic_name": n}
                            for t, n in sorted(md.deleting.items(), key=lambda kv: str(kv[0]))]})


def state_partition_metadata_tombstone(group_id: str) -> Record:
    return encode(STATE_PARTITION_METADATA, {"group_id": group_id}, None)


# ------------------------------------------------------------------------------------------------ replay

def _assignment(topic_partitions: Iterable[Any]) -> Assignment:
    out: dict[UUID, frozenset[int]] = {}
    for tp in topic_partitions:
        if tp.partitions:
            out[tp.topic_id] = out.get(tp.topic_id, frozenset()) | frozenset(tp.partitions)
    return out


def emit(groups: dict[str, ShareGroup], out: list[Record], record: Record) -> None:
    """Apply `record` to `groups` through the decoder (the exact bytes handed out are what changes the state,
    so replay rebuilds it) and add it to `out`."""
    apply(groups, decode(record.key, record.value))
    out.append(record)


def apply(groups: dict[str, ShareGroup], rec: DecodedRecord) -> None:
    """Apply one decoded share-group record to `groups` (mutated in place)."""
    gid = rec.key.group_id
    group = groups.get(gid)
    v = rec.value
    if group is None:
        if v is None:
            return  # tombstone for a group we do not have
        group = groups[gid] = ShareGroup(gid)

    if rec.name == GROUP_METADATA:
        if v is None:
            if group.members or group.target_assignment:
                raise ValueError(f"tombstone for share group {gid} which still has members")
            del groups[gid]
        else:
            group.group_epoch, group.metadata_hash = v.epoch, v.metadata_hash
    elif rec.name == MEMBER_METADATA:
        mid = rec.key.member_id
        old = group.members.get(mid)
        if v is None:
            if old is None:
                return
            if old.member_epoch != LEAVE_GROUP_MEMBER_EPOCH or mid in group.target_assignment:
                raise ValueError(f"member {mid} of {gid} deleted before its assignment records")
            del group.members[mid]
        else:
            group.members[mid] = replace(old or ShareMember(mid), rack_id=v.rack_id, client_id=v.client_id,
                                         client_host=v.client_host,
                                         subscribed_topic_names=frozenset(v.subscribed_topic_names))
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
            group.assignment_epoch, group.assignment_timestamp = v.assignment_epoch, v.assignment_timestamp
    elif rec.name == CURRENT_MEMBER_ASSIGNMENT:
        mid = rec.key.member_id
        old = group.members.get(mid)
        if v is None:
            if old is not None:
                # Kafka marks the member as leaving; the member metadata tombstone then removes it.
                group.members[mid] = replace(old, member_epoch=LEAVE_GROUP_MEMBER_EPOCH,
                                             previous_member_epoch=LEAVE_GROUP_MEMBER_EPOCH,
                                             assigned_partitions={})
        else:
            group.members[mid] = replace(old or ShareMember(mid), member_epoch=v.member_epoch,
                                         previous_member_epoch=v.previous_member_epoch, state=v.state,
                                         assigned_partitions=_assignment(v.assigned_partitions))
    elif rec.name == STATE_PARTITION_METADATA:
        if v is None:
            group.partition_metadata = None
        else:
            def infos(items: Iterable[Any]) -> dict[UUID, TopicPartitions]:
                return {i.topic_id: TopicPartitions(i.topic_name, frozenset(i.partitions)) for i in items}

            group.partition_metadata = StatePartitionMetadata(
                infos(v.initializing_topics), infos(v.initialized_topics),
                {i.topic_id: i.topic_name for i in v.deleting_topics})
