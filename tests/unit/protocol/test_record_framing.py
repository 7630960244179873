"""Record framing: produce validation (`validate_client_batch`, and `validate_batches(check_records=True)`) and
the decoders refuse malformed records as Kafka's readers do (a negative key, value or header value length is a
null, as in Kafka's DefaultRecord); the fast template check agrees with a plain field-by-field decode on mutated
batches."""

from __future__ import annotations

import struct
import time

import cramjam
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from protocol import compression as codecs
from protocol import records as rec
from protocol.record_check import FramingError, check_records
from tests.helpers.record_batches import damaged_zstd

CODECS = [rec.COMPRESSION_NONE, rec.COMPRESSION_GZIP, rec.COMPRESSION_SNAPPY, rec.COMPRESSION_LZ4,
          rec.COMPRESSION_ZSTD]


def varint(value: int) -> bytes:
    out = bytearray()
    rec._write_varint(out, value)
    return bytes(out)


def batch_with_payload(payload: bytes, count: int, compression: int = rec.COMPRESSION_NONE, *,
                       compressed: bytes | None = None) -> bytes:
    """A batch with a valid header and CRC around arbitrary record bytes (compressed as asked, or `compressed`)."""
    body = payload if compression == rec.COMPRESSION_NONE else codecs.compress(compression, payload)
    body = compressed if compressed is not None else body
    buf = bytearray(rec.HEADER_SIZE + len(body))
    rec.HEADER.pack_into(buf, 0, 0, len(buf) - rec.LOG_OVERHEAD, -1, rec.MAGIC, 0, compression, count - 1,
                         1_000, 1_000, -1, -1, -1, count)
    buf[rec.HEADER_SIZE:] = body
    struct.pack_into(">I", buf, 17, rec.batch_crc(buf, 0, len(buf)))
    return bytes(buf)


def record_bytes(*fields: bytes) -> bytes:
    body = b"".join(fields)
    return varint(len(body)) + body


def reported_batch() -> bytes:
    """The issue's batch: one record declaring 2**62 headers whose first key length is -2 (valid CRC)."""
    body = b"\x00" + varint(0) + varint(0) + varint(-1) + varint(-1) + varint(2 ** 62) + varint(-2) + b"\x00" * 4
    return batch_with_payload(varint(len(body)) + body, 1)


def client_check(batch: bytes) -> rec.BatchHeader:
    return rec.validate_client_batch(batch, max_message_bytes=1 << 30)


def expect_refused(batch: bytes, error: type[rec.RecordError] = rec.InvalidRecordError) -> None:
    with pytest.raises(error):
        rec.validate_batches(batch, check_records=True)
    with pytest.raises(error):
        client_check(batch)
    with pytest.raises(rec.RecordError):
        rec.decode_records(batch)


def test_the_reported_batch_is_refused_and_never_loops() -> None:
    batch = reported_batch()
    assert rec.validate_batches(batch)  # header and CRC are fine: only the record walk sees it
    started = time.monotonic()
    expect_refused(batch)
    assert time.monotonic() - started < 5  # (a bound for a hang, not a speed claim)


@pytest.mark.parametrize("compression", CODECS)
def test_negative_lengths_are_nulls(compression: int) -> None:
    """Kafka reads any negative key, value or header value length as null (writers use -1)."""
    payload = record_bytes(b"\x00", varint(0), varint(0), varint(-2), varint(-3), varint(1), varint(1), b"h",
                           varint(-7))
    batch = batch_with_payload(payload, 1, compression)
    rec.validate_batches(batch, check_records=True)
    client_check(batch)
    [record] = rec.decode_records(batch)
    assert (record.key, record.value, record.headers) == (None, None, [("h", None)])
    with pytest.raises(rec.KeylessRecordError):  # a compacted topic refuses it: it has no key
        rec.validate_client_batch(batch, max_message_bytes=1 << 30, require_keys="t-0")


