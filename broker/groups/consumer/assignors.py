"""Server-side consumer group assignors (KIP-848): "uniform" and "range" (`group.consumer.assignors`).

Both take the members' subscriptions (member id -> topic ids), the subscribed topics' partition counts and the
previous target assignment, and return a partition set for every member; every subscribed partition goes to
exactly one member. Deterministic: the same input always gives the same output.

uniform (Kafka's default): balanced (member loads differ by at most one when all members subscribe to the same
topics; otherwise as close as the subscriptions allow) and sticky (a member keeps what it had when that does
not break the balance), so rebalances move as few partitions as possible.

range: per topic, the subscribed members (ordered by instance id, else member id) get contiguous ranges, the
first ones one partition more when it does not divide evenly; members subscribed to the same co-partitioned
topics get the same partition numbers of each (for joins).
"""

from __future__ import annotations

import heapq
from collections.abc import Mapping, Set
from uuid import UUID

TopicPartition = tuple[UUID, int]
Assignment = dict[UUID, frozenset[int]]


def _key(tp: TopicPartition) -> tuple[str, int]:
    return (str(tp[0]), tp[1])


def _as_assignment(owned: Mapping[str, set[TopicPartition]], members: list[str]) -> dict[str, Assignment]:
    out: dict[str, Assignment] = {}
    for m in members:
        by_topic: dict[UUID, set[int]] = {}
        for t, p in owned.get(m, ()):
            by_topic.setdefault(t, set()).add(p)
        out[m] = {t: frozenset(ps) for t, ps in by_topic.items()}
    return out


class UniformAssignor:
    """Work grows with partitions plus members per topic, not with their product: who may take a partition is
    known per topic (a list and a set shared by its partitions), the least loaded of them is found with a lazy
    heap per topic, and the balancing pass finds each topic's least loaded member once. A group of a thousand
    members on a thousand partitions is assigned in milliseconds, not in the hundreds that a scan of every member
    for every partition took while the event loop waited."""

    name = "uniform"

    def assign(self, subscriptions: Mapping[str, Set[UUID]], partitions: Mapping[UUID, int],
               current: Mapping[str, Assignment], instance_ids: Mapping[str, str | None] | None = None
               ) -> dict[str, Assignment]:
        members = sorted(subscriptions)
        if not members:
            return {}
        # topic -> the members subscribed to it, in member order (and as a set for membership tests)
        eligible: dict[UUID, list[str]] = {}
        for t in partitions:
            subscribers = [m for m in members if t in subscriptions[m]]
            if subscribers:
                eligible[t] = subscribers
        eligible_sets = {t: frozenset(ms) for t, ms in eligible.items()}
        all_parts = sorted(((t, p) for t in eligible for p in range(partitions[t])), key=_key)
        valid = set(all_parts)
        owned: dict[str, set[TopicPartition]] = {m: set() for m in members}
        owner: dict[TopicPartition, str] = {}
        # Quota for the homogeneous case; with heterogeneous subscriptions the balancing pass below evens out.
        quota, extra = divmod(len(all_parts), len(members))

        # 1. Sticky: keep previous partitions that are still valid, within the quota.
        for m in members:
            kept = sorted((tp for t, ps in current.get(m, {}).items() if m in eligible_sets.get(t, ())
                           for tp in ((t, p) for p in ps) if tp in valid and tp not in owner), key=_key)
            limit = quota + 1 if extra > 0 else quota
            for tp in kept[:limit]:
                owned[m].add(tp)
                owner[tp] = m
            if len(owned[m]) > quota:
                extra -= 1
        # 2. Give every unowned partition to the least loaded eligible member (ties: the smallest member id).
        # Per topic, a heap of (load, member) whose entries may be stale (loads only grow here): a popped entry
        # whose load is out of date goes back with the current one, so the top is the true minimum.
        heaps: dict[UUID, list[tuple[int, str]]] = {}
        for tp in all_parts:
            if tp in owner:
                continue
            heap = heaps.get(tp[0])
            if heap is None:
                heap = heaps[tp[0]] = [(len(owned[m]), m) for m in eligible[tp[0]]]
                heapq.heapify(heap)
            while True:
                load, m = heap[0]
                if load == len(owned[m]):
                    break
                heapq.heapreplace(heap, (len(owned[m]), m))
            owned[m].add(tp)
            owner[tp] = m
            heapq.heapreplace(heap, (load + 1, m))
        # 3. Balance: move partitions from the most to the least loaded member that may take them.
        for _ in range(len(all_parts) * 2 + 1):
            moved = False
            least: dict[UUID, str] = {}  # topic -> its least loaded member; loads stand still until a move
            for src in sorted(members, key=lambda x: (-len(owned[x]), x)):
                candidates = sorted(owned[src], key=_key)
                for tp in candidates:
                    dst = least.get(tp[0])
                    if dst is None:
                        dst = least[tp[0]] = min(eligible[tp[0]], key=lambda x: (len(owned[x]), x))
                    if len(owned[src]) - len(owned[dst]) > 1:
                        owned[src].remove(tp)
                        owned[dst].add(tp)
                        owner[tp] = dst
                        moved = True
                        break
                if moved:
                    break
            if not moved:
                break
        return _as_assignment(owned, members)


class RangeAssignor:
    name = "range"

    def assign(self, subscriptions: Mapping[str, Set[UUID]], partitions: Mapping[UUID, int],
               current: Mapping[str, Assignment], instance_ids: Mapping[str, str | None] | None = None
               ) -> dict[str, Assignment]:
        instance_ids = instance_ids or {}
        members = sorted(subscriptions)
        owned: dict[str, set[TopicPartition]] = {m: set() for m in members}
        for topic in sorted(partitions, key=str):
            subscribers = sorted((m for m in members if topic in subscriptions[m]),
                                 key=lambda m: (instance_ids.get(m) is None, instance_ids.get(m) or m))
            if not subscribers:
                continue
            quota, extra = divmod(partitions[topic], len(subscribers))
            start = 0
            for i, m in enumerate(subscribers):
                size = quota + (1 if i < extra else 0)
                owned[m] |= {(topic, p) for p in range(start, start + size)}
                start += size
        return _as_assignment(owned, members)


ASSIGNORS = {a.name: a for a in (UniformAssignor(), RangeAssignor())}
