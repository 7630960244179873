"""primitives.Reader: decoding copies no frame, and with views=True not even the bytes/records fields."""

from __future__ import annotations

import uuid

import pytest

from protocol.codec import response_codec
from protocol.errors import DecodeError
from protocol.primitives import Reader, read_compact_bytes, read_exact, read_uvarint_io

FETCH, SHARE_FETCH = 1, 78
RECORDS = bytes(range(256)) * 40


def share_fetch_frame() -> bytearray:
    body = response_codec(SHARE_FETCH, 2).encode({
        "acquisition_lock_timeout_ms": 30_000, "responses": [{"topic_id": uuid.uuid4(), "partitions": [
            {"partition_index": 3, "records": RECORDS,
             "acquired_records": [{"first_offset": 0, "last_offset": 9, "delivery_count": 1}]}]}]})
    return bytearray(body)


def records_at(frame: bytearray) -> int:
    return bytes(frame).index(RECORDS)


def test_views_are_slices_of_the_frame() -> None:
    frame = share_fetch_frame()
    value = response_codec(SHARE_FETCH, 2).decode(memoryview(frame), views=True)
    records = value.responses[0].partitions[0].records
    assert isinstance(records, memoryview) and records.readonly
    assert records == RECORDS
    frame[records_at(frame)] ^= 0xFF  # the same memory: a change to the frame shows through
    assert records[0] == RECORDS[0] ^ 0xFF


def test_without_views_fields_are_copies() -> None:
    frame = share_fetch_frame()
    for data in (memoryview(frame), bytes(frame), frame):
        records = response_codec(SHARE_FETCH, 2).decode(data).responses[0].partitions[0].records
        assert type(records) is bytes and records == RECORDS
    records = response_codec(SHARE_FETCH, 2).decode(memoryview(frame)).responses[0].partitions[0].records
    frame[records_at(frame)] ^= 0xFF
    assert records == RECORDS


def test_tagged_fields_decode_with_views() -> None:
    codec = response_codec(FETCH, 16)
    body = codec.encode({"responses": [{"topic_id": uuid.uuid4(), "partitions": [
        {"partition_index": 0, "records": RECORDS, "diverging_epoch": {"epoch": 4, "end_offset": 17},
         "current_leader": {"leader_id": 1, "leader_epoch": 2}}]}]})
    partition = codec.decode(body, views=True).responses[0].partitions[0]
    assert isinstance(partition.records, memoryview) and partition.records == RECORDS
    assert (partition.diverging_epoch.epoch, partition.diverging_epoch.end_offset) == (4, 17)
    assert (partition.current_leader.leader_id, partition.current_leader.leader_epoch) == (1, 2)


def test_truncated_input_is_a_decode_error() -> None:
    frame = bytes(share_fetch_frame())
    codec = response_codec(SHARE_FETCH, 2)
    for cut in (1, 7, len(frame) - len(RECORDS) // 2, len(frame) - 1):
        for views in (False, True):
            with pytest.raises(DecodeError):
                codec.decode(frame[:cut], views=views)


def test_reader_as_a_stream() -> None:
    r = Reader(memoryview(b"\x00abcdef")[1:])
    assert (r.end, r.remaining()) == (6, 6)
    assert r.read(2) == b"ab" and r.tell() == 2
    assert r.read(10) == b"cdef" and r.read(1) == b""  # short at the end, as a stream's read
    r.seek(1)
    assert r.read() == b"bcdef"
    with pytest.raises(DecodeError):
        read_exact(Reader(b"abc"), 4)
    with pytest.raises(DecodeError):
        read_compact_bytes(Reader(b"\x05ab"))  # four bytes announced, two there


@pytest.mark.parametrize(("data", "value"), [
    (b"\x00", 0), (b"\x7f", 127), (b"\x80\x01", 128), (b"\xff\x7f", 16383), (b"\x80\x80\x01", 16384),
    (b"\xff\xff\xff\xff\x0f", 0xFFFFFFFF)])
def test_uvarints(data: bytes, value: int) -> None:
    r = Reader(data + b"\x99")
    assert read_uvarint_io(r) == value and r.tell() == len(data)


@pytest.mark.parametrize("data", [b"", b"\x80", b"\xff\xff", b"\xff\xff\xff\xff\xff\x01"])
def test_bad_uvarints(data: bytes) -> None:
    with pytest.raises(DecodeError):
        read_uvarint_io(Reader(data))
