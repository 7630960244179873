"""Group commit: concurrent sync() calls share flushes; a sync covers data appended before it."""

from __future__ import annotations

import asyncio
import threading
import time
from pathlib import Path

import pytest

from broker.log import GroupCommitFlusher, PartitionLog
from tests.helpers.record_batches import batch
from tests.helpers.waiting import async_wait_until


class CountingLog:
    """Stands in for a PartitionLog: counts flushes and records which appends each flush covered."""

    def __init__(self, delay: float = 0.02, fail: bool = False) -> None:
        self.delay = delay
        self.fail = fail
        self.appended = 0
        self.durable = 0
        self.flushes = 0
        self.threads: set[str] = set()

    def append(self) -> int:
        self.appended += 1
        return self.appended

    def flush(self) -> None:
        self.threads.add(threading.current_thread().name)
        covered = self.appended  # before the count: a test that sees the count knows what this flush covers
        self.flushes += 1
        time.sleep(self.delay)
        if self.fail:
            raise OSError(5, "EIO")
        self.durable = max(self.durable, covered)


async def test_concurrent_syncs_share_fsyncs() -> None:
    flusher = GroupCommitFlusher()
    log = CountingLog()

    async def produce() -> None:
        mine = log.append()
        await flusher.sync(log)
        assert log.durable >= mine  # everything appended before sync() is on disk

    await asyncio.gather(*(produce() for _ in range(50)))
    assert log.flushes <= 3  # the first flush, then one for everyone who arrived meanwhile
    assert threading.main_thread().name not in log.threads


async def test_requests_during_a_flush_wait_for_the_next_one() -> None:
    flusher = GroupCommitFlusher()
    log = CountingLog(delay=0.05)
    log.append()
    first = asyncio.create_task(flusher.sync(log))
    await async_wait_until(lambda: log.flushes == 1)  # the first flush is running now
    mine = log.append()
    await flusher.sync(log)
    assert log.durable >= mine and log.flushes == 2
    await first


async def test_several_logs_in_one_round_and_errors_go_to_their_waiters() -> None:
    flusher = GroupCommitFlusher(flush_interval_ms=5)
    good, bad = CountingLog(delay=0), CountingLog(delay=0, fail=True)
    results = await asyncio.gather(flusher.sync(good), flusher.sync(bad), flusher.sync(good),
                                   return_exceptions=True)
    assert results[0] is None and results[2] is None and isinstance(results[1], OSError)
    assert flusher.flushes == 2 and good.flushes == 1  # one flush per log, the two syncs of `good` share it
    await flusher.close()


async def test_real_log_flush_from_worker_thread(tmp_path: Path) -> None:
    plog = PartitionLog(tmp_path / "t-0")
    flusher = GroupCommitFlusher()
    plog.append(batch(2))
    await asyncio.gather(*(flusher.sync(plog) for _ in range(5)))
    assert not plog.dirty
    await flusher.sync(plog)  # clean: returns at once
    plog.close()


@pytest.mark.parametrize("n", [1, 10])
async def test_cancelled_waiter_does_not_break_the_round(n: int) -> None:
    flusher = GroupCommitFlusher()
    log = CountingLog(delay=0.02)
    tasks = [asyncio.create_task(flusher.sync(log)) for _ in range(n)]
    await asyncio.sleep(0)  # one loop turn, not a timed wait: every task has entered sync()
    tasks[0].cancel()
    results = await asyncio.gather(*tasks, return_exceptions=True)
    assert isinstance(results[0], asyncio.CancelledError)
    assert all(r is None for r in results[1:])
    await flusher.sync(log)


class BarrierLog(CountingLog):
    """A flush that returns only once `barrier` has as many flushes waiting as it has parties: the logs sharing
    the barrier must be flushed at the same time (a flush one after the other breaks the barrier)."""

    def __init__(self, barrier: threading.Barrier) -> None:
        super().__init__(delay=0)
        self.barrier = barrier

    def flush(self) -> None:
        self.barrier.wait()  # BrokenBarrierError after its timeout if the other log is not being flushed too
        super().flush()


async def test_different_logs_flush_concurrently() -> None:
    flusher = GroupCommitFlusher()
    barrier = threading.Barrier(3, timeout=5)
    logs = [BarrierLog(barrier) for _ in range(3)]
    await asyncio.gather(*(flusher.sync(log) for log in logs))
    assert [log.flushes for log in logs] == [1, 1, 1] and flusher.flushes == 3
    await flusher.close()


async def test_a_log_waiting_for_its_flush_does_not_wait_for_another_logs() -> None:
    flusher = GroupCommitFlusher()
    started, release = threading.Event(), threading.Event()
    slow = CountingLog(delay=0)

    def slow_flush() -> None:
        started.set()
        release.wait(10)

    slow.flush = slow_flush  # type: ignore[method-assign]
    fast = CountingLog(delay=0)
    slow_sync = asyncio.create_task(flusher.sync(slow))
    await async_wait_until(started.is_set)  # the slow log's flush is running now
    try:
        async with asyncio.timeout(5):
            await flusher.sync(fast)  # served while the slow log's flush still runs
        assert fast.flushes == 1 and not slow_sync.done()
    finally:
        release.set()
    await slow_sync
    await flusher.close()
