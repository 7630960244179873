from broker.producer_state import (
    INT32_MAX,
    BatchMetadata,
    ProducerIdAllocator,
    ProducerStateTable,
    next_sequence,
)
from protocol.errors import ErrorCode


def _batch(first: int, last: int, base: int) -> BatchMetadata:
    return BatchMetadata(first, last, base, base + (last - first), 0)


def test_non_idempotent_batches_always_append():
    table = ProducerStateTable()
    assert table.check(-1, -1, -1, -1).error == ErrorCode.NONE
    assert table.check(-1, -1, -1, -1).duplicate_of is None


def test_new_producer_must_start_at_zero():
    table = ProducerStateTable()
    assert table.check(7, 0, 0, 4).error == ErrorCode.NONE
    assert table.check(7, 0, 5, 9).error == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER


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
    alloc = ProducerIdAllocator(0, persisted.append)
    ids = [alloc.allocate() for _ in range(ProducerIdAllocator.BLOCK_SIZE + 1)]
    assert ids == list(range(ProducerIdAllocator.BLOCK_SIZE + 1))
    assert persisted == [ProducerIdAllocator.BLOCK_SIZE, 2 * ProducerIdAllocator.BLOCK_SIZE]
    # After a restart the allocator resumes past everything that could have been handed out.
    resumed = ProducerIdAllocator(persisted[-1], persisted.append)
    assert resumed.allocate() == 2 * ProducerIdAllocator.BLOCK_SIZE
