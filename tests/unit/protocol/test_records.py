"""RecordBatch v2: CRC-32C, validation errors, patching, record encode/decode, real-client batches."""

from __future__ import annotations

import struct
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from protocol import records as rec
from protocol.codec import request_codec
from protocol.errors import ErrorCode
from protocol.framing import decode_request_header

FIXTURES = Path(__file__).parent / "fixtures"


def crc32c_reference(data: bytes) -> int:
    """Bitwise CRC-32C (Castagnoli, reflected polynomial 0x82F63B78): independent of the crc32c package."""
    crc = 0xFFFFFFFF
    for byte in data:
        crc ^= byte
        for _ in range(8):
            crc = (crc >> 1) ^ (0x82F63B78 if crc & 1 else 0)
    return crc ^ 0xFFFFFFFF


def test_crc32c_reference_check_value() -> None:
    assert crc32c_reference(b"123456789") == 0xE3069283  # the standard CRC-32C check value


def sample(n: int = 3, **kw) -> bytes:
    records = [rec.Record(key=f"k{i}".encode(), value=b"v" * i, headers=[("h", b"x")]) for i in range(n)]
    return rec.build_batch(records, timestamp=1_700_000_000_000, **kw)


def reseal(buf: bytearray) -> bytearray:
    struct.pack_into(">I", buf, 17, crc32c_reference(bytes(buf[21:])))
    return buf


def test_header_layout_and_crc() -> None:
    batch = sample(3, base_offset=42, producer_id=7, producer_epoch=2, base_sequence=5)
    h = rec.read_header(batch)
    assert rec.HEADER_SIZE == 61
    assert (h.base_offset, h.magic, h.records_count, h.last_offset_delta) == (42, 2, 3, 2)
    assert (h.producer_id, h.producer_epoch, h.base_sequence) == (7, 2, 5)
    assert h.size == len(batch) and h.batch_length == len(batch) - 12
    assert h.crc == crc32c_reference(batch[21:])
    assert h.last_offset == 44 and h.next_offset == 45
    assert not (h.is_control or h.is_transactional or h.is_log_append_time or h.compression)


def test_records_roundtrip_with_nulls_headers_and_timestamps() -> None:
    records = [
        rec.Record(key=None, value=b"a", timestamp=10),
        rec.Record(key=b"", value=None, headers=[("x", None), ("y", b"")], timestamp=5),
        rec.Record(key=b"k" * 300, value=b"v" * 70000, timestamp=20),
    ]
    batch = rec.build_batch(records, base_offset=100)
    h = rec.validate_batches(batch)[0]
    assert (h.base_timestamp, h.max_timestamp) == (10, 20)
    out = rec.decode_records(batch)
    assert [(r.key, r.value, r.headers, r.timestamp, r.offset) for r in out] == [
        (None, b"a", [], 10, 100),
        (b"", None, [("x", None), ("y", b"")], 5, 101),
        (b"k" * 300, b"v" * 70000, [], 20, 102),
    ]


def test_gzip_roundtrip() -> None:
    batch = sample(20, compression=rec.COMPRESSION_GZIP)
    h = rec.validate_batches(batch)[0]
    assert h.compression == rec.COMPRESSION_GZIP
    assert [r.value for r in rec.decode_records(batch)] == [b"v" * i for i in range(20)]


def test_unknown_codec_is_not_decoded_and_a_mislabelled_payload_is_corrupt() -> None:
    buf = bytearray(sample(2))
    struct.pack_into(">h", buf, 21, rec.COMPRESSION_ZSTD)
    reseal(buf)
    assert rec.validate_batches(buf)[0].compression == rec.COMPRESSION_ZSTD  # header checks only
    with pytest.raises(rec.CorruptRecordError):
        rec.validate_batches(buf, check_records=True)
    with pytest.raises(rec.CorruptRecordError):
        rec.decode_records(buf)
    struct.pack_into(">h", buf, 21, 5)
    with pytest.raises(rec.UnsupportedCompressionError):
        rec.decode_records(reseal(buf))


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.none() | st.binary(max_size=40), st.none() | st.binary(max_size=200),
                          st.lists(st.tuples(st.text(max_size=8), st.none() | st.binary(max_size=8)), max_size=3),
                          st.integers(-(2 ** 40), 2 ** 40)), min_size=1, max_size=20),
       st.sampled_from([rec.COMPRESSION_NONE, rec.COMPRESSION_GZIP, rec.COMPRESSION_SNAPPY, rec.COMPRESSION_LZ4,
                        rec.COMPRESSION_ZSTD]))
def test_records_roundtrip_property(items, compression) -> None:
    records = [rec.Record(k, v, h, ts) for k, v, h, ts in items]
    batch = rec.build_batch(records, base_offset=9, compression=compression)
    rec.validate_batches(batch, check_records=True)
    out = rec.decode_records(batch)
    assert [(r.key, r.value, r.headers, r.timestamp) for r in out] == items
    assert [r.offset for r in out] == list(range(9, 9 + len(items)))


