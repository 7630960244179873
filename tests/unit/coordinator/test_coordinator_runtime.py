"""CoordinatorRuntime over real partition logs (a TopicManager and ReplicaManager on a temporary directory): loading
by replay, write-then-apply with the durable commit, a refused write that applies nothing, transaction markers,
reloading when the log no longer matches memory, a failed log directory, and the timers it runs."""

from __future__ import annotations

import asyncio
from collections.abc import Collection, Coroutine
from pathlib import Path
from typing import Any

import pytest

from broker.coordinator.coordinator_log import CoordinatorLog
from broker.coordinator.periodic import PeriodicTask
from broker.coordinator.runtime import (
    CoordinatorRuntime,
    CoordinatorState,
    CoordinatorWriteError,
    LoadSummary,
    WriteOutcome,
)
from protocol import records as rec
from protocol.errors import ErrorCode
from tests.helpers.replica_node import Clock, Node
from tests.helpers.waiting import async_wait_until

TOPIC = "__consumer_offsets"
PARTITIONS = 2
TOO_LARGE = b"x" * (2 << 20)  # over the internal topic's max.message.bytes: the log refuses the batch


class KeyValueShard:
    """The latest value of each key, per partition, with the offset it was written at; the records of a
    transactional batch wait for their producer's marker."""

    def __init__(self) -> None:
        self.values: dict[int, dict[bytes, tuple[int, bytes]]] = {}
        self.pending: dict[tuple[int, int], list[tuple[int, bytes, bytes | None]]] = {}
        self.loads: list[tuple[int, ...]] = []

    def load_begin(self, partitions: Collection[int]) -> None:
        for p in partitions:
            self.values[p] = {}
            for key in [k for k in self.pending if k[0] == p]:
                del self.pending[key]

    def replay(self, partition: int, offset: int, producer_id: int, producer_epoch: int,
               key: bytes | memoryview, value: bytes | memoryview | None) -> None:
        entry = (offset, bytes(key), None if value is None else bytes(value))
        if producer_id >= 0:
            self.pending.setdefault((partition, producer_id), []).append(entry)
        else:
            self._apply(partition, *entry)

    def _apply(self, partition: int, offset: int, key: bytes, value: bytes | None) -> None:
        values = self.values.setdefault(partition, {})
        if value is None:
            values.pop(key, None)
        else:
            values[key] = (offset, value)

    def replay_end_transaction_marker(self, partition: int, producer_id: int, producer_epoch: int,
                                      commit: bool) -> None:
        for entry in self.pending.pop((partition, producer_id), []):
            if commit:
                self._apply(partition, *entry)

    def load_complete(self, partitions: Collection[int]) -> tuple[int, ...]:
        self.loads.append(tuple(partitions))
        return tuple(partitions)

    def reload_scope(self, partition: int) -> Collection[int]:
        return (partition,)

    def put(self, partition: int, key: bytes, value: bytes) -> list[tuple[bytes, bytes | None]]:
        """An operation that applies its record as it builds it (as Shoal's sans-IO coordinators do)."""
        self._apply(partition, -1, key, value)
        return [(key, value)]

    def view(self, partition: int) -> dict[bytes, bytes]:
        return {k: v for k, (_offset, v) in self.values.get(partition, {}).items()}


class Harness:
    """A broker's partition layer on `data` with `__consumer_offsets` (2 partitions), and a runtime over it."""

    def __init__(self, data: Path) -> None:
        self.node = Node(data, Clock(1_700_000_000_000), {
            "offsets.topic.num.partitions": str(PARTITIONS), "transaction.state.log.num.partitions": "1",
            "share.coordinator.state.topic.num.partitions": "1"})
        self.tasks: list[asyncio.Task[Any]] = []
        self.reloaded: list[LoadSummary[tuple[int, ...]]] = []
        self.failed: list[list[int]] = []
        self.shard = KeyValueShard()
        self.log = CoordinatorLog(self.node.topics, self.node.replicas, TOPIC)
        self.runtime = CoordinatorRuntime(log=self.log, shard=self.shard, spawn=self.spawn, name="test state",
                                          on_reloaded=self.reloaded.append,
                                          on_failed=lambda ps: self.failed.append(sorted(ps)))

    async def start(self) -> None:
        await self.node.topics.ensure_internal_topics()

    def spawn(self, coro: Coroutine[Any, Any, Any], name: str) -> asyncio.Task[Any]:
        task = asyncio.get_running_loop().create_task(coro, name=name)
        self.tasks.append(task)
        return task

    def plog(self, partition: int) -> Any:
        return self.node.topics.log(TOPIC, partition)

    async def close(self) -> None:
        await self.runtime.close()
        for task in self.tasks:
            task.cancel()
        await asyncio.gather(*self.tasks, return_exceptions=True)
        self.node.close()


