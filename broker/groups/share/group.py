"""Share-group state: the group, its members and its share-partition initialization metadata.

These are plain values. They change only by replaying coordinator records (`broker.groups.share.records.apply`), so the
state built while serving heartbeats and the state rebuilt from `__consumer_offsets` are the same by
construction. Soft state (session deadlines, when an initialization was requested) lives in the service.
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import Enum, IntEnum
from typing import Any
from uuid import UUID

# topic id -> partitions
Assignment = dict[UUID, frozenset[int]]

LEAVE_GROUP_MEMBER_EPOCH = -1
JOIN_GROUP_MEMBER_EPOCH = 0


class ShareGroupState(Enum):
    EMPTY = "Empty"
    STABLE = "Stable"
    DEAD = "Dead"  # a group that does not exist (ListGroups/DescribeGroups wording)


class MemberState(IntEnum):
    """Kafka's MemberState byte, persisted in ShareGroupCurrentMemberAssignmentValue.State."""

    STABLE = 0
    UNKNOWN = 127


@dataclass(frozen=True)
class ShareMember:
    member_id: str
    member_epoch: int = 0
    previous_member_epoch: int = 0
    state: int = MemberState.STABLE
    rack_id: str | None = None
    client_id: str = ""
    client_host: str = ""
    subscribed_topic_names: frozenset[str] = frozenset()
    assigned_partitions: Assignment = field(default_factory=dict)

    def with_epoch(self, epoch: int) -> ShareMember:
        """Move to `epoch`, remembering the old one (a heartbeat with the previous epoch is still accepted)."""
        return dataclasses.replace(self, previous_member_epoch=self.member_epoch, member_epoch=epoch)

    def same_metadata(self, other: ShareMember) -> bool:
        """Equal in what ShareGroupMemberMetadataValue persists."""
        return (self.rack_id, self.client_id, self.client_host, self.subscribed_topic_names) == (
            other.rack_id, other.client_id, other.client_host, other.subscribed_topic_names)


@dataclass
class TopicPartitions:
    """A topic's entry in ShareGroupStatePartitionMetadata (the name is kept for tools and describe)."""

    name: str
    partitions: frozenset[int]


@dataclass
class StatePartitionMetadata:
    """Which share-partitions of a group have durable state on the share coordinator."""

    initializing: dict[UUID, TopicPartitions] = field(default_factory=dict)
    initialized: dict[UUID, TopicPartitions] = field(default_factory=dict)
    deleting: dict[UUID, str] = field(default_factory=dict)


@dataclass
class ShareGroup:
    group_id: str
    # A new group starts at epoch 1, so its first member's heartbeat moves it to 2 (Kafka's ModernGroup).
    group_epoch: int = 1
    metadata_hash: int = 0
    assignment_epoch: int = 1  # Kafka describes a group no member has joined yet at epochs (1, 1)
    assignment_timestamp: int = 0  # when the target assignment was last computed (ms; 0: never)
    members: dict[str, ShareMember] = field(default_factory=dict)
    target_assignment: dict[str, Assignment] = field(default_factory=dict)
    partition_metadata: StatePartitionMetadata | None = None

    @property
    def state(self) -> ShareGroupState:
        return ShareGroupState.STABLE if self.members else ShareGroupState.EMPTY

    def subscribed_topic_names(self) -> Counter[str]:
        """Topic name -> number of members subscribed to it."""
        return Counter(name for m in self.members.values() for name in m.subscribed_topic_names)

    def initialized_partitions(self) -> dict[UUID, frozenset[int]]:
        md = self.partition_metadata
        return {t: tp.partitions for t, tp in md.initialized.items()} if md else {}

    def snapshot(self) -> dict[str, Any]:
        """Plain-data view of the persisted state (replay comparisons, debugging, tools)."""

        def assignment(a: Assignment) -> dict[str, list[int]]:
            return {str(t): sorted(ps) for t, ps in sorted(a.items(), key=lambda kv: str(kv[0])) if ps}

        md = self.partition_metadata
        return {
            "group_id": self.group_id,
            "group_epoch": self.group_epoch,
            "metadata_hash": self.metadata_hash,
            "assignment_epoch": self.assignment_epoch,
            "state": self.state.value,
            "members": {
                mid: {
                    "member_epoch": m.member_epoch,
                    "previous_member_epoch": m.previous_member_epoch,
                    "state": int(m.state),
                    "rack_id": m.rack_id,
                    "client_id": m.client_id,
                    "client_host": m.client_host,
                    "subscribed_topic_names": sorted(m.subscribed_topic_names),
                    "assigned_partitions": assignment(m.assigned_partitions),
                }
                for mid, m in sorted(self.members.items())
            },
            "target_assignment": {mid: assignment(a) for mid, a in sorted(self.target_assignment.items())},
            "partition_metadata": None if md is None else {
                kind: {str(t): (tp.name, sorted(tp.partitions)) for t, tp in sorted(
                    getattr(md, kind).items(), key=lambda kv: str(kv[0]))}
                for kind in ("initializing", "initialized")
            } | {"deleting": {str(t): n for t, n in sorted(md.deleting.items(), key=lambda kv: str(kv[0]))}},
        }


def without_partitions(d: Mapping[UUID, TopicPartitions], tid: UUID, parts: frozenset[int]
                       ) -> dict[UUID, TopicPartitions]:
    """A copy of `d` with `parts` of topic `tid` removed (the topic too once none is left)."""
    out = dict(d)
    if tid in out:
        left = out[tid].partitions - parts
        if left:
            out[tid] = TopicPartitions(out[tid].name, left)
        else:
            del out[tid]
    return out
