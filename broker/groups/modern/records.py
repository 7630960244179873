"""The records every modern group writes on `__consumer_offsets`, building and replaying them once for all group
types.

Kafka gives consumer groups and share groups record types of their own with the same fields: the group's epoch
(`<Type>Metadata`: Epoch, MetadataHash), a member's target assignment (`<Type>TargetAssignmentMember`: topic ids
and partitions), the target assignment's epoch (`<Type>TargetAssignmentMetadata`: AssignmentEpoch,
AssignmentTimestamp), and a member's subscription and current assignment (`<Type>MemberMetadata`,
`<Type>CurrentMemberAssignment`), whose values differ by group type but whose keys, tombstones and replay rules
do not. `ModernRecords` builds the common ones and replays all five as Kafka's GroupMetadataManager.replay does:
a value creates the group (and member) if needed, a tombstone for something unknown is ignored, and a tombstone
that would leave the group inconsistent is refused. A group type subclasses it with what differs: its group and
member classes, its members' values, and its own records (a consumer group's regular expressions, a share group's
state-partition metadata).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Generic, Protocol, TypeVar
from uuid import UUID

from broker.groups.records import Record
from protocol.coordinator_records import decode_key, decode_value, encode_key, encode_value

Assignment = dict[UUID, frozenset[int]]

# The member epoch of a member that left (Kafka's LEAVE_GROUP_MEMBER_EPOCH): its current-assignment tombstone
# sets it, and only then may its member-metadata tombstone remove it.
LEAVE_GROUP_MEMBER_EPOCH = -1


@dataclass(frozen=True)
class Decoded:
    name: str  # the record type's name, e.g. "ShareGroupMetadata"
    key: Any  # the key struct
    value: Any | None  # the value struct, None for a tombstone


class ModernGroup(Protocol):
    """What replay of the common records changes in a group (ConsumerGroup, ShareGroup)."""

    group_epoch: int
    metadata_hash: int
    assignment_epoch: int
    members: dict[str, Any]
    target_assignment: dict[str, Assignment]


G = TypeVar("G", bound=ModernGroup)
M = TypeVar("M")


def encode(name: str, key: Mapping[str, Any], value: Mapping[str, Any] | None) -> Record:
    return Record(encode_key(name, key), None if value is None else encode_value(name, value))


def decode_as(name: str, key: bytes | memoryview, value: bytes | memoryview | None) -> Decoded:
    return Decoded(name, decode_key(name, key), None if value is None else decode_value(name, value))


def topic_partitions(a: Assignment) -> list[dict[str, Any]]:
    """An assignment as the records' TopicPartitions: topics in id order, partitions sorted, empty ones left out."""
    return [{"topic_id": t, "partitions": sorted(ps)} for t, ps in sorted(a.items(), key=lambda kv: str(kv[0]))
            if ps]


def assignment(items: Iterable[Any]) -> Assignment:
    """The records' TopicPartitions as an assignment (a topic listed twice gets the union)."""
    out: dict[UUID, frozenset[int]] = {}
    for tp in items:
        if tp.partitions:
            out[tp.topic_id] = out.get(tp.topic_id, frozenset()) | frozenset(tp.partitions)
    return out


