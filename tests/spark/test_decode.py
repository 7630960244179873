"""shoal_spark.decode against the reference record decoder (protocol.records.iter_records)."""

from __future__ import annotations

import random

import pyarrow as pa
import pytest

from protocol.records import (
    COMPRESSION_GZIP,
    COMPRESSION_LZ4,
    COMPRESSION_NONE,
    COMPRESSION_SNAPPY,
    COMPRESSION_ZSTD,
    CorruptRecordError,
    Record,
    build_batch,
    iter_batch_views,
    iter_records,
)
from shoal_spark.decode import decode
from shoal_spark.schema import ARROW_SCHEMA, spark_schema

CODECS = [COMPRESSION_NONE, COMPRESSION_GZIP, COMPRESSION_SNAPPY, COMPRESSION_LZ4, COMPRESSION_ZSTD]


def expected_rows(topic: str, partition: int, raw: bytes, ranges) -> list[dict]:
    rows = []
    for _, header, view in iter_batch_views(raw):
        if header.is_control:
            continue
        for r in iter_records(view):
            hit = [d for first, last, d in ranges if first <= r.offset <= last]
            if hit:
                rows.append({"key": r.key, "value": r.value, "topic": topic, "partition": partition,
                             "offset": r.offset, "timestamp": r.timestamp * 1000,
                             "timestampType": int(header.is_log_append_time),
                             "headers": [{"key": k, "value": v} for k, v in r.headers], "deliveryCount": hit[0]})
    return rows


def actual_rows(batch: pa.RecordBatch) -> list[dict]:
    rows = batch.to_pylist()
    for row in rows:
        row["timestamp"] = int(row["timestamp"].timestamp() * 1_000_000)
    return rows


def random_record(rng: random.Random) -> Record:
    def blob(limit: int) -> bytes | None:
        return None if rng.random() < 0.2 else rng.randbytes(rng.choice([0, 1, 5, 63, 64, 200, limit]))

    headers = [(rng.choice(["h", "trace-id", "ü", ""]), blob(100)) for _ in range(rng.choice([0, 0, 1, 3]))]
    return Record(key=blob(40), value=blob(3000), headers=headers,
                  timestamp=None if rng.random() < 0.5 else 1_700_000_000_000 + rng.randrange(-10**6, 10**6))


def random_log(rng: random.Random) -> tuple[bytes, int]:
    raw = bytearray()
    offset = rng.randrange(0, 10**6)
    start = offset
    for _ in range(rng.randrange(1, 6)):
        n = rng.choice([1, 2, 17, 130, 300])
        records = [random_record(rng) for _ in range(n)]
        raw += build_batch(records, base_offset=offset, timestamp=1_700_000_000_000,
                           compression=rng.choice(CODECS), log_append_time=rng.random() < 0.2)
        offset += n + rng.choice([0, 0, 3])  # some gaps, as compaction leaves
        if rng.random() < 0.2:
            raw += build_batch([Record(key=b"\x00\x00\x00\x00", value=b"\x00\x00\x00\x00\x00\x00")],
                               base_offset=offset, control=True, transactional=True)
            offset += 1
    return bytes(raw), offset - start


def test_arrow_schema_is_what_pyspark_expects() -> None:
    from pyspark.sql.pandas.types import to_arrow_schema

    assert to_arrow_schema(spark_schema(), timezone="UTC").equals(ARROW_SCHEMA)


@pytest.mark.parametrize("seed", range(40))
def test_decode_matches_the_reference_decoder(seed: int) -> None:
    rng = random.Random(seed)
    raw, span = random_log(rng)
    first = next(h.base_offset for _, h, _ in iter_batch_views(raw))
    # Acquired ranges: everything, or a few pieces with their own delivery counts.
    if rng.random() < 0.3:
        ranges = [(first, first + span - 1, 1)]
    else:
        cuts = sorted(rng.sample(range(first, first + span), k=min(span, 6)))
        ranges = [(a, b - 1, rng.randrange(1, 5)) for a, b in zip(cuts[::2], cuts[1::2], strict=False) if b > a]
    batch = decode("events", 3, raw, ranges)
    assert batch.schema.equals(ARROW_SCHEMA)
    assert actual_rows(batch) == expected_rows("events", 3, raw, ranges)


def test_nothing_acquired_gives_an_empty_batch() -> None:
    raw = build_batch([Record(value=b"x")], base_offset=10)
    batch = decode("t", 0, raw, [(20, 25, 1)])
    assert batch.num_rows == 0 and batch.schema.equals(ARROW_SCHEMA)


def test_corrupt_batches_are_refused() -> None:
    raw = bytearray(build_batch([Record(value=b"hello")] * 3))
    raw[-2] ^= 0xFF
    with pytest.raises(CorruptRecordError, match="CRC"):
        decode("t", 0, bytes(raw), [(0, 2, 1)])


