"""`__consumer_offsets` records of every group type: the record value type and who owns each record type.

Each record is a key (int16 record type + key struct) and a value (int16 version + value struct, or None for a
tombstone), as Kafka's CoordinatorRecordSerde writes them; `protocol.coordinator_records` does the framing.
The group coordinator dispatches a record to the part that owns its type (offsets, classic groups, consumer
groups, share groups) during replay, and sends every record of a group to the group's partition.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

from protocol.coordinator_records import decode_key, record_type, record_type_of
from protocol.errors import DecodeError


@dataclass(frozen=True)
class Record:
    """One `__consumer_offsets` record: key bytes and value bytes (None = tombstone)."""

    key: bytes
    value: bytes | None


class Owner(Enum):
    OFFSETS = "offsets"
    CLASSIC = "classic"
    CONSUMER = "consumer"
    SHARE = "share"
    STREAMS = "streams"


# Record name (the key schema's name without "Key") -> owner. Types not listed (records of future versions) are
# skipped on replay, as Kafka's loader skips unknown record types.
_OWNED: dict[str, Owner] = {
    "OffsetCommit": Owner.OFFSETS,
    "GroupMetadata": Owner.CLASSIC,
    "ConsumerGroupMetadata": Owner.CONSUMER,
    "ConsumerGroupPartitionMetadata": Owner.CONSUMER,
    "ConsumerGroupMemberMetadata": Owner.CONSUMER,
    "ConsumerGroupTargetAssignmentMetadata": Owner.CONSUMER,
    "ConsumerGroupTargetAssignmentMember": Owner.CONSUMER,
    "ConsumerGroupCurrentMemberAssignment": Owner.CONSUMER,
    "ConsumerGroupRegularExpression": Owner.CONSUMER,
    "ShareGroupMetadata": Owner.SHARE,
    "ShareGroupMemberMetadata": Owner.SHARE,
    "ShareGroupTargetAssignmentMetadata": Owner.SHARE,
    "ShareGroupTargetAssignmentMember": Owner.SHARE,
    "ShareGroupCurrentMemberAssignment": Owner.SHARE,
    "ShareGroupStatePartitionMetadata": Owner.SHARE,
    "StreamsGroupMetadata": Owner.STREAMS,
    "StreamsGroupTopology": Owner.STREAMS,
    "StreamsGroupMemberMetadata": Owner.STREAMS,
    "StreamsGroupTargetAssignmentMetadata": Owner.STREAMS,
    "StreamsGroupTargetAssignmentMember": Owner.STREAMS,
    "StreamsGroupCurrentMemberAssignment": Owner.STREAMS,
}
NAME_OF_TYPE: dict[int, str] = {record_type_of(n): n for n in _OWNED}
OWNER_OF_TYPE: dict[int, Owner] = {record_type_of(n): o for n, o in _OWNED.items()}


def owner_of(key: bytes | memoryview) -> Owner | None:
    """Which part of the group coordinator replays this record (None: not a record we know)."""
    if len(key) < 2:
        return None
    return OWNER_OF_TYPE.get(record_type(key))


def group_id_of(key: bytes | memoryview) -> str:
    """The group id in a record key (OffsetCommit/GroupMetadata call it `group`, the others `group_id`)."""
    name = NAME_OF_TYPE.get(record_type(key))
    if name is None:
        raise DecodeError(f"record type {record_type(key)} is not a group coordinator record")
    k = decode_key(name, key)
    return str(k.group if name in ("OffsetCommit", "GroupMetadata") else k.group_id)
