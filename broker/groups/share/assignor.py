"""The simple server-side share-group assignor ("simple", KIP-932).

Unlike a consumer-group assignor, a share-group assignor may give one partition to several members: share
consumers cooperate on a partition through record locks. The rules, in priority order (as in Kafka 4.1's
SimpleHomogeneousAssignmentBuilder, written independently):

1. Coverage: every assignable partition that some member subscribes to gets at least one member.
2. Balance: with all members subscribed to the same topics, member loads differ by at most one when there are
   at least as many partitions as members; with more members than partitions every member gets exactly one
   partition and partitions are shared by floor(M/P) or ceil(M/P) members.
3. Stickiness: a member keeps what it had when that does not break 1 or 2.

Deterministic: members and partitions are visited in sorted order, so the same input always gives the same
output (replay and tests rely on it). Heterogeneous subscriptions get coverage and a best-effort balance.
"""

from __future__ import annotations

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
        targets = sorted(((t, p) for t, ps in partitions.items() for p in ps), key=_key)
        eligible: dict[TopicPartition, list[str]] = {
            tp: [m for m in members if tp[0] in subscriptions[m]] for tp in targets
        }
        targets = [tp for tp in targets if eligible[tp]]
        owners: dict[TopicPartition, list[str]] = {tp: [] for tp in targets}
        load = dict.fromkeys(members, 0)
        previous = {
            m: {(t, p) for t, ps in current.get(m, {}).items() for p in ps} for m in members
        }

        # Quotas of the homogeneous case; for heterogeneous groups they only bound the sticky phase.
        active = [m for m in members if any(tp[0] in subscriptions[m] for tp in targets)]
        num_p, num_m = len(targets), max(len(active), 1)
        quota, extra = divmod(num_p, num_m)
        full_quota_left = extra  # how many members may still hold quota + 1

        def give(tp: TopicPartition, m: str) -> None:
            owners[tp].append(m)
            load[m] += 1

        # Phase 1, sticky: each partition keeps one previous owner if that owner is under its quota.
        for tp in targets:
            for m in sorted((m for m in eligible[tp] if tp in previous[m]), key=lambda m: (load[m], m)):
                if load[m] < quota or (load[m] == quota and full_quota_left > 0):
                    if load[m] == quota:
                        full_quota_left -= 1
                    give(tp, m)
                    break
        # Phase 2, coverage: the remaining partitions go to the least loaded eligible member.
        for tp in targets:
            if not owners[tp]:
                give(tp, min(eligible[tp], key=lambda m: (load[m], m)))
        # Phase 3, sharing: members left without a partition (more members than partitions) join the least
        # shared partition they may consume, preferring one they already had.
        for m in members:
            if load[m]:
                continue
            mine = [tp for tp in targets if m in eligible[tp]]
            if mine:
                give(min(mine, key=lambda tp: (len(owners[tp]), tp not in previous[m], _key(tp))), m)

        result: dict[str, dict[UUID, set[int]]] = {m: {} for m in members}
        for (topic_id, partition), ms in owners.items():
            for m in ms:
                result[m].setdefault(topic_id, set()).add(partition)
        return {m: {t: frozenset(ps) for t, ps in a.items()} for m, a in result.items()}