@pytest.mark.parametrize("case", [
    "negative_record_length", "negative_header_count", "negative_header_key_length", "header_count_past_end",
    "key_past_end", "fields_short_of_record_end", "record_past_batch", "bytes_left_over",
    "count_larger_than_bytes", "unterminated_varint",
])
@pytest.mark.parametrize("compression", CODECS)
def test_malformed_records_are_refused_by_every_path(case: str, compression: int) -> None:
    good = record_bytes(b"\x00", varint(0), varint(0), varint(-1), varint(3), b"abc", varint(0))
    count = 1
    if case == "negative_record_length":
        payload = varint(-5) + good
    elif case == "negative_header_count":
        payload = record_bytes(b"\x00", varint(0), varint(0), varint(-1), varint(-1), varint(-1))
    elif case == "negative_header_key_length":
        payload = record_bytes(b"\x00", varint(0), varint(0), varint(-1), varint(-1), varint(1), varint(-1),
                               varint(-1))
    elif case == "header_count_past_end":
        payload = record_bytes(b"\x00", varint(0), varint(0), varint(-1), varint(-1), varint(2 ** 40))
    elif case == "key_past_end":
        payload = record_bytes(b"\x00", varint(0), varint(0), varint(50), b"k", varint(-1), varint(0))
    elif case == "fields_short_of_record_end":
        payload = record_bytes(b"\x00", varint(0), varint(0), varint(-1), varint(-1), varint(0), b"\x00\x00")
    elif case == "record_past_batch":
        payload = good[:-1]
    elif case == "bytes_left_over":
        payload = good + b"\x00" * 8
    elif case == "count_larger_than_bytes":
        payload, count = good, 2 ** 30
    else:
        payload = varint(7) + b"\x00" + b"\xff" * 6
    expect_refused(batch_with_payload(payload, count, compression))


def resealed(batch: bytearray) -> bytearray:
    struct.pack_into(">i", batch, 8, len(batch) - rec.LOG_OVERHEAD)
    struct.pack_into(">I", batch, 17, rec.batch_crc(batch, 0, len(batch)))
    return batch


@pytest.mark.parametrize("compression", CODECS[1:])
def test_payloads_that_do_not_decompress_are_unknown_server_error(compression: int) -> None:
    """Kafka fails a produce whose payload does not decompress with an unexpected exception: UNKNOWN_SERVER_ERROR
    (with the log start offset); the decoders see corrupt records."""
    good = rec.build_batch([rec.Record(b"k", b"value %d" % i) for i in range(50)], compression=compression)
    # a compressed stream cut short, with a valid batch length and CRC again
    cut = resealed(bytearray(good[:-6]))
    assert rec.validate_batches(cut)
    with pytest.raises(rec.UndecodableRecordsError) as err:
        client_check(cut)
    assert (err.value.error_code, err.value.with_log_start) == (rec.ErrorCode.UNKNOWN_SERVER_ERROR, True)
    with pytest.raises(rec.CorruptRecordError):
        rec.decode_records(cut)
    # a payload that is not the codec's format at all
    junk = bytearray(batch_with_payload(b"x" * 40, 1))
    struct.pack_into(">h", junk, 21, compression)
    with pytest.raises(rec.UndecodableRecordsError):
        client_check(resealed(junk))


def test_gzip_with_damaged_compressed_bytes_is_refused() -> None:
    """The issue's case: corrupt gzip data with a recomputed batch CRC (gzip's own CRC-32 catches it)."""
    batch = bytearray(rec.build_batch([rec.Record(b"k", b"value %d" % i) for i in range(50)],
                                      compression=rec.COMPRESSION_GZIP))
    mid = rec.HEADER_SIZE + (len(batch) - rec.HEADER_SIZE) // 2
    for i in range(mid, mid + 8):
        batch[i] ^= 0x5A
    with pytest.raises(rec.UndecodableRecordsError):
        client_check(resealed(batch))


