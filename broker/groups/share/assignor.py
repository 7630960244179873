"""The simple server-side share-group assignor ("simple", KIP-932).

Unlike a consumer-group assignor, a share-group assignor may give one partition to several members: share
consumers cooperate on a partition through record locks. The rules, in priority order (as in Kafka 4.1's
SimpleHomogeneousAssignmentBuilder, written independently):

1. Coverage: every assignable partition that some member subscribes to gets at least one member.
2. Balance: with all members subscribed to the same topics, member loads differ by at most one when there are
   at least as many partitions as members; with more members than partitions every partition is shared by
   ceil(M/P) members (as Kafka 4.4's desiredSharing), every member having one or two.
3. Stickiness: a member keeps what it had when that does not break 1 or 2.

Deterministic: members and partitions are visited in sorted order, so the same input always gives the same
output (replay and tests rely on it). Heterogeneous subscriptions get coverage and a best-effort balance.
"""

from __future__ import annotations

import heapq
from collections.abc import Mapping, Set
from uuid import UUID

TopicPartition = tuple[UUID, int]
# member id -> {topic id -> partitions}
Assignment = Mapping[UUID, frozenset[int]]

NAME = "simple"


def _key(tp: TopicPartition) -> tuple[str, int]:
    return (str(tp[0]), tp[1])


class SimpleShareAssignor:
    name = NAME

    def assign(
        self,
        subscriptions: Mapping[str, Set[UUID]],
        partitions: Mapping[UUID, Set[int]],
        current: Mapping[str, Assignment],
    ) -> dict[str, dict[UUID, frozenset[int]]]:
        """Compute the target assignment.

        subscriptions: member id -> topic ids it subscribes to (unknown topics already dropped).
        partitions: topic id -> assignable partitions (initialized share-partitions of existing topics).
        current: the previous target assignment, used for stickiness only.
        Returns an entry for every member (possibly empty).
        """
        members = sorted(subscriptions)
        # Who may take a partition is known per topic (not per partition), and the least loaded or least shared
        # candidates come from lazy heaps: the work grows with partitions plus members, not with their product
        # (200 members on 1 000 partitions took 85 ms a heartbeat while the event loop waited).
        eligible: dict[UUID, list[str]] = {}
        for t, ps in partitions.items():
            if not ps:
                continue
            subscribers = [m for m in members if t in subscriptions[m]]
            if subscribers:
                eligible[t] = subscribers
        targets = sorted(((t, p) for t, ps in partitions.items() if t in eligible for p in ps), key=_key)
        index = {tp: i for i, tp in enumerate(targets)}
        owners: dict[TopicPartition, list[str]] = {tp: [] for tp in targets}
        load = dict.fromkeys(members, 0)
        previous = {
            m: {(t, p) for t, ps in current.get(m, {}).items() for p in ps} for m in members
        }
        # target partition -> the members that had it and may still take it
        had: dict[TopicPartition, list[str]] = {}
        for m in members:
            for tp in previous[m]:
                if tp in index and tp[0] in subscriptions[m]:
                    had.setdefault(tp, []).append(m)

        # Quotas of the homogeneous case; for heterogeneous groups they only bound the sticky phase.
        active = [m for m in members if not eligible.keys().isdisjoint(subscriptions[m])]
        num_p, num_m = len(targets), max(len(active), 1)
        quota, extra = divmod(num_p, num_m)
        full_quota_left = extra  # how many members may still hold quota + 1

        def give(tp: TopicPartition, m: str) -> None:
            owners[tp].append(m)
            load[m] += 1

        # Phase 1, sticky: each partition keeps one previous owner if that owner is under its quota.
        for tp in targets:
            for m in sorted(had.get(tp, ()), key=lambda m: (load[m], m)):
                if load[m] < quota or (load[m] == quota and full_quota_left > 0):
                    if load[m] == quota:
                        full_quota_left -= 1
                    give(tp, m)
                    break
        # Phase 2, coverage: the remaining partitions go to the least loaded eligible member (ties: the smallest
        # id). A heap of (load, member) per topic whose entries may be stale (loads only grow here): an entry
        # whose load is out of date goes back with the current one until the top is the true minimum.
        load_heaps: dict[UUID, list[tuple[int, str]]] = {}
        for tp in targets:
            if owners[tp]:
                continue
            heap = load_heaps.get(tp[0])
            if heap is None:
                heap = load_heaps[tp[0]] = [(load[m], m) for m in eligible[tp[0]]]
                heapq.heapify(heap)
            while heap[0][0] != load[heap[0][1]]:
                heapq.heapreplace(heap, (load[heap[0][1]], heap[0][1]))
            give(tp, heap[0][1])
        # Phase 3, sharing: members left without a partition (more members than partitions) join the least
        # shared partition they may consume, preferring one they already had (then the first in order). Per set
        # of subscribed topics, a lazy heap of (owners, partition index) gives the least shared count.
        share_heaps: dict[frozenset[UUID], list[tuple[int, int]]] = {}
        for m in members:
            if load[m]:
                continue
            topics = frozenset(t for t in subscriptions[m] if t in eligible)
            if not topics:
                continue
            shared = share_heaps.get(topics)
            if shared is None:
                shared = share_heaps[topics] = [(len(owners[tp]), i) for i, tp in enumerate(targets)
                                              if tp[0] in topics]
                heapq.heapify(shared)
            while shared[0][0] != len(owners[targets[shared[0][1]]]):
                heapq.heapreplace(shared, (len(owners[targets[shared[0][1]]]), shared[0][1]))
            fewest = shared[0][0]
            mine = [index[tp] for tp in previous[m] if tp in index and tp[0] in topics
                    and len(owners[tp]) == fewest]
            give(targets[min(mine) if mine else shared[0][1]], m)

        # Phase 4, sharing evenly (Kafka's desiredSharing): with more members than partitions, every partition
        # gets ceil(M/P) members, the extra places going to the least loaded members that do not have it yet.
        if targets and len(active) > len(targets):
            sharing = -(-len(active) // len(targets))
            for tp in targets:
                while len(owners[tp]) < sharing:
                    others = [m for m in eligible[tp[0]] if m not in owners[tp]]
                    if not others:
                        break
                    give(tp, min(others, key=lambda m: (load[m], m)))

        result: dict[str, dict[UUID, set[int]]] = {m: {} for m in members}
        for (topic_id, partition), ms in owners.items():
            for m in ms:
                result[m].setdefault(topic_id, set()).add(partition)
        return {m: {t: frozenset(ps) for t, ps in a.items()} for m, a in result.items()}
