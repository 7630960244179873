"""Group consumers for integration tests: confluent-kafka Consumers in threads that record what they read and
what they committed, so a test can prove nothing was lost and duplicates only came from uncommitted records."""

from __future__ import annotations

import threading
import time
from collections import defaultdict

from confluent_kafka import Consumer, KafkaException, TopicPartition


class Member(threading.Thread):
    """One group member: polls, records (partition, offset), commits every `commit_every` records (and on
    revocation and close) with explicit offsets, and remembers which commits the broker accepted."""

    def __init__(self, name: str, bootstrap: str, group: str, topic: str, protocol: str, *,
                 commit_every: int = 25, extra: dict | None = None) -> None:
        super().__init__(name=name, daemon=True)
        self.topic = topic
        conf = {"bootstrap.servers": bootstrap, "group.id": group, "group.protocol": protocol,
                "auto.offset.reset": "earliest", "enable.auto.commit": False, "client.id": name,
                **(extra or {})}
        if protocol == "classic":
            conf.setdefault("session.timeout.ms", 10_000)
            conf.setdefault("heartbeat.interval.ms", 500)
        self.consumer = Consumer(conf)
        self.commit_every = commit_every
        self.consumed: list[tuple[int, int]] = []
        self.read_at: list[float] = []  # monotonic time of each consumed record
        self.commits: list[tuple[float, int, int]] = []  # (time accepted, partition, offset)
        self.assigned: set[int] = set()
        self.assignments = 0
        self.events: list[tuple[float, str, tuple[int, ...]]] = []  # (monotonic time, assign/revoke, partitions)
        self.errors: list[str] = []
        self._pending: dict[int, int] = {}
        self._halt = threading.Event()
        self._lock = threading.Lock()

    def _commit(self, partitions: set[int] | None = None) -> None:
        pending = {p: o for p, o in self._pending.items() if partitions is None or p in partitions}
        if not pending:
            return
        offsets = [TopicPartition(self.topic, p, o) for p, o in pending.items()]
        try:
            result = self.consumer.commit(offsets=offsets, asynchronous=False)
        except KafkaException as err:  # a rebalance may refuse it: those records stay uncommitted
            self.errors.append(str(err))
            return
        now = time.monotonic()
        with self._lock:
            for tp in result or ():
                if tp.error is None:
                    self.commits.append((now, tp.partition, tp.offset))
                    if self._pending.get(tp.partition) == tp.offset:
                        del self._pending[tp.partition]

    def _on_assign(self, consumer, partitions) -> None:
        with self._lock:
            self.assigned |= {tp.partition for tp in partitions}
            self.assignments += 1
            self.events.append((time.monotonic(), "assign", tuple(sorted(tp.partition for tp in partitions))))

    def _on_revoke(self, consumer, partitions) -> None:
        revoked = {tp.partition for tp in partitions}
        self._commit(revoked)
        with self._lock:
            self.assigned -= revoked
            self.events.append((time.monotonic(), "revoke", tuple(sorted(revoked))))
            for p in revoked:
                self._pending.pop(p, None)

    def run(self) -> None:
        self.consumer.subscribe([self.topic], on_assign=self._on_assign, on_revoke=self._on_revoke)
        since_commit = 0
        while not self._halt.is_set():
            msg = self.consumer.poll(0.1)
            if msg is None:
                if since_commit:
                    self._commit()
                    since_commit = 0
                continue
            if msg.error() is not None:
                self.errors.append(str(msg.error()))
                continue
            with self._lock:
                self.consumed.append((msg.partition(), msg.offset()))
                self.read_at.append(time.monotonic())
                self._pending[msg.partition()] = msg.offset() + 1
            since_commit += 1
            if since_commit >= self.commit_every:
                self._commit()
                since_commit = 0
        self._commit()
        self.consumer.close()  # leaves the group

    def stop(self) -> None:
        self._halt.set()
        self.join(30)
        assert not self.is_alive(), f"{self.name} did not stop"

    def committed(self) -> dict[int, int]:
        """partition -> the last offset the broker accepted from this member."""
        with self._lock:
            return {p: o for _, p, o in self.commits}

    def count(self) -> int:
        with self._lock:
            return len(self.consumed)


def check_delivery(produced: set[tuple[int, int]], members: list[Member]) -> tuple[int, int]:
    """Every produced record was consumed, and no record was read again after a commit past it had been
    accepted: duplicates only come from the uncommitted window. Returns (records, duplicates)."""
    reads: dict[tuple[int, int], list[float]] = defaultdict(list)
    for m in members:
        for rec, at in zip(m.consumed, m.read_at, strict=True):
            reads[rec].append(at)
    missing = produced - set(reads)
    assert not missing, f"{len(missing)} records never consumed, e.g. {sorted(missing)[:5]}"
    # partition -> (time, offset) of every accepted commit, in time order
    commits = defaultdict(list)
    for m in members:
        for at, p, o in m.commits:
            commits[p].append((at, o))
    for p in commits:
        commits[p].sort()
    duplicates = 0
    for (p, o), times in reads.items():
        if len(times) < 2:
            continue
        duplicates += len(times) - 1
        first_commit_past = next((at for at, committed in commits[p] if committed > o), None)
        if first_commit_past is not None:
            late = [t for t in times if t > first_commit_past]
            assert not late, f"record {p}:{o} read again after a commit past it was accepted"
    return len(reads), duplicates


PARTITIONS = 6  # of the topic the membership scenarios use


def covered(members: list[Member]) -> bool:
    """Every partition of the scenario topic is assigned to exactly one member."""
    owned = [p for m in members for p in m.assigned]
    return sorted(owned) == list(range(PARTITIONS))


def consumed_all(members: list[Member], wanted: set[tuple[int, int]]) -> bool:
    seen = {rec for m in members for rec in list(m.consumed)}
    return wanted <= seen