def test_invalid_utf8_header_keys_are_replaced() -> None:
    raw = build_batch([Record(value=b"v", headers=[("k", b"1")])])
    good = decode("t", 0, raw, [(0, 0, 1)])
    assert good.column("headers").to_pylist() == [[{"key": "k", "value": b"1"}]]
    # Swap the key byte for an invalid UTF-8 byte and fix the CRC.
    from protocol.records import _CRC_AT, batch_crc

    patched = bytearray(raw)
    at = patched.rfind(b"k")
    patched[at] = 0xFF
    patched[_CRC_AT:_CRC_AT + 4] = batch_crc(patched, 0, len(patched)).to_bytes(4, "big")
    batch = decode("t", 0, bytes(patched), [(0, 0, 1)])
    assert batch.column("headers").to_pylist() == [[{"key": "\ufffd", "value": b"1"}]]


@pytest.mark.parametrize("seed", range(12))
def test_runs_of_equal_records_match_the_reference_decoder(seed: int) -> None:
    # Runs of same-size records take the decoder's speculative path (positions guessed, then checked); runs
    # are broken by records of other sizes at random places, lengths span 1- to 3-byte varints.
    rng = random.Random(1000 + seed)
    raw = bytearray()
    offset = 0
    for _ in range(rng.randrange(1, 4)):
        records: list[Record] = []
        while len(records) < 400:
            size = rng.choice([0, 10, 55, 100, 1000, 20000])
            record = Record(key=rng.choice([None, b"k" * rng.randrange(0, 9)]), value=rng.randbytes(size),
                            headers=rng.choice([[], [("h", b"x")]]))
            records += [record] * rng.choice([1, 3, 63, 64, 65, 200])
        raw += build_batch(records, base_offset=offset, timestamp=1_700_000_000_000,
                           compression=rng.choice([COMPRESSION_NONE, COMPRESSION_LZ4]))
        offset += len(records)
    ranges = [(0, offset - 1, 1)] if seed % 2 else [(5, offset // 2, 2), (offset // 2 + 7, offset - 3, 1)]
    batch = decode("t", 1, bytes(raw), ranges)
    assert actual_rows(batch) == expected_rows("t", 1, bytes(raw), ranges)


def test_a_record_count_beyond_the_records_is_refused() -> None:
    from protocol.records import _CRC_AT, batch_crc

    raw = bytearray(build_batch([Record(value=b"v" * 100)] * 200))
    count_at = 57  # records count: the last int32 of the batch header
    raw[count_at:count_at + 4] = (10_000).to_bytes(4, "big")
    raw[_CRC_AT:_CRC_AT + 4] = batch_crc(raw, 0, len(raw)).to_bytes(4, "big")
    with pytest.raises(CorruptRecordError, match="fill their batch"):
        decode("t", 0, bytes(raw), [(0, 199, 1)])


def test_varints_of_every_length() -> None:
    import numpy as np

    from protocol.records import _write_varint
    from shoal_spark.decode import _varints

    values = [0, -1, 1, 63, -64, 64, 8191, -8192, 8192, 2**20, -(2**31), 2**31 - 1, 2**62, -(2**63), 2**63 - 1]
    buf = bytearray()
    positions = []
    for v in values:
        positions.append(len(buf))
        _write_varint(buf, v)
    buf += bytes(16)
    got, sizes = _varints(np.frombuffer(bytes(buf), dtype=np.uint8), np.array(positions, dtype=np.int64))
    assert got.tolist() == values
    assert (np.array(positions[1:] + [len(buf) - 16]) - positions).tolist() == sizes.tolist()


def test_varints_at_the_end_of_the_buffer() -> None:
    import numpy as np

    from protocol.records import _write_varint
    from shoal_spark.decode import _varints

    buf = bytearray()
    for v in (300, 1):  # a longer varint among them: every position's next byte is looked at
        _write_varint(buf, v)
    got, sizes = _varints(np.frombuffer(bytes(buf), dtype=np.uint8), np.array([0, 2], dtype=np.int64))
    assert (got.tolist(), sizes.tolist()) == ([300, 1], [2, 1])
    with pytest.raises(CorruptRecordError):  # cut after its first byte
        _varints(np.frombuffer(bytes(buf[:1]), dtype=np.uint8), np.array([0], dtype=np.int64))


def test_uncompressed_records_are_read_where_they_are() -> None:
    import tracemalloc

    raw = b"".join(build_batch([Record(value=bytes([i]) * 4000)] * 250, base_offset=i * 250) for i in range(8))
    ranges = [(0, 1999, 1)]
    decode("t", 0, raw, ranges)  # imports and caches first
    tracemalloc.start()
    try:
        batch = decode("t", 0, raw, ranges)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert batch.num_rows == 2000 and batch.column("value")[1999].as_py() == b"\x07" * 4000
    assert peak < len(raw) // 4  # position vectors only: no copy of the 8 MB of records (Arrow's own allocations
    # are not traced)
