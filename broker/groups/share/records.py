"""Share-group records on `__consumer_offsets`: building, decoding and replaying them.

Record types 10-15 as Kafka writes them (Kafka's CoordinatorRecordSerde: key = int16 record type, the key schema's
apiKey, + key struct; value = int16 value version + value struct, or None for a tombstone). The five a share group
shares in shape with a consumer group are built and replayed by `broker.groups.modern.records`; this module has a
share member's subscription and current assignment values, the target assignment's timestamp, and
ShareGroupStatePartitionMetadata (which share-partitions the share coordinator holds state for).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import replace
from typing import Any
from uuid import UUID

from broker.groups.modern.records import (
    Decoded,
    ModernRecords,
    assignment,
    decode_as,
    encode,
    topic_partitions,
)
from broker.groups.records import Record
from broker.groups.share.group import (
    LEAVE_GROUP_MEMBER_EPOCH,
    ShareGroup,
    ShareMember,
    StatePartitionMetadata,
    TopicPartitions,
)
from protocol.coordinator_records import record_type, record_type_of
from protocol.errors import DecodeError

STATE_PARTITION_METADATA = "ShareGroupStatePartitionMetadata"

DecodedRecord = Decoded


class ShareGroupRecords(ModernRecords[ShareGroup, ShareMember]):
    """The records share groups share with consumer groups, and what a share group's own."""

    def new_group(self, group_id: str) -> ShareGroup:
        return ShareGroup(group_id)

    def new_member(self, member_id: str) -> ShareMember:
        return ShareMember(member_id)

    def with_subscription(self, member: ShareMember, v: Any) -> ShareMember:
        return replace(member, rack_id=v.rack_id, client_id=v.client_id, client_host=v.client_host,
                       subscribed_topic_names=frozenset(v.subscribed_topic_names))

    def with_assignment(self, member: ShareMember, v: Any) -> ShareMember:
        return replace(member, member_epoch=v.member_epoch, previous_member_epoch=v.previous_member_epoch,
                       state=v.state, assigned_partitions=assignment(v.assigned_partitions))

    def left(self, member: ShareMember) -> ShareMember:
        return replace(member, member_epoch=LEAVE_GROUP_MEMBER_EPOCH, previous_member_epoch=LEAVE_GROUP_MEMBER_EPOCH,
                       assigned_partitions={})

    def may_delete(self, group: ShareGroup) -> bool:
        return not group.members and not group.target_assignment

    def replay_assignment_epoch(self, group: ShareGroup, v: Any) -> None:
        group.assignment_epoch, group.assignment_timestamp = v.assignment_epoch, v.assignment_timestamp

    def replay_own(self, group: ShareGroup, rec: Decoded) -> None:
        if rec.name == STATE_PARTITION_METADATA:
            v = rec.value
            if v is None:
                group.partition_metadata = None
            else:
                def infos(items: Iterable[Any]) -> dict[UUID, TopicPartitions]:
                    return {i.topic_id: TopicPartitions(i.topic_name, frozenset(i.partitions)) for i in items}

                group.partition_metadata = StatePartitionMetadata(
                    infos(v.initializing_topics), infos(v.initialized_topics),
                    {i.topic_id: i.topic_name for i in v.deleting_topics})


RECORDS = ShareGroupRecords("ShareGroup", "share")
MEMBER_METADATA = RECORDS.member_metadata
GROUP_METADATA = RECORDS.group_metadata
TARGET_ASSIGNMENT_METADATA = RECORDS.target_assignment_metadata
TARGET_ASSIGNMENT_MEMBER = RECORDS.target_assignment_member
CURRENT_MEMBER_ASSIGNMENT = RECORDS.current_member_assignment
RECORD_NAMES = (MEMBER_METADATA, GROUP_METADATA, TARGET_ASSIGNMENT_METADATA, TARGET_ASSIGNMENT_MEMBER,
                CURRENT_MEMBER_ASSIGNMENT, STATE_PARTITION_METADATA)


# The record type is the key schema's apiKey (10..15 for share groups).
RECORD_TYPES: dict[int, str] = {record_type_of(n): n for n in RECORD_NAMES}
TYPE_OF: dict[str, int] = {n: t for t, n in RECORD_TYPES.items()}


def is_share_record(key: bytes | memoryview) -> bool:
    return len(key) >= 2 and record_type(key) in RECORD_TYPES


def decode(key: bytes | memoryview, value: bytes | memoryview | None) -> Decoded:
    """Decode a share-group record; DecodeError for malformed bytes or a non-share record type."""
    rtype = record_type(key)
    name = RECORD_TYPES.get(rtype)
    if name is None:
        raise DecodeError(f"record type {rtype} is not a share-group record")
    return decode_as(name, key, value)


# ---------------------------------------------------------------------------------------------- builders

group_epoch = RECORDS.group_epoch
group_epoch_tombstone = RECORDS.group_epoch_tombstone
member_subscription_tombstone = RECORDS.member_subscription_tombstone
target_assignment = RECORDS.target_assignment
target_assignment_tombstone = RECORDS.target_assignment_tombstone
target_assignment_epoch = RECORDS.target_assignment_epoch
target_assignment_epoch_tombstone = RECORDS.target_assignment_epoch_tombstone
current_assignment_tombstone = RECORDS.current_assignment_tombstone


def member_subscription(group_id: str, m: ShareMember) -> Record:
    return RECORDS.member_subscription_record(group_id, m.member_id, {
        "rack_id": m.rack_id, "client_id": m.client_id, "client_host": m.client_host,
        "subscribed_topic_names": sorted(m.subscribed_topic_names)})


def current_assignment(group_id: str, m: ShareMember) -> Record:
    return RECORDS.current_assignment_record(group_id, m.member_id, {
        "member_epoch": m.member_epoch, "previous_member_epoch": m.previous_member_epoch,
        "state": int(m.state), "assigned_partitions": topic_partitions(m.assigned_partitions)})


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

apply = RECORDS.apply


def emit(groups: dict[str, ShareGroup], out: list[Record], record: Record) -> None:
    """Apply `record` to `groups` through the decoder (the exact bytes handed out are what changes the state,
    so replay rebuilds it) and add it to `out`."""
    apply(groups, decode(record.key, record.value))
    out.append(record)