def test_lz4_frames_are_read_as_kafkas_java_reader_reads_them() -> None:
    """Kafka's Lz4BlockInputStream refuses linked blocks (LZ4's default frame), so does the produce check; what
    Shoal writes has independent blocks."""
    payload = b"".join(record_bytes(b"\x00", varint(0), varint(i), varint(-1), varint(50), b"v" * 50, varint(0))
                       for i in range(2000))  # over one 64 KB block
    linked = bytes(cramjam.lz4.compress(payload))
    assert not linked[4] & 0x20  # FLG: block independence unset
    with pytest.raises(rec.UndecodableRecordsError, match="dependent block"):
        client_check(batch_with_payload(payload, 2000, rec.COMPRESSION_LZ4, compressed=linked))
    ours = codecs.compress(rec.COMPRESSION_LZ4, payload)
    assert ours[:4] == b"\x04\x22\x4d\x18" and ours[4] & 0x20 and ours[4] >> 6 == 1
    assert client_check(batch_with_payload(payload, 2000, rec.COMPRESSION_LZ4)).records_count == 2000


@pytest.mark.parametrize(("change", "error"), [
    (lambda b: struct.pack_into(">q", b, 0, 42), rec.InvalidRecordError),  # base offset not 0
    (lambda b: struct.pack_into(">i", b, 57, 4), rec.InvalidRecordError),  # count and offsets disagree
    (lambda b: struct.pack_into(">h", b, 21, 0x20), rec.InvalidRecordError),  # a control batch
    (lambda b: struct.pack_into(">q", b, 43, 7), rec.InvalidRecordError),  # a producer id without sequence
    (lambda b: struct.pack_into(">h", b, 21, 5), rec.UndecodableRecordsError),  # codec id 5
])
def test_client_batch_header_checks(change, error) -> None:
    batch = bytearray(rec.build_batch([rec.Record(b"k", b"v") for _ in range(3)]))
    change(batch)
    with pytest.raises(error):
        client_check(resealed(batch))


def test_client_batch_check_order() -> None:
    """Kafka's log checks the base offset, then the size, then the CRC."""
    batch = bytearray(rec.build_batch([rec.Record(b"k", b"v" * 100)]))
    struct.pack_into(">q", batch, 0, 5)
    batch[-1] ^= 1  # and a bad CRC
    with pytest.raises(rec.InvalidRecordError):
        rec.validate_client_batch(batch, max_message_bytes=10)
    struct.pack_into(">q", batch, 0, 0)
    with pytest.raises(rec.RecordsTooLargeError):
        rec.validate_client_batch(batch, max_message_bytes=10)
    with pytest.raises(rec.CorruptRecordError):
        client_check(batch)
    assert not rec.CorruptRecordError.with_log_start and not rec.RecordsTooLargeError.with_log_start


@pytest.mark.parametrize("compression", CODECS[1:])
def test_record_count_is_checked_inside_compressed_payloads(compression: int) -> None:
    records = b"".join(record_bytes(b"\x00", varint(0), varint(i), varint(-1), varint(1), b"v", varint(0))
                       for i in range(3))
    rec.validate_batches(batch_with_payload(records, 3, compression), check_records=True)
    expect_refused(batch_with_payload(records, 2, compression))
    expect_refused(batch_with_payload(records, 4, compression))


def test_decompression_is_bounded(monkeypatch) -> None:
    monkeypatch.setattr(rec, "MAX_DECOMPRESSED_BYTES", 100_000)
    records = [rec.Record(None, bytes(50_000)) for _ in range(4)]  # compresses to almost nothing
    for compression in CODECS[1:]:
        batch = rec.build_batch(records, compression=compression)
        assert len(batch) < 50_000
        with pytest.raises(rec.RecordsTooLargeError) as err:
            rec.validate_batches(batch, check_records=True)
        assert err.value.error_code == rec.ErrorCode.MESSAGE_TOO_LARGE


def test_snappy_reads_java_xerial_framing_and_raw_blocks() -> None:
    from aiokafka.codec import snappy_encode  # an independent xerial encoder (kafka clients' format)

    payload = b"".join(record_bytes(b"\x00", varint(0), varint(i), varint(-1), varint(100), bytes([i % 256]) * 100,
                                    varint(0)) for i in range(700))  # > one 32 KiB xerial block
    for body in (snappy_encode(payload, xerial_compatible=True, xerial_blocksize=32 * 1024),
                 codecs.compress(rec.COMPRESSION_SNAPPY, payload, xerial=False)):
        buf = bytearray(rec.HEADER_SIZE + len(body))
        rec.HEADER.pack_into(buf, 0, 0, len(buf) - 12, -1, 2, 0, rec.COMPRESSION_SNAPPY, 699, 0, 0, -1, -1, -1, 700)
        buf[rec.HEADER_SIZE:] = body
        struct.pack_into(">I", buf, 17, rec.batch_crc(buf, 0, len(buf)))
        rec.validate_batches(buf, check_records=True)
        assert [r.value for r in rec.decode_records(buf)] == [bytes([i % 256]) * 100 for i in range(700)]


