"""The streams group's task assignor, `sticky` (the one Kafka 4.4 registers), sans-IO.

As Kafka's StickyTaskAssignor: every task of every subtopology (one per partition of its largest source topic)
is active on exactly one member; a task stays with the member that had it while that member is under its
quota (the total over the members, rounded up), the rest go to the least loaded process and, within it, the
least loaded member; stateful subtopologies get `num_standby_replicas` standby tasks on other processes than
the active one, preferring members that had them. Ties between equally loaded processes or members are broken
by id (Kafka's priority queue breaks them by its heap order): with more than one member, which of two equally
loaded members gets a task may differ from Kafka's choice, never the balance.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from broker.groups.streams.group import TasksTuple
from broker.groups.streams.topology import ConfiguredSubtopology

ASSIGNOR_NAME = "sticky"


@dataclass(frozen=True)
class MemberSpec:
    member_id: str
    process_id: str
    previous: TasksTuple  # the member's last target assignment


def assign(members: Sequence[MemberSpec], subtopologies: Mapping[str, ConfiguredSubtopology],
           num_standby_replicas: int) -> dict[str, TasksTuple]:
    if not members:
        return {}
    active: dict[str, dict[str, set[int]]] = {m.member_id: {} for m in members}
    standby: dict[str, dict[str, set[int]]] = {m.member_id: {} for m in members}
    by_id = {m.member_id: m for m in members}
    processes: dict[str, list[str]] = {}
    for m in members:
        processes.setdefault(m.process_id, []).append(m.member_id)
    counts = {m.member_id: 0 for m in members}
    tasks = [(sid, p) for sid in sorted(subtopologies) for p in range(subtopologies[sid].number_of_tasks)]
    quota = math.ceil(len(tasks) / len(members))
    prev_owner: dict[tuple[str, int], str] = {}
    for m in members:
        for sid, parts in m.previous.active.items():
            for p in parts:
                prev_owner[(sid, p)] = m.member_id

    def give(member_id: str, task: tuple[str, int], into: dict[str, dict[str, set[int]]]) -> None:
        into[member_id].setdefault(task[0], set()).add(task[1])
        counts[member_id] += 1

    def process_load(pid: str) -> float:
        return sum(counts[mid] for mid in processes[pid]) / len(processes[pid])

    remaining = []
    for task in sorted(tasks, key=lambda t: (t[1], t[0])):
        owner = prev_owner.get(task)
        if owner is not None and counts[owner] < quota:
            give(owner, task, active)
        else:
            remaining.append(task)
    for task in sorted(remaining):
        pid = min(processes, key=lambda p: (process_load(p), p))
        mid = min(processes[pid], key=lambda x: (counts[x], x))
        give(mid, task, active)

    if num_standby_replicas > 0:
        prev_standby: dict[tuple[str, int], list[str]] = {}
        for m in members:
            for sid, parts in m.previous.standby.items():
                for p in parts:
                    prev_standby.setdefault((sid, p), []).append(m.member_id)
        owner_process = {(sid, p): by_id[mid].process_id for mid, subs in active.items()
                         for sid, parts in subs.items() for p in parts}
        for sid in sorted(subtopologies):
            if not subtopologies[sid].is_stateful():
                continue
            for p in range(subtopologies[sid].number_of_tasks):
                holders = {owner_process[(sid, p)]}
                for _ in range(num_standby_replicas):
                    candidates = [mid for mid in prev_standby.get((sid, p), []) if by_id[mid].process_id not in holders]
                    if candidates:
                        mid = min(candidates, key=lambda x: (counts[x], x))
                    else:
                        free = [pid for pid in processes if pid not in holders]
                        if not free:
                            break
                        pid = min(free, key=lambda q: (process_load(q), q))
                        mid = min(processes[pid], key=lambda x: (counts[x], x))
                    give(mid, (sid, p), standby)
                    holders.add(by_id[mid].process_id)
    return {m.member_id: TasksTuple({s: frozenset(ps) for s, ps in active[m.member_id].items()},
                                    {s: frozenset(ps) for s, ps in standby[m.member_id].items()}, {})
            for m in members}
