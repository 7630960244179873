"""Consumer group state (KIP-848): the group, its members, target assignment and resolved regular expressions.

Plain values changed only by replaying ConsumerGroup* records (`broker.groups.consumer.records.apply`), so what the
coordinator builds while serving heartbeats and what it rebuilds from `__consumer_offsets` are the same.
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from collections.abc import Collection
from dataclasses import dataclass, field
from enum import Enum, IntEnum
from typing import Any
from uuid import UUID

from broker.groups.result import GroupError
from protocol.errors import ErrorCode

# topic id -> partitions
Assignment = dict[UUID, frozenset[int]]

LEAVE_GROUP_MEMBER_EPOCH = -1
LEAVE_GROUP_STATIC_MEMBER_EPOCH = -2
JOIN_GROUP_MEMBER_EPOCH = 0


class ConsumerGroupState(Enum):
    EMPTY = "Empty"
    ASSIGNING = "Assigning"
    RECONCILING = "Reconciling"
    STABLE = "Stable"
    DEAD = "Dead"


class MemberState(IntEnum):
    """Kafka's MemberState byte (ConsumerGroupCurrentMemberAssignmentValue.State)."""

    STABLE = 0
    UNREVOKED_PARTITIONS = 1
    UNRELEASED_PARTITIONS = 2
    UNKNOWN = 127


@dataclass(frozen=True)
class ClassicMemberMetadata:
    """A member that speaks the classic protocol (JoinGroup/SyncGroup) inside a consumer group."""

    session_timeout_ms: int
    protocols: tuple[tuple[str, bytes], ...]


@dataclass(frozen=True)
class ConsumerMember:
    member_id: str
    instance_id: str | None = None
    rack_id: str | None = None
    client_id: str = ""
    client_host: str = ""
    subscribed_topic_names: frozenset[str] = frozenset()
    subscribed_topic_regex: str | None = None
    server_assignor: str | None = None
    rebalance_timeout_ms: int = -1
    classic: ClassicMemberMetadata | None = None
    member_epoch: int = 0
    previous_member_epoch: int = 0
    state: int = MemberState.STABLE
    assigned_partitions: Assignment = field(default_factory=dict)
    partitions_pending_revocation: Assignment = field(default_factory=dict)

    @property
    def uses_classic_protocol(self) -> bool:
        return self.classic is not None

    def same_metadata(self, other: ConsumerMember) -> bool:
        """Equal in what ConsumerGroupMemberMetadataValue persists."""
        return (self.instance_id, self.rack_id, self.client_id, self.client_host, self.subscribed_topic_names,
                self.subscribed_topic_regex, self.server_assignor, self.rebalance_timeout_ms, self.classic) == (
            other.instance_id, other.rack_id, other.client_id, other.client_host, other.subscribed_topic_names,
            other.subscribed_topic_regex, other.server_assignor, other.rebalance_timeout_ms, other.classic)

    def with_epoch(self, epoch: int) -> ConsumerMember:
        return dataclasses.replace(self, previous_member_epoch=self.member_epoch, member_epoch=epoch)

    def reconciled_to(self, epoch: int) -> bool:
        return self.state == MemberState.STABLE and self.member_epoch == epoch


@dataclass(frozen=True)
class ResolvedRegex:
    topics: frozenset[str]
    version: int
    timestamp_ms: int


