"""A streams group's state (Kafka's StreamsGroup and StreamsGroupMember), sans-IO.

Tasks are named by subtopology id and partition. A member's assigned active tasks carry the assignment epoch
each was given in (Kafka's TasksTupleWithEpochs); standby and warm-up tasks are plain sets. The group keeps its
topology (as the first member sent it, a StreamsGroupTopology record), its configured topology (soft state:
partition counts and internal topics, recomputed from the topology and the broker's topics), the target
assignment per member, and which process currently owns each task (for the reconciliation).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from enum import Enum, IntEnum
from typing import Any

from broker.groups.streams.topology import ConfiguredTopology, StreamsTopology

# subtopology id -> partitions
Tasks = dict[str, frozenset[int]]
# subtopology id -> partition -> the assignment epoch the active task was given in
ActiveTasks = dict[str, dict[int, int]]

LEAVE_GROUP_MEMBER_EPOCH = -1
LEAVE_GROUP_STATIC_MEMBER_EPOCH = -2


class MemberState(IntEnum):
    """A member's reconciliation state (the byte Kafka writes in StreamsGroupCurrentMemberAssignment)."""

    STABLE = 1
    UNREVOKED_TASKS = 2
    UNRELEASED_TASKS = 3
    UNKNOWN = 127


class StreamsGroupState(Enum):
    EMPTY = "Empty"
    NOT_READY = "NotReady"
    ASSIGNING = "Assigning"
    RECONCILING = "Reconciling"
    STABLE = "Stable"
    DEAD = "Dead"


@dataclass(frozen=True)
class TasksTuple:
    """Active, standby and warm-up tasks of one member in a target assignment."""

    active: Tasks = field(default_factory=dict)
    standby: Tasks = field(default_factory=dict)
    warmup: Tasks = field(default_factory=dict)

    def is_empty(self) -> bool:
        return not (self.active or self.standby or self.warmup)


EMPTY_TASKS = TasksTuple()


@dataclass(frozen=True)
class AssignedTasks:
    """Tasks a member owns (or must revoke): active ones with their assignment epochs."""

    active: ActiveTasks = field(default_factory=dict)
    standby: Tasks = field(default_factory=dict)
    warmup: Tasks = field(default_factory=dict)

    def is_empty(self) -> bool:
        return not (self.active or self.standby or self.warmup)

    def active_sets(self) -> Tasks:
        return {s: frozenset(p) for s, p in self.active.items()}

    def same_tasks(self, other: TasksTuple) -> bool:
        return self.active_sets() == other.active and self.standby == other.standby \
            and self.warmup == other.warmup


EMPTY_ASSIGNED = AssignedTasks()


@dataclass(frozen=True)
class Endpoint:
    host: str
    port: int


@dataclass(frozen=True)
class StreamsMember:
    member_id: str
    member_epoch: int = 0
    previous_member_epoch: int = 0
    state: MemberState = MemberState.STABLE
    instance_id: str | None = None
    rack_id: str | None = None
    client_id: str = ""
    client_host: str = ""
    rebalance_timeout_ms: int = -1
    topology_epoch: int = -1
    process_id: str = ""
    user_endpoint: Endpoint | None = None
    client_tags: tuple[tuple[str, str], ...] = ()
    assigned: AssignedTasks = EMPTY_ASSIGNED
    pending_revocation: AssignedTasks = EMPTY_ASSIGNED

    def metadata(self) -> tuple[Any, ...]:
        """What StreamsGroupMemberMetadata holds (a change of it is written)."""
        return (self.instance_id, self.rack_id, self.client_id, self.client_host, self.rebalance_timeout_ms,
                self.topology_epoch, self.process_id, self.user_endpoint, self.client_tags)

    def is_reconciled_to(self, assignment_epoch: int) -> bool:
        return self.state is MemberState.STABLE and self.member_epoch == assignment_epoch

    def with_epoch(self, epoch: int) -> StreamsMember:
        return replace(self, previous_member_epoch=self.member_epoch, member_epoch=epoch)


@dataclass
class StreamsGroup:
    group_id: str
    group_epoch: int = 1  # a new streams group starts at epoch 1 (Kafka's StreamsGroup)
    metadata_hash: int = 0
    validated_topology_epoch: int = -1
    last_assignment_configs: dict[str, str] = field(default_factory=dict)
    topology: StreamsTopology | None = None
    configured: ConfiguredTopology | None = None  # soft: recomputed when the topology or topics change
    configured_for: tuple[int, int] | None = None  # (topics version, topology epoch) it was computed at
    members: dict[str, StreamsMember] = field(default_factory=dict)
    assignment_epoch: int = 1  # Kafka's TargetAssignmentMetadata.INITIAL
    assignment_timestamp: int = 0
    target: dict[str, TasksTuple] = field(default_factory=dict)
    endpoint_information_epoch: int = 0
    shutdown_request_member_id: str | None = None
    # soft: which process owns each task now (Kafka's currentActiveTaskToProcessId and friends)
    active_owner: dict[tuple[str, int], str] = field(default_factory=dict)
    standby_owners: dict[tuple[str, int], set[str]] = field(default_factory=dict)
    warmup_owners: dict[tuple[str, int], set[str]] = field(default_factory=dict)

    def static_member(self, instance_id: str | None) -> StreamsMember | None:
        if instance_id is None:
            return None
        for m in self.members.values():
            if m.instance_id == instance_id:
                return m
        return None

    def state(self) -> StreamsGroupState:
        if not self.members:
            return StreamsGroupState.EMPTY
        if self.topology is None or self.topology.epoch != self.validated_topology_epoch:
            return StreamsGroupState.NOT_READY
        if self.group_epoch > self.assignment_epoch:
            return StreamsGroupState.ASSIGNING
        if any(not m.is_reconciled_to(self.assignment_epoch) for m in self.members.values()):
            return StreamsGroupState.RECONCILING
        return StreamsGroupState.STABLE

    # --- task ownership ------------------------------------------------------------------------------------
    def put_member(self, member: StreamsMember) -> None:
        old = self.members.get(member.member_id)
        if old is not None:
            self._drop_owner(old)
        self.members[member.member_id] = member
        self._add_owner(member)

    def remove_member(self, member_id: str) -> None:
        old = self.members.pop(member_id, None)
        if old is not None:
            self._drop_owner(old)
        if not self.members:
            self.shutdown_request_member_id = None

    def _add_owner(self, m: StreamsMember) -> None:
        for tasks in (m.assigned, m.pending_revocation):
            for sub, parts in tasks.active.items():
                for p in parts:
                    self.active_owner[(sub, p)] = m.process_id
            for sub, ps in tasks.standby.items():
                for p in ps:
                    self.standby_owners.setdefault((sub, p), set()).add(m.process_id)
            for sub, ps in tasks.warmup.items():
                for p in ps:
                    self.warmup_owners.setdefault((sub, p), set()).add(m.process_id)

    def _drop_owner(self, m: StreamsMember) -> None:
        for tasks in (m.assigned, m.pending_revocation):
            for sub, parts in tasks.active.items():
                for p in parts:
                    if self.active_owner.get((sub, p)) == m.process_id:
                        del self.active_owner[(sub, p)]
            for owners, tset in ((self.standby_owners, tasks.standby), (self.warmup_owners, tasks.warmup)):
                for sub, ps in tset.items():
                    for p in ps:
                        procs = owners.get((sub, p))
                        if procs is not None:
                            procs.discard(m.process_id)
                            if not procs:
                                del owners[(sub, p)]
