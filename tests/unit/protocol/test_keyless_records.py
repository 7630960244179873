"""Compacted topics refuse records without a key: the record walk reports the batch index of every keyless record,
for every codec and record shape, and agrees with a plain decode."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from protocol import records as rec
from protocol.record_check import check_records

CODECS = [rec.COMPRESSION_NONE, rec.COMPRESSION_GZIP, rec.COMPRESSION_SNAPPY, rec.COMPRESSION_LZ4,
          rec.COMPRESSION_ZSTD]

keys = st.one_of(st.none(), st.binary(max_size=3), st.binary(min_size=60, max_size=300))
values = st.one_of(st.none(), st.binary(max_size=4), st.binary(min_size=100, max_size=400))
headers = st.lists(st.tuples(st.text(max_size=3), st.one_of(st.none(), st.binary(max_size=3))), max_size=2)
records = st.lists(st.builds(rec.Record, key=keys, value=values, headers=headers), min_size=1, max_size=200)


def keyless_indexes(batch: bytes) -> list[int]:
    found: list[int] = []
    header = rec.read_header(batch)
    payload = bytes(rec._records_payload(batch, header))
    check_records(payload, 0, len(payload), header.records_count, found)
    return found


@settings(max_examples=150, deadline=None)
@given(records, st.sampled_from(CODECS))
def test_keyless_indexes_match_a_plain_decode(batch_records, codec) -> None:
    batch = rec.build_batch(batch_records, compression=codec)
    expected = [i for i, r in enumerate(rec.decode_records(batch)) if r.key is None]
    assert keyless_indexes(batch) == expected


def test_long_runs_of_same_shaped_records_are_counted_by_template() -> None:
    shaped = [rec.Record(None if i % 1000 >= 500 else b"k%03d" % (i % 1000), b"v" * 20) for i in range(5000)]
    batch = rec.build_batch(shaped)
    assert keyless_indexes(batch) == [i for i in range(5000) if i % 1000 >= 500]


@pytest.mark.parametrize("codec", CODECS)
def test_validate_batches_refuses_keyless_records_with_kafkas_messages(codec) -> None:
    batch = rec.build_batch([rec.Record(b"a", b"1"), rec.Record(None, b"2"), rec.Record(b"c", None),
                             rec.Record(None, None), rec.Record(None, b"5"), rec.Record(None, b"6")],
                            compression=codec)
    assert rec.validate_batches(batch, check_records=True)  # fine for a topic that is not compacted
    with pytest.raises(rec.KeylessRecordError) as caught:
        rec.validate_batches(batch, check_records=True, require_keys="users-0")
    err = caught.value
    assert err.error_code == rec.ErrorCode.INVALID_RECORD
    assert err.indexes == [1, 3, 4, 5]
    assert err.record_message == "Compacted topic cannot accept message without key in topic partition users-0"
    assert str(err) == (
        "One or more records have been rejected due to 4 record errors in total, and only showing the first three "
        "errors at most: [RecordError(batchIndex=1, message='Compacted topic cannot accept message without key in "
        "topic partition users-0'), RecordError(batchIndex=3, message='Compacted topic cannot accept message "
        "without key in topic partition users-0'), RecordError(batchIndex=4, message='Compacted topic cannot "
        "accept message without key in topic partition users-0')]")


def test_framing_errors_come_before_key_errors() -> None:
    batch = bytearray(rec.build_batch([rec.Record(None, b"x" * 10)]))
    batch[rec.HEADER_SIZE] = 0x7E  # record length runs past the batch
    batch[17:21] = rec.batch_crc(batch, 0, len(batch)).to_bytes(4, "big")
    with pytest.raises(rec.InvalidRecordError) as caught:
        rec.validate_batches(bytes(batch), check_records=True, require_keys="t-0")
    assert not isinstance(caught.value, rec.KeylessRecordError)
