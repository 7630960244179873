"""MetadataJournal.commit: the append and fsync run in a worker thread while the loop serves; commits are written and
applied one at a time in call order, each applied only after its fsync, even when its caller goes away."""

from __future__ import annotations

import asyncio
import threading

import pytest

from broker.cluster.journal import MetadataJournal
from broker.cluster.topics import PRODUCER_IDS_RECORD
from tests.helpers.waiting import async_assert_stays, async_wait_until


class SlowLog:
    """A stand-in for the journal's PartitionLog whose flush blocks until released (a slow disk)."""

    def __init__(self) -> None:
        self.events: list[str] = []
        self.release = threading.Event()
        self.loop_thread = threading.get_ident()
        self.fail_next = False

    def append(self, batch: bytes, *, log_append_time=None) -> None:
        assert threading.get_ident() != self.loop_thread  # never on the loop
        self.events.append("append")

    def flush(self) -> None:
        assert self.release.wait(10)
        if self.fail_next:
            self.fail_next = False
            raise OSError("fsync failed")
        self.events.append("fsync")


def _entry(n: int) -> list[tuple[int, dict]]:
    return [(PRODUCER_IDS_RECORD, {"broker_id": 1, "broker_epoch": 0, "next_producer_id": n})]


def test_commits_run_off_the_loop_in_order_and_apply_after_their_fsync() -> None:
    async def scenario() -> None:
        plog = SlowLog()
        journal = MetadataJournal(plog)
        first = asyncio.ensure_future(journal.commit(_entry(1), lambda: plog.events.append("apply 1")))
        second = asyncio.ensure_future(journal.commit(_entry(2), lambda: plog.events.append("apply 2")))
        await async_wait_until(lambda: "append" in plog.events, what="the first commit's append")
        # A window: the loop keeps running (these checks run on it) while the fsync is stuck, and nothing is
        # applied.
        await async_assert_stays(lambda: not first.done() and "apply 1" not in plog.events, 0.1,
                                 "nothing applied before the fsync")
        plog.release.set()
        await asyncio.gather(first, second)
        assert plog.events == ["append", "fsync", "apply 1", "append", "fsync", "apply 2"]

    asyncio.run(scenario())


def test_a_cancelled_caller_still_gets_its_change_written_then_applied() -> None:
    async def scenario() -> None:
        plog = SlowLog()
        journal = MetadataJournal(plog)
        waiter = asyncio.ensure_future(journal.commit(_entry(1), lambda: plog.events.append("apply")))
        await async_wait_until(lambda: "append" in plog.events)  # the write is under way in the worker
        waiter.cancel()
        plog.release.set()
        with pytest.raises(asyncio.CancelledError):
            await waiter
        await journal.commit(_entry(2), lambda: None)  # queued behind the first one
        assert plog.events[:3] == ["append", "fsync", "apply"]

    asyncio.run(scenario())


def test_a_failed_fsync_applies_nothing_and_raises() -> None:
    async def scenario() -> None:
        plog = SlowLog()
        plog.fail_next = True
        plog.release.set()
        journal = MetadataJournal(plog)
        applied: list[int] = []
        with pytest.raises(OSError):
            await journal.commit(_entry(1), lambda: applied.append(1))
        assert applied == []
        await journal.commit(_entry(2), lambda: applied.append(2))
        assert applied == [2]

    asyncio.run(scenario())