# --- the template check against a plain decode ----------------------------------------------------------------------
def plain_valid(data: bytes, start: int, end: int, count: int) -> bool:
    """Reference: the field-by-field decoder of protocol.records on the same bytes."""
    batch = batch_with_payload(data[start:end], count)
    try:
        rec.decode_records(batch)
    except rec.RecordError:
        return False
    return True


def uniform_payload(n: int, value: int, key: int | None, headers: int) -> bytes:
    out = []
    for i in range(n):
        fields = [b"\x00", varint(i % 3), varint(i)]
        fields += [varint(-1)] if key is None else [varint(key), b"k" * key]
        fields += [varint(value), b"v" * value, varint(headers)]
        for h in range(headers):
            fields += [varint(1), b"h", varint(h - 1), b"x" * max(h - 1, 0)]
        out.append(record_bytes(*fields))
    return b"".join(out)


@settings(max_examples=400, deadline=None)
@given(n=st.integers(1, 200), value=st.integers(0, 300), key=st.none() | st.integers(0, 70),
       headers=st.integers(0, 2), mutations=st.lists(st.tuples(st.integers(0, 10 ** 9), st.integers(0, 255)),
                                                      max_size=3))
def test_template_check_agrees_with_the_plain_decoder(n, value, key, headers, mutations) -> None:
    data = bytearray(uniform_payload(n, value, key, headers))
    for where, byte in mutations:
        data[where % len(data)] = byte
    data = bytes(data)
    expected = plain_valid(data, 0, len(data), n)
    try:
        check_records(data, 0, len(data), n)
        got = True
    except FramingError:
        got = False
    assert got == expected


def test_a_bad_record_deep_inside_a_long_uniform_run_is_found() -> None:
    data = bytearray(uniform_payload(5000, 100, None, 0))
    check_records(bytes(data), 0, len(data), 5000)
    size = len(record_bytes(b"\x00", varint(0), varint(4000), varint(-1), varint(100), b"v" * 100, varint(0)))
    at = len(data) - 2 * size  # a record near the end: its key length becomes 63 (into the value's bytes)
    key_at = at + 2 + 1 + 1 + 2  # length (2 bytes), attributes, ts delta, offset delta (2 bytes)
    assert data[key_at] == 1
    data[key_at] = 126
    with pytest.raises(FramingError):
        check_records(bytes(data), 0, len(data), 5000)


def test_a_zstd_frame_that_decodes_past_its_declared_size_is_corrupt_at_once(monkeypatch) -> None:
    """zstd answers "destination buffer too small" for a frame holding more than its Frame_Content_Size says:
    that is corrupt data (Kafka: UNKNOWN_SERVER_ERROR), not a large payload to grow the buffer for up to
    MAX_DECOMPRESSED_BYTES (a 138-byte batch made the check allocate 64 MiB and answer MESSAGE_TOO_LARGE)."""
    payload = b"".join(record_bytes(b"\x00", varint(0), varint(i), varint(-1), varint(20), b"v" * 20, varint(0))
                       for i in range(5))
    damaged = damaged_zstd(payload)
    assert codecs._zstd_content_size(damaged) == len(payload)
    grown: list[int] = []
    real = codecs._decompress_stream

    def watched(module, data, limit, out):
        before = len(out)
        try:
            return real(module, data, limit, out)
        finally:
            grown.append(len(out) - before)

    monkeypatch.setattr(codecs, "_decompress_stream", watched)
    with pytest.raises(rec.UndecodableRecordsError, match="declared size"):
        client_check(batch_with_payload(payload, 5, rec.COMPRESSION_ZSTD, compressed=damaged))
    assert grown and max(grown) < 1 << 20  # no growing towards the limit
    assert codecs._zstd_content_size(damaged + damaged) is None  # two frames: no one size
