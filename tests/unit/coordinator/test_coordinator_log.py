"""CoordinatorLog's durability futures are shared by every request waiting on a partition: one request being
cancelled (its client went away) must not cancel them for the others."""

from __future__ import annotations

import asyncio
import uuid
from dataclasses import dataclass, field

from broker.cluster.topics import TopicInfo
from broker.coordinator.coordinator_log import CoordinatorLog
from broker.log import PartitionLog
from broker.replica_manager import ProduceResult
from protocol.errors import ErrorCode
from tests.helpers.waiting import async_assert_stays, async_wait_until


@dataclass
class AnyTopic:
    """A registry in which every topic exists."""

    def get(self, name: str) -> TopicInfo:
        return TopicInfo(name, uuid.UUID(int=1), 1)


@dataclass
class Topics:
    """The coordinator's topic: its registry and its partition logs."""

    plog: PartitionLog | None = None  # every partition's log; None: closed by the broker's stop
    found: PartitionLog | None = None  # what find_log answers
    registry: AnyTopic = field(default_factory=AnyTopic)

    def log(self, topic: str, partition: int) -> PartitionLog:
        if self.plog is None:
            raise KeyError((topic, partition))  # as TopicManager.log for a log the broker's stop closed
        return self.plog

    def find_log(self, topic: str, partition: int) -> PartitionLog | None:
        return self.found


class FakeReplicas:
    def __init__(self) -> None:
        self.flushed = asyncio.Event()
        self.flushing = False

    def append(self, info, partition, batch, allow_internal=False, built=None):
        return ProduceResult(ErrorCode.NONE, base_offset=0), object()

    async def make_durable(self, logs) -> None:
        self.flushing = True
        await self.flushed.wait()


async def test_a_cancelled_waiter_does_not_cancel_the_shared_durability_wait():
    replicas = FakeReplicas()
    topics = Topics()
    clog = CoordinatorLog(topics, replicas, "__share_group_state")
    fut = clog.append(0, [(b"k", b"v")])

    async def request_awaiting_append() -> None:
        await fut  # as the coordinator runtimes wait for their records

    doomed = asyncio.ensure_future(request_awaiting_append())
    other = asyncio.ensure_future(clog.barrier([0]))
    await async_wait_until(lambda: replicas.flushing)  # the shared durability wait is running
    doomed.cancel()  # its connection closed
    await async_wait_until(doomed.done, what="the cancelled request ended")
    await async_assert_stays(lambda: not other.done(), 0.05, "the other request waiting for the fsync")
    replicas.flushed.set()
    await asyncio.wait_for(other, 5)  # the other request still gets "durable", not CancelledError
    assert other.exception() is None


def test_a_log_closed_by_the_broker_stop_counts_as_offline(tmp_path):
    """A coordinator request that waited on a failed fsync can resume after the broker's stop closed every log:
    it must be answered as for an offline log (an error), not raise KeyError from the log lookup."""
    assert CoordinatorLog(Topics(), FakeReplicas(), "__consumer_offsets").offline(0) is True
    online = PartitionLog(tmp_path / "__consumer_offsets-0")
    assert CoordinatorLog(Topics(found=online), FakeReplicas(), "__consumer_offsets").offline(0) is False
    online.close()


class LogReplicas:
    """Appends to one real PartitionLog; durable at once."""

    def __init__(self, plog) -> None:
        self.plog = plog

    def append(self, info, partition, batch, allow_internal=False, built=None):
        appended = self.plog.append(batch)
        return ProduceResult(ErrorCode.NONE, base_offset=appended.base_offset), self.plog

    def append_marker(self, m):
        from protocol.control_records import build_end_txn_marker  # noqa: PLC0415

        self.plog.append(build_end_txn_marker(producer_id=m.producer_id, producer_epoch=m.producer_epoch,
                                              commit=m.commit, coordinator_epoch=m.coordinator_epoch))
        return ErrorCode.NONE, self.plog

    async def make_durable(self, logs) -> None:
        return None