class ModernRecords(Generic[G, M]):
    """The common records of one group type, named `<group_type>Metadata`, `<group_type>MemberMetadata`, ...;
    `kind` names the group type in errors ("consumer", "share")."""

    def __init__(self, group_type: str, kind: str) -> None:
        self.kind = kind
        self.group_metadata = f"{group_type}Metadata"
        self.member_metadata = f"{group_type}MemberMetadata"
        self.target_assignment_metadata = f"{group_type}TargetAssignmentMetadata"
        self.target_assignment_member = f"{group_type}TargetAssignmentMember"
        self.current_member_assignment = f"{group_type}CurrentMemberAssignment"

    # ------------------------------------------------------------------------------------- what differs

    def new_group(self, group_id: str) -> G:
        raise NotImplementedError

    def new_member(self, member_id: str) -> M:
        raise NotImplementedError

    def with_subscription(self, member: M, value: Any) -> M:
        """`member` with the fields of a MemberMetadata value."""
        raise NotImplementedError

    def with_assignment(self, member: M, value: Any) -> M:
        """`member` with the fields of a CurrentMemberAssignment value."""
        raise NotImplementedError

    def left(self, member: M) -> M:
        """`member` after its CurrentMemberAssignment tombstone: leaving (Kafka marks it so; the MemberMetadata
        tombstone then removes it), with nothing assigned."""
        raise NotImplementedError

    def may_delete(self, group: G) -> bool:
        """Whether the group's Metadata tombstone may delete it."""
        return not group.members

    def replay_assignment_epoch(self, group: G, value: Any) -> None:
        group.assignment_epoch = value.assignment_epoch

    def replay_own(self, group: G, rec: Decoded) -> None:
        """Replay one of the group type's own records (the others are ignored)."""

    # --------------------------------------------------------------------------------------- builders

    def group_epoch(self, group_id: str, epoch: int, metadata_hash: int) -> Record:
        return encode(self.group_metadata, {"group_id": group_id}, {"epoch": epoch, "metadata_hash": metadata_hash})

    def group_epoch_tombstone(self, group_id: str) -> Record:
        return encode(self.group_metadata, {"group_id": group_id}, None)

    def member_subscription_record(self, group_id: str, member_id: str, value: Mapping[str, Any]) -> Record:
        return encode(self.member_metadata, {"group_id": group_id, "member_id": member_id}, value)

    def member_subscription_tombstone(self, group_id: str, member_id: str) -> Record:
        return encode(self.member_metadata, {"group_id": group_id, "member_id": member_id}, None)

    def target_assignment(self, group_id: str, member_id: str, a: Assignment) -> Record:
        return encode(self.target_assignment_member, {"group_id": group_id, "member_id": member_id},
                      {"topic_partitions": topic_partitions(a)})

    def target_assignment_tombstone(self, group_id: str, member_id: str) -> Record:
        return encode(self.target_assignment_member, {"group_id": group_id, "member_id": member_id}, None)

    def target_assignment_epoch(self, group_id: str, epoch: int, timestamp_ms: int) -> Record:
        return encode(self.target_assignment_metadata, {"group_id": group_id},
                      {"assignment_epoch": epoch, "assignment_timestamp": timestamp_ms})

    def target_assignment_epoch_tombstone(self, group_id: str) -> Record:
        return encode(self.target_assignment_metadata, {"group_id": group_id}, None)

    def current_assignment_record(self, group_id: str, member_id: str, value: Mapping[str, Any]) -> Record:
        return encode(self.current_member_assignment, {"group_id": group_id, "member_id": member_id}, value)

    def current_assignment_tombstone(self, group_id: str, member_id: str) -> Record:
        return encode(self.current_member_assignment, {"group_id": group_id, "member_id": member_id}, None)

    # ----------------------------------------------------------------------------------------- replay

    def apply(self, groups: dict[str, G], rec: Decoded) -> None:
        """Apply one decoded record of this group type to `groups` (mutated in place)."""
        gid = rec.key.group_id
        group = groups.get(gid)
        v = rec.value
        if group is None:
            if v is None:
                return  # a tombstone for a group we do not have
            group = groups[gid] = self.new_group(gid)
        if rec.name == self.group_metadata:
            if v is None:
                if not self.may_delete(group):
                    raise ValueError(f"tombstone for {self.kind} group {gid} which still has members")
                del groups[gid]
            else:  # MetadataHash is a tagged field of ConsumerGroupMetadataValue
                group.group_epoch, group.metadata_hash = v.epoch, v.get("metadata_hash", 0)
        elif rec.name == self.member_metadata:
            mid = rec.key.member_id
            old = group.members.get(mid)
            if v is None:
                if old is not None:
                    if old.member_epoch != LEAVE_GROUP_MEMBER_EPOCH or mid in group.target_assignment:
                        raise ValueError(f"member {mid} of {gid} deleted before its assignment records")
                    del group.members[mid]
            else:
                group.members[mid] = self.with_subscription(old or self.new_member(mid), v)
        elif rec.name == self.target_assignment_member:
            if v is None:
                group.target_assignment.pop(rec.key.member_id, None)
            else:
                group.target_assignment[rec.key.member_id] = assignment(v.topic_partitions)
        elif rec.name == self.target_assignment_metadata:
            if v is None:
                if group.target_assignment:
                    raise ValueError(f"target assignment tombstone for {gid} while members are still assigned")
                group.assignment_epoch = -1
            else:
                self.replay_assignment_epoch(group, v)
        elif rec.name == self.current_member_assignment:
            mid = rec.key.member_id
            old = group.members.get(mid)
            if v is None:
                if old is not None:
                    group.members[mid] = self.left(old)
            else:
                group.members[mid] = self.with_assignment(old or self.new_member(mid), v)
        else:
            self.replay_own(group, rec)