async def started(data: Path) -> Harness:
    h = Harness(data)
    await h.start()
    summary = h.runtime.load(range(PARTITIONS))
    assert summary.partitions == (0, 1) and summary.result == (0, 1)
    return h


async def test_a_write_is_appended_applied_then_committed_and_a_restart_replays_it(tmp_path: Path) -> None:
    h = await started(tmp_path)
    assert h.runtime.active and h.runtime.state(0) is CoordinatorState.ACTIVE
    outcome = await h.runtime.write({0: [(b"a", b"1"), (b"b", b"2")], 1: [(b"c", b"3")]}, replay=True)
    assert outcome is WriteOutcome.COMMITTED
    # applied by replay with the offsets the log gave them, and fsynced before the commit answered
    assert h.shard.values[0] == {b"a": (0, b"1"), b"b": (1, b"2")} and h.shard.values[1] == {b"c": (0, b"3")}
    assert not h.plog(0).dirty and not h.plog(1).dirty
    assert await h.runtime.write({0: [(b"a", b"4")]}, replay=True) is WriteOutcome.COMMITTED
    await h.close()

    again = Harness(tmp_path)
    await again.start()
    summary = again.runtime.load(range(PARTITIONS))
    assert summary.records == 4 and summary.seconds >= 0
    assert again.shard.values[0] == {b"a": (2, b"4"), b"b": (1, b"2")} and again.shard.view(1) == {b"c": b"3"}
    await again.close()


async def test_a_refused_write_applies_nothing(tmp_path: Path) -> None:
    h = await started(tmp_path)
    assert await h.runtime.write({0: [(b"a", b"1")]}, replay=True) is WriteOutcome.COMMITTED
    outcome = await h.runtime.write({0: [(b"a", b"2"), (b"big", TOO_LARGE)]}, replay=True)
    assert outcome is WriteOutcome.REFUSED
    assert h.shard.view(0) == {b"a": b"1"}
    assert h.plog(0).log_end_offset == 1
    await h.close()


async def test_a_refused_write_of_applied_records_reloads_the_partition_from_its_log(tmp_path: Path) -> None:
    """Records the shard applied as it built them are undone by rebuilding the partition from the log."""
    h = await started(tmp_path)
    assert await h.runtime.write({0: h.shard.put(0, b"a", b"1")}) is WriteOutcome.COMMITTED
    records = h.shard.put(0, b"a", b"2") + h.shard.put(0, b"big", TOO_LARGE)
    assert h.shard.view(0)[b"a"] == b"2"  # memory ran ahead of the log
    with pytest.raises(CoordinatorWriteError) as refused:
        h.runtime.append_all({0: records})
    assert refused.value.outcome is WriteOutcome.REFUSED
    assert h.shard.view(0) == {b"a": b"1"}  # as the log has it
    assert [s.partitions for s in h.reloaded] == [(0,)]
    assert h.runtime.state(0) is CoordinatorState.ACTIVE
    await h.close()


async def test_an_answer_without_records_waits_for_the_partitions_earlier_appends(tmp_path: Path) -> None:
    h = await started(tmp_path)
    appended = h.runtime.append(0, [(b"a", b"1")], replay=True)
    assert h.shard.view(0) == {b"a": b"1"}  # applied once written, in the same step
    barrier = h.runtime.append(0, [])
    assert barrier.base_offset == -1
    await asyncio.wait_for(asyncio.gather(appended.durable, barrier.durable), 10)
    assert not h.plog(0).dirty
    assert await h.runtime.write({}, wait_for=[0, 1]) is WriteOutcome.COMMITTED
    await h.close()


