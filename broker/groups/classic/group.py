"""Classic group state (JoinGroup/SyncGroup protocol): the group, its members and Kafka's state rules.

Unlike consumer and share groups, a classic group's state is not rebuilt from its records while it runs: its
GroupMetadata record is a snapshot (generation, protocol, leader, members with their subscription and
assignment) written when a generation is assigned or the group empties, and read back only on load, as in
Kafka (whose classic-group writes are not replayed). Waiters for parked JoinGroup and SyncGroup responses are
opaque objects the runtime hands in; the state machine returns them with their responses.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from enum import Enum
from typing import Any

from broker.groups.consumer import protocol as consumer_protocol
from protocol.errors import ErrorCode


class ClassicState(Enum):
    EMPTY = "Empty"
    PREPARING_REBALANCE = "PreparingRebalance"
    COMPLETING_REBALANCE = "CompletingRebalance"
    STABLE = "Stable"
    DEAD = "Dead"


# target state -> states it may be entered from (Kafka's ClassicGroupState.validPreviousStates)
_VALID_PREVIOUS: dict[ClassicState, frozenset[ClassicState]] = {
    ClassicState.PREPARING_REBALANCE: frozenset({ClassicState.STABLE, ClassicState.COMPLETING_REBALANCE,
                                                 ClassicState.EMPTY}),
    ClassicState.COMPLETING_REBALANCE: frozenset({ClassicState.PREPARING_REBALANCE}),
    ClassicState.STABLE: frozenset({ClassicState.COMPLETING_REBALANCE}),
    ClassicState.EMPTY: frozenset({ClassicState.PREPARING_REBALANCE}),
    ClassicState.DEAD: frozenset(ClassicState),
}

Protocols = tuple[tuple[str, bytes], ...]  # (name, metadata) in the member's order of preference


@dataclass(eq=False)
class ClassicMember:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    session_timeout_ms: int
    protocol_type: str
    protocols: Protocols
    assignment: bytes = b""
    join_waiter: Any = None
    sync_waiter: Any = None
    is_new: bool = False

    @property
    def awaiting_join(self) -> bool:
        return self.join_waiter is not None

    @property
    def awaiting_sync(self) -> bool:
        return self.sync_waiter is not None

    def metadata(self, protocol: str | None) -> bytes:
        for name, data in self.protocols:
            if name == protocol:
                return data
        raise ValueError(f"member {self.member_id} does not support protocol {protocol}")

    def protocol_names(self) -> set[str]:
        return {name for name, _ in self.protocols}

    def matches(self, protocols: Protocols) -> bool:
        return tuple(protocols) == tuple(self.protocols)

    def vote(self, candidates: set[str]) -> str:
        for name, _ in self.protocols:
            if name in candidates:
                return name
        raise ValueError(f"member {self.member_id} supports none of {sorted(candidates)}")

    def has_satisfied_heartbeat(self) -> bool:
        # New members can expire while parked in JoinGroup; others waiting for a rebalance count as alive.
        return not self.is_new and (self.awaiting_join or self.awaiting_sync)


class ClassicGroup:
    def __init__(self, group_id: str, now_ms: int, state: ClassicState = ClassicState.EMPTY, generation_id: int = 0,
                 protocol_type: str | None = None, protocol_name: str | None = None, leader_id: str | None = None,
                 state_timestamp_ms: int | None = None) -> None:
        self.group_id = group_id
        self.state = state
        self.previous_state = state
        self.generation_id = generation_id
        self.protocol_type = protocol_type
        self.protocol_name = protocol_name
        self.leader_id = leader_id
        self.state_timestamp_ms = now_ms if state_timestamp_ms is None else state_timestamp_ms
        self.members: dict[str, ClassicMember] = {}
        self.static_members: dict[str, str] = {}  # group instance id -> member id
        self.pending_join: set[str] = set()  # dynamic members told MEMBER_ID_REQUIRED, not yet rejoined
        self.pending_sync: set[str] = set()
        self.new_member_added = False
        self.awaiting_join_count = 0
        self._protocol_votes: Counter[str] = Counter()
        self.subscribed_topics: set[str] | None = None

    # ------------------------------------------------------------------------------------------ queries

    def in_state(self, *states: ClassicState) -> bool:
        return self.state in states

    def is_empty(self) -> bool:
        return self.state is ClassicState.EMPTY

    def is_leader(self, member_id: str) -> bool:
        return self.leader_id == member_id

    def has_member(self, member_id: str) -> bool:
        return member_id in self.members

    def static_member_id(self, instance_id: str) -> str | None:
        return self.static_members.get(instance_id)

    def rebalance_timeout_ms(self) -> int:
        return max((m.rebalance_timeout_ms for m in self.members.values()), default=0)

    def has_all_members_joined(self) -> bool:
        return len(self.members) == self.awaiting_join_count and not self.pending_join

    def not_yet_rejoined(self) -> list[ClassicMember]:
        return [m for m in self.members.values() if not m.awaiting_join]

    def can_rebalance(self) -> bool:
        return self.state in _VALID_PREVIOUS[ClassicState.PREPARING_REBALANCE]

    def uses_consumer_protocol(self) -> bool:
        return self.protocol_type == consumer_protocol.PROTOCOL_TYPE

    def is_subscribed_to(self, topic: str) -> bool:
        if self.subscribed_topics is None:
            return self.uses_consumer_protocol()
        return topic in self.subscribed_topics

    # ------------------------------------------------------------------------------------------ protocols

    def _candidates(self) -> set[str]:
        return {name for name, votes in self._protocol_votes.items() if votes == len(self.members)}

    def supports_protocols(self, protocol_type: str, names: set[str]) -> bool:
        if self.state is ClassicState.EMPTY:
            return bool(protocol_type) and bool(names)
        return self.protocol_type == protocol_type and any(
            self._protocol_votes.get(n, 0) == len(self.members) for n in names)

    def select_protocol(self) -> str:
        """The protocol every member supports that most members prefer (ties: the leader's preference)."""
        if not self.members:
            raise ValueError(f"cannot select a protocol for empty group {self.group_id}")
        candidates = self._candidates()
        votes = Counter(m.vote(candidates) for m in self.members.values())
        best = max(votes.values())
        leader = self.members.get(self.leader_id or "") or next(iter(self.members.values()))
        order = [name for name, _ in leader.protocols]
        return min((name for name, n in votes.items() if n == best),
                   key=lambda name: order.index(name) if name in order else len(order))

    def compute_subscribed_topics(self) -> set[str] | None:
        """Topics the members subscribe to (consumer protocol only); None when unknown."""
        if self.protocol_type != consumer_protocol.PROTOCOL_TYPE:
            return None
        if not self.members:
            return set()
        if self.protocol_name is None:
            return None
        topics: set[str] = set()
        for m in self.members.values():
            found = consumer_protocol.subscribed_topics(m.metadata(self.protocol_name))
            if found is None:
                return None
            topics |= found
        return topics

    # ------------------------------------------------------------------------------------------ members

    def add(self, member: ClassicMember, join_waiter: Any = None) -> None:
        if member.group_instance_id is not None:
            if member.group_instance_id in self.static_members:
                raise ValueError(f"static member {member.group_instance_id} already in {self.group_id}")
            self.static_members[member.group_instance_id] = member.member_id
        if not self.members:
            self.protocol_type = member.protocol_type
        if self.protocol_type != member.protocol_type:
            raise ValueError("the group and member's protocol type must be the same")
        if self.leader_id is None:
            self.leader_id = member.member_id
        self.members[member.member_id] = member
        self._protocol_votes.update(member.protocol_names())
        member.join_waiter = join_waiter
        if member.awaiting_join:
            self.awaiting_join_count += 1
        self.pending_join.discard(member.member_id)

    def remove(self, member_id: str) -> ClassicMember | None:
        member = self.members.pop(member_id, None)
        if member is not None:
            self._protocol_votes.subtract(member.protocol_names())
            self._protocol_votes += Counter()  # drop zero counts
            if member.awaiting_join:
                self.awaiting_join_count -= 1
            if member.group_instance_id is not None:
                self.static_members.pop(member.group_instance_id, None)
        if self.leader_id == member_id:
            self.leader_id = next(iter(self.members), None)
        self.pending_join.discard(member_id)
        self.pending_sync.discard(member_id)
        return member

    def update_member(self, member: ClassicMember, protocols: Protocols, rebalance_timeout_ms: int,
                      session_timeout_ms: int, join_waiter: Any) -> None:
        self._protocol_votes.subtract(member.protocol_names())
        self._protocol_votes += Counter()
        member.protocols = tuple(protocols)
        self._protocol_votes.update(member.protocol_names())
        member.rebalance_timeout_ms = rebalance_timeout_ms
        member.session_timeout_ms = session_timeout_ms
        if join_waiter is not None and not member.awaiting_join:
            self.awaiting_join_count += 1
        elif join_waiter is None and member.awaiting_join:
            self.awaiting_join_count -= 1
        member.join_waiter = join_waiter

    def take_join_waiter(self, member: ClassicMember) -> Any:
        """Detach and return the member's parked JoinGroup waiter (None if it has none)."""
        waiter = member.join_waiter
        if waiter is not None:
            member.join_waiter = None
            self.awaiting_join_count -= 1
        return waiter

    def take_sync_waiter(self, member: ClassicMember) -> Any:
        waiter = member.sync_waiter
        member.sync_waiter = None
        return waiter

    def maybe_elect_new_joined_leader(self) -> bool:
        """Keep the leader if it rejoined, else pick a member that did; False if none did."""
        if self.leader_id is None:
            return False
        leader = self.members.get(self.leader_id)
        if leader is not None and leader.awaiting_join:
            return True
        for m in self.members.values():
            if m.awaiting_join:
                self.leader_id = m.member_id
                return True
        return False

    def replace_static_member(self, instance_id: str, old_member_id: str, new_member_id: str
                              ) -> tuple[ClassicMember, list[tuple[Any, str, dict[str, Any]]]]:
        """Give a static member a new member id (keeping everything else); returns the member and the parked
        responses of the old id, fenced."""
        old = self.members.pop(old_member_id)
        fenced: list[tuple[Any, str, dict[str, Any]]] = []
        if old.join_waiter is not None:
            self.awaiting_join_count -= 1
            fenced.append((old.join_waiter, "join", {
                "error_code": int(ErrorCode.FENCED_INSTANCE_ID), "member_id": old_member_id, "generation_id": -1, "protocol_type": None,
                "protocol_name": None, "leader": "", "skip_assignment": False, "members": []}))
        if old.sync_waiter is not None:
            fenced.append((old.sync_waiter, "sync", {"error_code": int(ErrorCode.FENCED_INSTANCE_ID), "assignment": b"", "protocol_type": None,
                                                     "protocol_name": None}))
        new = ClassicMember(new_member_id, old.group_instance_id, old.client_id, old.client_host,
                            old.rebalance_timeout_ms, old.session_timeout_ms, old.protocol_type, old.protocols,
                            old.assignment)
        self.members[new_member_id] = new
        if self.leader_id == old_member_id:
            self.leader_id = new_member_id
        self.static_members[instance_id] = new_member_id
        self.pending_sync.discard(old_member_id)
        return new, fenced

    # ------------------------------------------------------------------------------------------ transitions

    def transition(self, target: ClassicState, now_ms: int) -> None:
        if self.state not in _VALID_PREVIOUS[target]:
            raise ValueError(f"group {self.group_id} cannot move from {self.state.value} to {target.value}")
        self.previous_state = self.state
        self.state = target
        self.state_timestamp_ms = now_ms

    def init_next_generation(self, now_ms: int) -> None:
        self.generation_id += 1
        if self.members:
            self.protocol_name = self.select_protocol()
            self.subscribed_topics = self.compute_subscribed_topics()
            self.transition(ClassicState.COMPLETING_REBALANCE, now_ms)
        else:
            self.protocol_name = None
            self.subscribed_topics = self.compute_subscribed_topics()
            self.transition(ClassicState.EMPTY, now_ms)
        self.pending_sync.clear()

    def current_members(self) -> list[dict[str, Any]]:
        """JoinGroup response members (the leader's view): id, instance id, metadata of the chosen protocol."""
        return [{"member_id": m.member_id, "group_instance_id": m.group_instance_id,
                 "metadata": m.metadata(self.protocol_name)} for m in self.members.values()]

    def assignments(self) -> dict[str, bytes]:
        return {mid: m.assignment for mid, m in self.members.items()}