async def test_transactional_batches_and_markers_replay_with_their_producer(tmp_path):
    plog = PartitionLog(tmp_path / "__consumer_offsets-0")
    topics = Topics(plog)
    clog = CoordinatorLog(topics, LogReplicas(plog), "__consumer_offsets")
    await clog.append(0, [(b"k1", b"v1")])
    await clog.append_transactional(0, [(b"k2", b"v2"), (b"k3", None)], producer_id=42, producer_epoch=3)
    for pid, epoch, commit in ((42, 3, True), (43, 0, False)):
        code, durable = clog.append_marker(0, producer_id=pid, producer_epoch=epoch, commit=commit,
                                           coordinator_epoch=5)
        assert code == ErrorCode.NONE
        await durable
    seen: list = []
    count = clog.replay(0, lambda offset, pid, epoch, k, v: seen.append((offset, bytes(k), v and bytes(v), pid,
                                                                        epoch)),
                        on_marker=lambda *m: seen.append(m))
    assert count == 3
    assert seen == [(0, b"k1", b"v1", -1, -1), (1, b"k2", b"v2", 42, 3), (2, b"k3", None, 42, 3),
                    (42, 3, True, 5), (43, 0, False, 5)]
    plain: list = []
    assert clog.replay(0, lambda *r: plain.append(bytes(r[3]))) == 3 and plain == [b"k1", b"k2", b"k3"]
    assert clog.end_offset(0) == 5  # three records and two markers
    plog.close()


class CountingReplicas(FakeReplicas):
    """Counts fsync requests; each completes at once."""

    def __init__(self) -> None:
        super().__init__()
        self.syncs = 0

    async def make_durable(self, logs) -> None:
        self.syncs += 1


async def test_a_deferred_fsync_answers_once_written_and_syncs_within_the_interval():
    """__share_group_state with shoal.share.state.fsync.interval.ms: an append is done once written (no fsync
    waited for), the partitions written are fsynced together within the interval, and a barrier (the prune's
    "the snapshots it keeps are durable") fsyncs at once."""
    replicas = CountingReplicas()
    topics = Topics()
    clog = CoordinatorLog(topics, replicas, "__share_group_state", fsync_interval_ms=50)
    for _ in range(5):
        fut = clog.append(0, [(b"k", b"v")])
        assert fut.done() and fut.exception() is None  # answered without an fsync
    clog.append(1, [(b"k", b"v")])
    assert replicas.syncs == 0
    await async_wait_until(lambda: replicas.syncs == 2, 5)  # one fsync per partition written, not per append
    clog.append(2, [(b"k", b"v")])
    await clog.barrier([2])
    assert replicas.syncs == 3  # forced by the barrier, before the interval
    # nothing left to sync: two intervals pass without an fsync
    await async_assert_stays(lambda: replicas.syncs == 3, 0.1, "no fsync without a write")


async def test_a_deferred_fsync_answers_a_read_without_starting_an_fsync():
    """With a deferred fsync a read's barrier (an append without records) is done at once: what it answers from
    was written, as durable as any deferred write's answer; the interval's fsync still follows."""
    replicas = CountingReplicas()
    topics = Topics()
    clog = CoordinatorLog(topics, replicas, "__share_group_state", fsync_interval_ms=50)
    clog.append(0, [(b"k", b"v")])
    _, fut = clog.append_at(0, [])
    assert fut.done() and replicas.syncs == 0
    await async_wait_until(lambda: replicas.syncs == 1, 5)


async def test_deferred_fsync_answers_at_once_then_syncs_and_forgets_the_flush():
    """With a deferred fsync an append is answered at once (an already-done future, shared); the barrier fsyncs
    and, once that is done, nothing is pending for the partition any more."""
    replicas = FakeReplicas()
    topics = Topics()
    clog = CoordinatorLog(topics, replicas, "__share_group_state", fsync_interval_ms=60_000)
    first, second = clog.append(0, [(b"k", b"v")]), clog.append(0, [(b"k", b"w")])
    assert first.done() and second.done() and not replicas.flushing
    barrier = asyncio.ensure_future(clog.barrier([0]))
    await async_wait_until(lambda: replicas.flushing)
    assert not barrier.done()
    replicas.flushed.set()
    await asyncio.wait_for(barrier, 5)
    await async_wait_until(lambda: not clog._pending)  # the flush's done callback ran and dropped it
    assert clog.barrier_future(0).done()