# --- validation --------------------------------------------------------------------------------------------------
def test_validate_several_batches() -> None:
    data = sample(1) + sample(2) + sample(3)
    assert [h.records_count for h in rec.validate_batches(data)] == [1, 2, 3]
    assert rec.validate_batches(b"") == []


def test_bad_crc_is_corrupt() -> None:
    buf = bytearray(sample())
    buf[-1] ^= 0xFF
    with pytest.raises(rec.CorruptRecordError) as err:
        rec.validate_batches(buf)
    assert err.value.error_code == ErrorCode.CORRUPT_MESSAGE


@pytest.mark.parametrize("cut", [1, 30, 61, 70])
def test_truncated_is_corrupt(cut: int) -> None:
    batch = sample()
    with pytest.raises(rec.CorruptRecordError):
        rec.validate_batches(batch + batch[:cut])
    with pytest.raises(rec.CorruptRecordError):
        rec.validate_batches(batch[:-cut])


@pytest.mark.parametrize("length", [0, 48, -1, 1 << 30])
def test_bad_batch_length_is_corrupt(length: int) -> None:
    buf = bytearray(sample())
    struct.pack_into(">i", buf, 8, length)
    with pytest.raises(rec.CorruptRecordError):
        rec.validate_batches(buf)


def test_old_magic_is_invalid() -> None:
    buf = bytearray(sample())
    buf[16] = 1
    with pytest.raises(rec.InvalidRecordError) as err:
        rec.validate_batches(buf)
    assert err.value.error_code == ErrorCode.INVALID_RECORD


@pytest.mark.parametrize(("count", "delta"), [(0, -1), (-1, 0), (3, 1), (2, 2)])
def test_bad_counts_are_invalid(count: int, delta: int) -> None:
    buf = bytearray(sample(3))
    struct.pack_into(">i", buf, 57, count)
    struct.pack_into(">i", buf, 23, delta)
    with pytest.raises(rec.InvalidRecordError):
        rec.validate_batches(reseal(buf))


def test_control_batch_refused_from_clients() -> None:
    batch = sample(1, control=True)
    with pytest.raises(rec.InvalidRecordError):
        rec.validate_batches(batch)
    assert rec.validate_batches(batch, allow_control=True)[0].is_control


def test_iter_batches_stops_at_partial_tail() -> None:
    a, b = sample(1), sample(2)
    data = a + b + b[:40]
    assert [(pos, h.records_count) for pos, h in rec.iter_batches(data)] == [(0, 1), (len(a), 2)]
    assert [len(view) for _, _, view in rec.iter_batch_views(a + b + b[:70])] == [len(a), len(b)]


# --- patching ----------------------------------------------------------------------------------------------------
def test_patch_base_offset_and_leader_epoch_keep_crc() -> None:
    buf = bytearray(sample(2) + sample(3))
    second = rec.read_header(buf).size
    rec.patch_base_offset(buf, second, 1234)
    rec.patch_leader_epoch(buf, second, 9)
    headers = rec.validate_batches(buf)
    assert (headers[1].base_offset, headers[1].partition_leader_epoch) == (1234, 9)
    assert [r.offset for r in rec.decode_records(memoryview(buf)[second:])] == [1234, 1235, 1236]
    both = bytearray(sample(2) + sample(3))
    rec.patch_base_offset_and_leader_epoch(both, second, 1234, rec.read_header(both, second).batch_length, 9)
    assert both == buf


def test_patch_log_append_time() -> None:
    buf = bytearray(sample(1) + sample(3))
    second = rec.read_header(buf).size
    rec.patch_log_append_time(buf, second, 99)
    h = rec.validate_batches(buf)[1]  # CRC recomputed
    assert h.is_log_append_time and h.max_timestamp == 99
    assert h.crc == crc32c_reference(bytes(buf[second + 21:]))
    assert {r.timestamp for r in rec.decode_records(memoryview(buf)[second:])} == {99}


# --- batches written by real clients -----------------------------------------------------------------------------
@pytest.mark.parametrize("path", sorted(FIXTURES.glob("*-Produce-*.hex")), ids=lambda p: p.stem)
def test_real_client_batches(path: Path) -> None:
    frame = bytes.fromhex(path.read_text().strip())
    header, offset = decode_request_header(frame)
    body = request_codec(header.api_key, header.api_version).decode(frame[offset:])
    records = bytes(body.topic_data[0].partition_data[0].records)
    headers = rec.validate_batches(records, check_records=True)
    assert headers
    for pos, h in rec.iter_batches(records):
        assert h.crc == crc32c_reference(records[pos + 21:pos + h.size])
        assert len(rec.decode_records(records[pos:pos + h.size])) == h.records_count
