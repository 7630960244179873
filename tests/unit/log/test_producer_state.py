import asyncio

from broker.log.producer_state import (
    INT32_MAX,
    BatchMetadata,
    ProducerStateTable,
    next_sequence,
)
from broker.producer_ids import ProducerIdAllocator
from protocol.errors import ErrorCode
from tests.helpers.waiting import async_assert_stays, async_wait_until


def _batch(first: int, last: int, base: int) -> BatchMetadata:
    return BatchMetadata(first, last, base, base + (last - first), 0)


def test_non_idempotent_batches_always_append():
    table = ProducerStateTable()
    assert table.check(-1, -1, -1, -1).error == ErrorCode.NONE
    assert table.check(-1, -1, -1, -1).duplicate_of is None


def test_a_producer_without_state_starts_at_any_sequence():
    # Kafka (KIP-360): an unknown producer (new, expired, or whose batches were all deleted) is accepted at any
    # sequence; the next batch must follow it.
    table = ProducerStateTable()
    assert table.check(7, 0, 0, 4).error == ErrorCode.NONE
    assert table.check(7, 0, 5, 9).error == ErrorCode.NONE
    table.record(7, 0, _batch(5, 9, 100))
    assert table.check(7, 0, 11, 12).error == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
    assert table.check(7, 0, 10, 12).error == ErrorCode.NONE


def test_in_sequence_duplicate_and_gap():
    table = ProducerStateTable()
    table.record(7, 0, _batch(0, 4, 100))
    assert table.check(7, 0, 5, 9).error == ErrorCode.NONE
    table.record(7, 0, _batch(5, 9, 105))
    dup = table.check(7, 0, 0, 4)
    assert dup.error == ErrorCode.NONE and dup.duplicate_of == _batch(0, 4, 100)
    assert table.check(7, 0, 11, 12).error == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER


def test_only_last_five_batches_are_remembered():
    table = ProducerStateTable()
    for i in range(7):
        table.record(7, 0, _batch(i, i, i))
    assert table.check(7, 0, 6, 6).duplicate_of is not None
    assert table.check(7, 0, 2, 2).duplicate_of is not None
    # Batch 1 fell out of the cache: it is no longer a duplicate, and not in sequence either.
    assert table.check(7, 0, 1, 1).error == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER


def test_epochs():
    table = ProducerStateTable()
    table.record(7, 3, _batch(0, 0, 0))
    assert table.check(7, 2, 1, 1).error == ErrorCode.INVALID_PRODUCER_EPOCH
    assert table.check(7, 4, 0, 0).error == ErrorCode.NONE
    assert table.check(7, 4, 1, 1).error == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
    table.record(7, 4, _batch(0, 0, 1))
    assert table.entry(7).epoch == 4
    # An older epoch's late record does not roll the entry back.
    table.record(7, 3, _batch(1, 1, 2))
    assert table.entry(7).epoch == 4 and table.entry(7).last_seq == 0


def test_sequence_wraps_at_int32_max():
    assert next_sequence(INT32_MAX) == 0
    table = ProducerStateTable()
    table.record(7, 0, _batch(INT32_MAX - 1, INT32_MAX, 0))
    assert table.check(7, 0, 0, 3).error == ErrorCode.NONE


def test_allocator_persists_each_block_before_use():
    persisted: list[int] = []

    async def persist(block_end: int) -> None:
        persisted.append(block_end)

    async def run() -> None:
        alloc = ProducerIdAllocator(0, persist)
        ids = [await alloc.allocate() for _ in range(ProducerIdAllocator.BLOCK_SIZE + 1)]
        assert ids == list(range(ProducerIdAllocator.BLOCK_SIZE + 1))
        assert persisted == [ProducerIdAllocator.BLOCK_SIZE, 2 * ProducerIdAllocator.BLOCK_SIZE]
        # After a restart the allocator resumes past everything that could have been handed out.
        resumed = ProducerIdAllocator(persisted[-1], persist)
        assert await resumed.allocate() == 2 * ProducerIdAllocator.BLOCK_SIZE

    asyncio.run(run())


def test_allocations_during_a_block_reservation_wait_for_it_and_share_it():
    persisted: list[int] = []
    reserving: list[int] = []
    release = None

    async def slow_persist(block_end: int) -> None:
        reserving.append(block_end)
        await release.wait()  # the journal fsync, in a worker thread: the loop serves meanwhile
        persisted.append(block_end)

    async def run() -> None:
        nonlocal release
        release = asyncio.Event()
        alloc = ProducerIdAllocator(0, slow_persist)
        waiting = [asyncio.ensure_future(alloc.allocate()) for _ in range(3)]
        await async_wait_until(lambda: reserving, what="the block's reservation")
        # no id before its block is durable
        await async_assert_stays(lambda: not any(w.done() for w in waiting) and persisted == [], 0.05,
                                 "no id handed out before the block is durable")
        release.set()
        assert sorted(await asyncio.gather(*waiting)) == [0, 1, 2]
        assert persisted == [ProducerIdAllocator.BLOCK_SIZE]  # one reservation for all three

    asyncio.run(run())


def test_a_failed_reservation_hands_out_nothing_and_the_next_call_retries():
    calls: list[int] = []

    async def failing_then_ok(block_end: int) -> None:
        calls.append(block_end)
        if len(calls) == 1:
            raise OSError("fsync failed")

    async def run() -> None:
        alloc = ProducerIdAllocator(0, failing_then_ok)
        try:
            await alloc.allocate()
        except OSError:
            pass
        else:
            raise AssertionError("the failed reservation handed out an id")
        assert await alloc.allocate() == 0
        assert calls == [ProducerIdAllocator.BLOCK_SIZE, ProducerIdAllocator.BLOCK_SIZE]

    asyncio.run(run())
