"""The streams group's task assignor, `sticky` (the one Kafka 4.4 registers), sans-IO.

Kafka's StickyTaskAssignor step by step, so that the same group gets the same tasks: every task of every
subtopology (one per partition of its largest source topic) is active on exactly one member. Tasks first stay with
the member that had them active (in partition, then subtopology order) while it is under its quota, then go to a
standby candidate; the rest, in subtopology then partition order, go to the least loaded process (tasks per
member) and within it to the member with the fewest tasks. Stateful subtopologies get `num_standby_replicas`
standby tasks on processes without the task, the previous active owner and the standby candidates first. A task's
standby candidates (Kafka 4.4) are the members owning it as a standby, then the members reporting task offsets for
it (local state of it), each group ranked by the reported offset, highest first. Kafka keeps the processes and
members in Java priority queues filled from Java hash maps; ties between equally loaded ones follow the heap's
order, which `JavaPriorityQueue` and `protocol.java_hash.java_hash_order` reproduce.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

from broker.groups.streams.group import TasksTuple
from broker.groups.streams.topology import ConfiguredSubtopology
from protocol.java_hash import java_compute_if_absent_order, java_hash_order

ASSIGNOR_NAME = "sticky"
T = TypeVar("T")
Task = tuple[str, int]  # (subtopology id, partition)


@dataclass(frozen=True)
class MemberSpec:
    member_id: str
    process_id: str
    current: TasksTuple  # the tasks the member owns now (active, standby, warm-up)
    # The changelog offsets the member last reported per task (StreamsGroupHeartbeat TaskOffsets): how far
    # along its local state of each task is.
    task_offsets: Mapping[Task, int] = field(default_factory=dict)


class JavaPriorityQueue(Generic[T]):
    """java.util.PriorityQueue's binary heap (siftUp on add, siftDown on poll): ties come out in its order."""

    def __init__(self, key: Callable[[T], Any]) -> None:
        self._q: list[T] = []
        self._key = key

    def __len__(self) -> int:
        return len(self._q)

    def add(self, x: T) -> None:
        q, key = self._q, self._key
        q.append(x)
        k = len(q) - 1
        while k > 0:
            parent = (k - 1) >> 1
            if key(x) >= key(q[parent]):
                break
            q[k] = q[parent]
            k = parent
        q[k] = x

    def poll(self) -> T | None:
        q, key = self._q, self._key
        if not q:
            return None
        result = q[0]
        x = q.pop()
        if q:
            n, k = len(q), 0
            half = n >> 1
            while k < half:
                child = 2 * k + 1
                right = child + 1
                if right < n and key(q[child]) > key(q[right]):
                    child = right
                if key(x) <= key(q[child]):
                    break
                q[k] = q[child]
                k = child
            q[k] = x
        return result


def _table_size(n: int) -> int:
    """Java's HashMap.tableSizeFor: the table of `new HashMap<>(n)`."""
    size = 1
    while size < n:
        size *= 2
    return size


@dataclass
class _Process:
    process_id: str
    capacity: int = 0
    task_count: int = 0
    counts: dict[str, int] = field(default_factory=dict)  # member -> tasks, in Java HashMap order when read
    tasks: set[Task] = field(default_factory=set)
    active: dict[str, set[Task]] = field(default_factory=dict)
    standby: dict[str, set[Task]] = field(default_factory=dict)
    by_load: JavaPriorityQueue[list[Any]] | None = None

    @property
    def load(self) -> float:
        return -1.0 if self.capacity <= 0 else self.task_count / self.capacity

    def add_member(self, member_id: str) -> None:
        self.counts[member_id] = 0
        self.capacity += 1

    def add_task(self, member_id: str, task: Task, active: bool) -> int:
        self.by_load = None
        return self._add(member_id, task, active)

    def _add(self, member_id: str, task: Task, active: bool) -> int:
        self.task_count += 1
        self.tasks.add(task)
        (self.active if active else self.standby).setdefault(member_id, set()).add(task)
        self.counts[member_id] += 1
        return self.counts[member_id]

    def add_to_least_loaded(self, task: Task, active: bool) -> int:
        if not self.counts:
            return -1
        if len(self.counts) == 1:
            return self._add(next(iter(self.counts)), task, active)
        if self.by_load is None:
            self.by_load = JavaPriorityQueue(lambda e: e[1])
            for mid in java_hash_order(self.counts):
                self.by_load.add([mid, self.counts[mid]])
        entry = self.by_load.poll()
        assert entry is not None
        count = self._add(entry[0], task, active)
        entry[1] = count
        self.by_load.add(entry)
        return count


