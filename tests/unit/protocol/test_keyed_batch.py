"""build_keyed_batch: the coordinators' batch, the same bytes as build_batch and the header validate_batches reads."""

import pytest

from protocol import records as rec

CASES = [
    [(b"k" * 60, b"v" * 90)],
    [(b"k", None)],
    [(b"a" * 3, b"b" * 2000), (b"c", None), (b"k" * 200, b"")],
    [(bytes([i % 256]) * (i + 1), bytes(i * 7)) for i in range(300)],  # offset deltas and lengths past one varint byte
]


@pytest.mark.parametrize("records", CASES)
@pytest.mark.parametrize("txn", [{}, {"producer_id": 7, "producer_epoch": 3, "transactional": True}])
def test_same_bytes_and_header_as_the_general_builder(records, txn):
    batch, header = rec.build_keyed_batch(records, 1_700_000_000_000, **txn)
    expected = rec.build_batch([rec.Record(key=k, value=v) for k, v in records], timestamp=1_700_000_000_000, **txn)
    assert batch == expected
    assert rec.validate_batches(batch, check_records=True) == [header]
    assert [(r.key, r.value) for r in rec.decode_records(batch)] == records


def test_no_records_is_refused():
    with pytest.raises(ValueError):
        rec.build_keyed_batch([])
