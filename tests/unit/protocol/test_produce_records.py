"""The request checks of a Produce's records (protocol.produce_records), as Kafka's record walk, its
RequestUtils.hasTransactionalRecords and ProduceRequest.validateRecords answer them."""

from __future__ import annotations

import struct

import pytest

from protocol import produce_records as pr
from protocol import records as rec
from protocol.errors import ErrorCode

GOOD = rec.build_batch([rec.Record(b"k", b"v")], timestamp=1_000)
TXN = rec.build_batch([rec.Record(b"k", b"v")], timestamp=1_000, producer_id=1, producer_epoch=0, base_sequence=0,
                      transactional=True)


def patched(batch: bytes, at: int, fmt: str, value: int) -> bytes:
    buf = bytearray(batch)
    struct.pack_into(fmt, buf, at, value)
    return bytes(buf)


def test_the_walk_stops_at_a_partial_batch_and_fails_on_what_it_cannot_pass():
    assert pr.next_batch(GOOD, 0) == (len(GOOD), 2)
    assert pr.next_batch(GOOD + GOOD[:30], len(GOOD)) is None  # a partial batch is no batch
    assert pr.next_batch(GOOD[:11], 0) is None
    assert pr.next_batch(patched(GOOD, 8, ">i", 20)[:16], 0) is None  # length fine, magic not there yet
    with pytest.raises(pr.BatchWalkError, match=r"Record size 13 is less than the minimum record overhead \(14\)"):
        pr.next_batch(patched(GOOD, 8, ">i", 13), 0)
    with pytest.raises(pr.BatchWalkError, match="Invalid magic found in record: 3"):
        pr.next_batch(patched(GOOD, 16, ">b", 3), 0)
    assert pr.next_batch(patched(GOOD, 16, ">b", 1), 0) == (len(GOOD), 1)


def test_transactional_records_are_found_in_first_batches_in_order():
    assert not pr.has_transactional_records([GOOD, None, b"", GOOD + TXN])  # only first batches count
    assert pr.has_transactional_records([GOOD, TXN])
    assert pr.has_transactional_records([TXN, patched(GOOD, 16, ">b", 7)])  # found before the bad batch
    assert not pr.has_transactional_records([patched(TXN, 16, ">b", 1)])  # legacy batches never are
    with pytest.raises(pr.BatchWalkError):
        pr.has_transactional_records([patched(GOOD, 16, ">b", 7), TXN])


@pytest.mark.parametrize(("records", "version", "expected"), [
    (GOOD, 9, ErrorCode.NONE),
    (GOOD + GOOD[:40], 9, ErrorCode.NONE),  # a trailing partial batch is ignored
    (GOOD + GOOD, 9, ErrorCode.INVALID_RECORD),
    (b"", 9, ErrorCode.INVALID_RECORD),
    (None, 9, ErrorCode.INVALID_RECORD),
    (GOOD[:40], 9, ErrorCode.INVALID_RECORD),
    (patched(GOOD, 16, ">b", 1), 9, ErrorCode.INVALID_RECORD),
    (patched(GOOD, 16, ">b", 3), 9, ErrorCode.CORRUPT_MESSAGE),
    (GOOD + patched(GOOD, 16, ">b", 3), 9, ErrorCode.CORRUPT_MESSAGE),
    (patched(GOOD, 21, ">h", 4), 6, ErrorCode.UNSUPPORTED_COMPRESSION_TYPE),
    (patched(GOOD, 21, ">h", 4), 7, ErrorCode.NONE),  # (the log checks the CRC later)
])
def test_validate_records(records, version, expected):
    assert pr.validate_records(version, records) == expected


def test_an_unknown_codec_before_v7_fails_the_request():
    with pytest.raises(pr.UnknownCodecError):
        pr.validate_records(5, patched(GOOD, 21, ">h", 6))
    assert pr.validate_records(7, patched(GOOD, 21, ">h", 6)) == ErrorCode.NONE
