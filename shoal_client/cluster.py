"""What a client knows of the cluster: its brokers, the subscribed topics, and each partition's leader with the
leader's epoch.

Kafka's clients keep the same view (org.apache.kafka.clients.Metadata): Metadata requests refresh it, and between
them the leaders that a partition error names (NOT_LEADER_OR_FOLLOWER or FENCED_LEADER_EPOCH in a ShareFetch or
ShareAcknowledge answer, with CurrentLeader and the NodeEndpoints to reach it) update it at once. A known leader
is replaced only by one of a newer leader epoch, so that a Metadata answer from a broker that has not yet heard of
an election does not undo what a newer answer said. Sans-IO: the caller sends the requests and feeds the answers.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterable
from dataclasses import dataclass

from protocol.errors import ErrorCode

# How long a Metadata answer is trusted when nothing says it is stale (Kafka's metadata.max.age.ms default).
METADATA_MAX_AGE_S = 300.0
# The least time between two refreshes (Kafka's retry.backoff.ms default), so that a dead broker is not asked
# about in a tight loop.
REFRESH_BACKOFF_S = 0.1


@dataclass(frozen=True, slots=True)
class Topic:
    name: str
    topic_id: uuid.UUID
    partitions: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class Leader:
    node: int  # -1: none known
    epoch: int  # -1: not known


NO_LEADER = Leader(-1, -1)


class ClusterMetadata:
    def __init__(self, clock=time.monotonic) -> None:
        self._clock = clock
        self.nodes: dict[int, tuple[str, int]] = {}
        self.topics_by_id: dict[uuid.UUID, Topic] = {}
        self.topics_by_name: dict[str, Topic] = {}
        self._leaders: dict[tuple[uuid.UUID, int], Leader] = {}
        self._refreshed_at: float | None = None  # the last Metadata answer
        self._attempted_at: float | None = None  # the last Metadata request, answered or not
        self._stale = True

    # ------------------------------------------------------------------ refresh
    def needs_refresh(self) -> bool:
        """A refresh is due (something said the view is stale, or it is old) and the backoff has passed."""
        now = self._clock()
        if self._attempted_at is not None and now - self._attempted_at < REFRESH_BACKOFF_S:
            return False
        return self._stale or self._refreshed_at is None or now - self._refreshed_at >= METADATA_MAX_AGE_S

    def mark_stale(self) -> None:
        self._stale = True

    def attempted(self) -> None:
        """A Metadata request is being sent (answered or not, the next waits for the backoff)."""
        self._attempted_at = self._clock()

    def update(self, resp) -> None:
        """Apply a Metadata answer (v10+: topic ids; leader epochs from v7). Brokers are replaced; a partition's
        leader only if the answer's epoch is not older than the one known."""
        self.nodes = {b.node_id: (b.host, b.port) for b in resp.brokers}
        by_id: dict[uuid.UUID, Topic] = {}
        by_name: dict[str, Topic] = {}
        leaders: dict[tuple[uuid.UUID, int], Leader] = {}
        for t in resp.topics:
            if t.error_code != ErrorCode.NONE:
                continue
            topic = Topic(t.name, t.topic_id, tuple(sorted(p.partition_index for p in t.partitions)))
            by_id[t.topic_id] = by_name[t.name] = topic
            for p in t.partitions:
                key = (t.topic_id, p.partition_index)
                answered = Leader(p.leader_id, p.get("leader_epoch", -1))
                known = self._leaders.get(key)
                if known is not None and known.node >= 0 and answered.epoch < known.epoch:
                    leaders[key] = known  # that broker has not heard of the newer election yet
                else:
                    leaders[key] = answered
        self.topics_by_id, self.topics_by_name, self._leaders = by_id, by_name, leaders
        self._refreshed_at = self._clock()
        # Still stale while some partition has no leader (an election under way): ask again after the backoff.
        self._stale = any(leader.node < 0 or leader.node not in self.nodes for leader in leaders.values())

    # ------------------------------------------------------------------ leaders
    def leader(self, topic_id: uuid.UUID, partition: int) -> int | None:
        """The partition's leader as known (None: no leader known, or not one of the brokers known)."""
        leader = self._leaders.get((topic_id, partition), NO_LEADER)
        return leader.node if leader.node >= 0 and leader.node in self.nodes else None

    def knows(self, topic_id: uuid.UUID, partition: int) -> bool:
        return (topic_id, partition) in self._leaders

    def leader_moved(self, topic_id: uuid.UUID, partition: int, leader_id: int, leader_epoch: int,
                     endpoints: Iterable = ()) -> None:
        """A partition error (NOT_LEADER_OR_FOLLOWER, FENCED_LEADER_EPOCH) named the partition's current leader:
        take it if it is newer than the one known, with the endpoints the answer gave. Without a leader in the
        answer (-1), forget the one known and refresh."""
        if endpoints:  # a new dict, not an update: the heartbeat thread reads the brokers known
            self.nodes = {**self.nodes, **{e.node_id: (e.host, e.port) for e in endpoints}}
        key = (topic_id, partition)
        if leader_id < 0 or leader_epoch < 0:
            self._leaders[key] = NO_LEADER
            self._stale = True
            return
        known = self._leaders.get(key)
        if known is None or known.node < 0 or leader_epoch > known.epoch:
            self._leaders[key] = Leader(leader_id, leader_epoch)
        if leader_id not in self.nodes:
            self._stale = True

    def forget_leader(self, topic_id: uuid.UUID, partition: int) -> None:
        """The leader known is not (or no longer) reachable or not the leader: ask Metadata again."""
        key = (topic_id, partition)
        if key in self._leaders:
            self._leaders[key] = NO_LEADER
        self._stale = True