@dataclass
class ConsumerGroup:
    group_id: str
    # A new group starts at epoch 1 (Kafka 4.4's ModernGroup), so its first member joins at epoch 2.
    group_epoch: int = 1
    metadata_hash: int = 0
    assignment_epoch: int = 0
    members: dict[str, ConsumerMember] = field(default_factory=dict)
    target_assignment: dict[str, Assignment] = field(default_factory=dict)
    resolved_regexes: dict[str, ResolvedRegex] = field(default_factory=dict)

    # ------------------------------------------------------------------------------------------ queries

    def state(self) -> ConsumerGroupState:
        if not self.members:
            return ConsumerGroupState.EMPTY
        if self.group_epoch > self.assignment_epoch:
            return ConsumerGroupState.ASSIGNING
        if any(not m.reconciled_to(self.assignment_epoch) for m in self.members.values()
               if m.member_epoch != LEAVE_GROUP_STATIC_MEMBER_EPOCH):
            return ConsumerGroupState.RECONCILING
        return ConsumerGroupState.STABLE

    def static_member(self, instance_id: str | None) -> ConsumerMember | None:
        if instance_id is None:
            return None
        return next((m for m in self.members.values() if m.instance_id == instance_id), None)

    def known_static_member(self, instance_id: str, member_id: str, unknown: str | None = None) -> ConsumerMember:
        """The member holding `instance_id`, which must be `member_id` (Kafka's throwIfStaticMemberIsUnknown and
        throwIfInstanceIdIsFenced); `unknown` replaces the message of the first error."""
        member = self.static_member(instance_id)
        if member is None:
            raise GroupError(ErrorCode.UNKNOWN_MEMBER_ID, unknown or f"Instance id {instance_id} is unknown.")
        if member.member_id != member_id:
            raise GroupError(ErrorCode.FENCED_INSTANCE_ID,
                             f"Static member {member_id} with instance id {instance_id} was fenced by member "
                             f"{member.member_id}.")
        return member

    def subscribed_regexes(self) -> Counter[str]:
        return Counter(m.subscribed_topic_regex for m in self.members.values() if m.subscribed_topic_regex)

    def subscribed_topic_names(self) -> set[str]:
        """Every topic a member subscribes to, by name or through a resolved regular expression."""
        names: set[str] = set()
        for m in self.members.values():
            names |= m.subscribed_topic_names
            if m.subscribed_topic_regex and (r := self.resolved_regexes.get(m.subscribed_topic_regex)):
                names |= r.topics
        return names

    def member_topics(self, member: ConsumerMember) -> frozenset[str]:
        """Topic names the member subscribes to (names plus its resolved regular expression)."""
        names = member.subscribed_topic_names
        if member.subscribed_topic_regex and (r := self.resolved_regexes.get(member.subscribed_topic_regex)):
            names = names | r.topics
        return names

    def partition_owner_epochs(self) -> dict[tuple[UUID, int], int]:
        """(topic id, partition) -> epoch of the member holding it (assigned or pending revocation)."""
        out: dict[tuple[UUID, int], int] = {}
        for m in self.members.values():
            for a in (m.assigned_partitions, m.partitions_pending_revocation):
                for t, ps in a.items():
                    for p in ps:
                        out[(t, p)] = m.member_epoch
        return out

    def all_classic_except(self, leaving: Collection[str]) -> bool:
        """Every member but the `leaving` ones (at least one remains) speaks the classic protocol, and one of the
        leaving members (if any) the consumer protocol: what a downgrade to a classic group needs."""
        remaining = [m for mid, m in self.members.items() if mid not in leaving]
        if not remaining or not all(m.uses_classic_protocol for m in remaining):
            return False
        gone = [self.members[mid] for mid in leaving if mid in self.members]
        return not gone or any(not m.uses_classic_protocol for m in gone)

    def waiting_on_unreleased_partition(self, member: ConsumerMember) -> bool:
        """A member in UNRELEASED_PARTITIONS whose target still has a partition another member holds."""
        if member.state != MemberState.UNRELEASED_PARTITIONS:
            return False
        holders = self.partition_owner_epochs()
        for tid, ps in self.target_assignment.get(member.member_id, {}).items():
            have = member.assigned_partitions.get(tid, frozenset())
            if any(p not in have and (tid, p) in holders for p in ps):
                return True
        return False

    def supports_classic_protocols(self, protocol_type: str, names: set[str]) -> bool:
        """A classic member may join if its protocol type is the consumer one and one of its protocols is
        supported by every classic member already in the group."""
        if protocol_type != "consumer" or not names:
            return False
        classic = [m.classic for m in self.members.values() if m.classic is not None]
        return any(all(name in {n for n, _ in c.protocols} for c in classic) for name in names)

    def snapshot(self) -> dict[str, Any]:
        def assignment(a: Assignment) -> dict[str, list[int]]:
            return {str(t): sorted(ps) for t, ps in sorted(a.items(), key=lambda kv: str(kv[0])) if ps}

        return {
            "group_epoch": self.group_epoch, "metadata_hash": self.metadata_hash,
            "assignment_epoch": self.assignment_epoch,
            "members": {mid: {
                "instance_id": m.instance_id, "rack_id": m.rack_id, "client_id": m.client_id,
                "client_host": m.client_host, "topics": sorted(m.subscribed_topic_names),
                "regex": m.subscribed_topic_regex, "assignor": m.server_assignor,
                "rebalance_timeout_ms": m.rebalance_timeout_ms, "classic": m.classic,
                "epoch": m.member_epoch, "previous_epoch": m.previous_member_epoch, "state": int(m.state),
                "assigned": assignment(m.assigned_partitions),
                "revoking": assignment(m.partitions_pending_revocation)}
                for mid, m in sorted(self.members.items())},
            "target_assignment": {mid: assignment(a) for mid, a in sorted(self.target_assignment.items())},
            "regexes": {r: (sorted(v.topics), v.version, v.timestamp_ms) for r, v in sorted(self.resolved_regexes.items())},
        }