async def test_transactional_records_wait_for_their_marker_and_replay_the_same(tmp_path: Path) -> None:
    h = await started(tmp_path)
    await h.node.replicas.ensure_loaded([(TOPIC, 0)])
    done = h.runtime.append(0, [(b"t", b"1")], producer_id=7, producer_epoch=0, replay=True)
    await done.durable
    assert h.shard.view(0) == {} and h.shard.pending[(0, 7)] == [(0, b"t", b"1")]
    code, marker = h.runtime.append_end_transaction_marker(0, producer_id=7, producer_epoch=0, commit=True,
                                                           coordinator_epoch=0)
    assert code == ErrorCode.NONE and marker is not None and marker.base_offset == 1
    assert await h.runtime.commit([marker]) is WriteOutcome.COMMITTED
    assert h.shard.view(0) == {b"t": b"1"}
    # a marker the partition refuses (an older epoch) changes nothing
    code, marker = h.runtime.append_end_transaction_marker(0, producer_id=7, producer_epoch=-5, commit=False,
                                                           coordinator_epoch=0)
    assert code != ErrorCode.NONE and marker is None
    assert await h.runtime.write({0: [(b"u", b"2")]}, replay=True) is WriteOutcome.COMMITTED  # still in sync
    await h.close()

    again = Harness(tmp_path)
    await again.start()
    again.runtime.load(range(PARTITIONS))
    assert again.shard.view(0) == {b"t": b"1", b"u": b"2"} and not again.shard.pending
    await again.close()


async def test_a_log_truncated_under_the_runtime_is_reloaded_on_the_next_write(tmp_path: Path) -> None:
    h = await started(tmp_path)
    for i in range(3):
        assert await h.runtime.write({0: [(b"k%d" % i, b"v")]}, replay=True) is WriteOutcome.COMMITTED
    h.plog(0).truncate_to(1)  # the log lost k1 and k2; memory still has them
    outcome = await h.runtime.write({0: [(b"k3", b"v")]}, replay=True)
    assert outcome is WriteOutcome.REFUSED  # the client retries; memory now matches the log
    assert h.shard.view(0) == {b"k0": b"v", b"k3": b"v"}
    assert [s.partitions for s in h.reloaded] == [(0,)]
    assert await h.runtime.write({0: [(b"k4", b"v")]}, replay=True) is WriteOutcome.COMMITTED
    assert h.shard.values[0][b"k4"] == (2, b"v")  # k0 at 0, k3 at 1
    await h.close()


async def test_records_written_by_someone_else_are_picked_up_by_a_reload(tmp_path: Path) -> None:
    h = await started(tmp_path)
    info = h.node.topics.registry.get(TOPIC)
    batch, header = rec.build_keyed_batch([(b"x", b"other")])
    result, _ = h.node.replicas.append(info, 1, batch, allow_internal=True, built=header)
    assert result.error == ErrorCode.NONE
    assert await h.runtime.write({1: [(b"y", b"mine")]}, replay=True) is WriteOutcome.REFUSED
    assert h.shard.view(1) == {b"x": b"other", b"y": b"mine"}
    assert h.shard.view(0) == {}  # the other partition was left alone
    await h.close()


async def test_an_offline_log_directory_writes_nothing_and_fails_the_partition(tmp_path: Path) -> None:
    h = await started(tmp_path)
    assert await h.runtime.write({0: [(b"a", b"1")]}, replay=True) is WriteOutcome.COMMITTED
    h.plog(1).failures.fail("injected")  # one directory holds both partitions: both are offline
    assert await h.runtime.write({0: [(b"a", b"2")]}, replay=True) is WriteOutcome.OFFLINE
    assert h.shard.view(0) == {b"a": b"1"} and h.plog(0).log_end_offset == 1  # nothing written or applied
    assert h.runtime.state(0) is CoordinatorState.FAILED and h.runtime.state(1) is CoordinatorState.ACTIVE
    assert h.failed == [[0]] and not h.runtime.active
    assert await h.runtime.write({}, wait_for=[0, 1]) is WriteOutcome.OFFLINE  # a barrier on it too
    assert h.failed == [[0], [1]]  # each partition told once
    assert await h.runtime.write({0: [(b"a", b"3")]}, replay=True) is WriteOutcome.OFFLINE
    assert h.failed == [[0], [1]]
    await h.close()


async def test_the_runtime_runs_its_timers_until_closed(tmp_path: Path) -> None:
    h = await started(tmp_path)
    rounds: list[int] = []
    task = h.runtime.schedule(PeriodicTask("test-timer", lambda: rounds.append(1), every_s=0.01))
    await async_wait_until(lambda: len(rounds) >= 3, 10)
    assert any(t.get_name() == "test-timer" for t in h.tasks)
    await h.runtime.close()
    assert h.runtime.state(0) is CoordinatorState.CLOSED
    await async_wait_until(lambda: all(t.done() for t in h.tasks), 10)  # stopped, not cancelled
    assert not any(t.cancelled() for t in h.tasks) and task.name == "test-timer"
    h.node.close()