def _per_member(tasks: int, members: int) -> int:
    if members == 0:
        return 0
    return tasks // members + (1 if tasks % members else 0)


class _Assignment:
    def __init__(self, members: Sequence[MemberSpec], subtopologies: Mapping[str, ConfiguredSubtopology],
                 num_standby_replicas: int) -> None:
        self.subtopologies = subtopologies
        self.num_standby = num_standby_replicas
        self.total_active = sum(s.number_of_tasks for s in subtopologies.values())
        self.total_tasks = self.total_active + sum(
            s.number_of_tasks * num_standby_replicas for s in subtopologies.values() if s.is_stateful())
        self.members_active_capacity = self.members_capacity = len(members)
        self.active_per_member = _per_member(self.total_active, len(members))
        self.tasks_per_member = _per_member(self.total_tasks, len(members))
        # Kafka's groupSpec.memberIds(): a HashMap's keys; processIdToState: new HashMap<>(members).
        order = java_hash_order([m.member_id for m in members])
        by_id = {m.member_id: m for m in members}
        self.members = [by_id[mid] for mid in order]
        # processIdToState: new HashMap<>(members), filled by computeIfAbsent once per member.
        process_ids = java_compute_if_absent_order([m.process_id for m in self.members],
                                                   initial_capacity=_table_size(len(members)))
        self.processes = {pid: _Process(pid) for pid in process_ids}
        self.prev_active: dict[Task, MemberSpec] = {}
        # Kafka 4.4's standby candidates of each task: the members that own it as a standby, then those that
        # report offsets for it (local state of it), each group by their reported offset, highest first; ties in
        # member order (a stable sort).
        candidates: dict[Task, list[tuple[int, int, MemberSpec]]] = {}
        for m in self.members:
            self.processes[m.process_id].add_member(m.member_id)
            for sid, parts in m.current.active.items():
                for p in parts:
                    self.prev_active[(sid, p)] = m
            for sid, parts in m.current.standby.items():
                for p in parts:
                    candidates.setdefault((sid, p), []).append((0, -m.task_offsets.get((sid, p), 0), m))
            for task, offset in m.task_offsets.items():
                if task[1] not in m.current.standby.get(task[0], ()):
                    candidates.setdefault(task, []).append((1, -offset, m))
        self.prev_standby: dict[Task, list[MemberSpec]] = {
            task: [m for _, _, m in sorted(ranked, key=lambda c: (c[0], c[1]))] for task, ranked in candidates.items()}

    def _count(self, m: MemberSpec) -> int:
        return self.processes[m.process_id].counts[m.member_id]

    def _took_active(self, count: int) -> None:
        if count == self.active_per_member:
            self.members_active_capacity -= 1
            self.total_active -= count
            self.active_per_member = _per_member(self.total_active, self.members_active_capacity)
        self._took(count)

    def _took(self, count: int) -> None:
        if count == self.tasks_per_member:
            self.members_capacity -= 1
            self.total_tasks -= count
            self.tasks_per_member = _per_member(self.total_tasks, self.members_capacity)

    def _prev_least_loaded(self, candidates: Sequence[MemberSpec] | None, task: Task | None) -> MemberSpec | None:
        best: MemberSpec | None = None
        best_process = best_member = float("inf")
        for m in candidates or ():
            process = self.processes[m.process_id]
            if task is not None and task in process.tasks:
                continue
            process_load, member_load = process.load, float(process.counts[m.member_id])
            if best is None or (process_load < best_process and member_load < best_member):
                best, best_process, best_member = m, process_load, member_load
        return best

    def _queue(self) -> JavaPriorityQueue[_Process]:
        queue: JavaPriorityQueue[_Process] = JavaPriorityQueue(lambda p: p.load)
        for process in self.processes.values():
            queue.add(process)
        return queue

    def assign_active(self) -> None:
        tasks = [(sid, p) for sid in self.subtopologies for p in range(self.subtopologies[sid].number_of_tasks)]
        tasks.sort(key=lambda t: (t[1], t[0]))
        rest = []
        for task in tasks:
            prev = self.prev_active.get(task)
            if prev is not None and self._count(prev) < self.active_per_member:
                self._took_active(self.processes[prev.process_id].add_task(prev.member_id, task, True))
            else:
                rest.append(task)
        remaining = []
        for task in rest:
            prev = self._prev_least_loaded(self.prev_standby.get(task), None)
            if prev is not None and self._count(prev) < self.active_per_member:
                self._took_active(self.processes[prev.process_id].add_task(prev.member_id, task, True))
            else:
                remaining.append(task)
        remaining.sort()
        queue = self._queue()
        for task in remaining:
            process = queue.poll()
            assert process is not None
            self._took_active(process.add_to_least_loaded(task, True))
            queue.add(process)

    def assign_standby(self) -> None:
        tasks = [(sid, p) for sid in self.subtopologies if self.subtopologies[sid].is_stateful()
                 for p in range(self.subtopologies[sid].number_of_tasks)]
        tasks.sort(key=lambda t: (t[1], t[0]), reverse=True)
        to_least_loaded: list[tuple[Task, int]] = []
        for task in tasks:
            i = 0
            while i < self.num_standby:
                prev = self.prev_active.get(task)
                if prev is not None:
                    process = self.processes[prev.process_id]
                    if task not in process.tasks and self._count(prev) < self.tasks_per_member:
                        self._took(process.add_task(prev.member_id, task, False))
                        i += 1
                        continue
                candidates = self.prev_standby.get(task)
                if not candidates:
                    break
                standby = self._prev_least_loaded(candidates, task)
                if standby is None or self._count(standby) >= self.tasks_per_member:
                    break
                self._took(self.processes[standby.process_id].add_task(standby.member_id, task, False))
                i += 1
            else:
                continue
            to_least_loaded.append((task, self.num_standby - i))
        to_least_loaded.sort(key=lambda x: x[0], reverse=True)
        queue = self._queue()
        for task, replicas in to_least_loaded:
            for _ in range(replicas):
                if not self._standby_to_least_loaded(queue, task):
                    break

    def _standby_to_least_loaded(self, queue: JavaPriorityQueue[_Process], task: Task) -> bool:
        process = queue.poll()
        if process is None:
            return False
        found = False
        if task not in process.tasks:
            count = process.add_to_least_loaded(task, False)
            if count != -1:
                found = True
                self._took(count)
        elif len(queue):
            found = self._standby_to_least_loaded(queue, task)
        queue.add(process)
        return found

    def result(self) -> dict[str, TasksTuple]:
        out = {}
        for m in self.members:
            process = self.processes[m.process_id]

            def grouped(tasks: set[Task]) -> dict[str, frozenset[int]]:
                by_sub: dict[str, set[int]] = {}
                for sid, p in tasks:
                    by_sub.setdefault(sid, set()).add(p)
                return {sid: frozenset(ps) for sid, ps in by_sub.items()}

            out[m.member_id] = TasksTuple(grouped(process.active.get(m.member_id, set())),
                                          grouped(process.standby.get(m.member_id, set())), {})
        return out


def assign(members: Sequence[MemberSpec], subtopologies: Mapping[str, ConfiguredSubtopology],
           num_standby_replicas: int) -> dict[str, TasksTuple]:
    """Every member's target tasks (subtopologies in id order, as Kafka's sorted topology)."""
    if not members:
        return {}
    state = _Assignment(members, {sid: subtopologies[sid] for sid in sorted(subtopologies)}, num_standby_replicas)
    state.assign_active()
    if num_standby_replicas > 0:
        state.assign_standby()
    return state.result()
