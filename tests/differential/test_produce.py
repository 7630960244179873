"""Produce against Kafka 4.4 and Shoal with the same raw requests (our codecs) and the same clients: versions,
timestamps (CreateTime and LogAppendTime topics, the before/after windows), every codec with every topic
compression.type (what is stored, as fetched), batches and records that are malformed in every way Kafka checks,
idempotence and transactional errors, acks, limits and request shapes, and confluent-kafka / kafka-python round
trips. The answers are compared field by field: error codes, offsets, log start offsets, messages and record
errors (wall-clock numbers in messages masked)."""

from __future__ import annotations

import re
import struct
import time
import uuid

import cramjam
import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

from protocol import compression as codecs
from protocol import records as rec
from tests.helpers import differential_raw as dr
from tests.helpers.differential import Target, assert_same, known_difference
from tests.helpers.kafka_dist import run_tool
from tests.helpers.record_batches import damaged_zstd
from tests.helpers.waiting import wait_until

pytestmark = pytest.mark.integration

HOUR = 3_600_000
CODECS = {"none": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}
_MS = re.compile(r"-?\d{12,}")


def masked(text: str | None) -> str | None:
    """A message with its wall-clock numbers (milliseconds) masked."""
    return None if text is None else _MS.sub("<ms>", text)


def answer(part) -> dict:
    """A produce partition answer as plain data, messages masked."""
    out = dict(part)
    out["error_message"] = masked(out["error_message"])
    out["record_errors"] = [{"batch_index": e.batch_index, "message": masked(e.batch_index_error_message)}
                            for e in part.record_errors]
    return out


def by_partition(response) -> list:
    """A produce response's topics and partitions in a stable order (Kafka answers from a hash map)."""
    return sorted(([t.get("name"), t.topic_id, sorted((answer(p) for p in t.partition_responses),
                                                      key=lambda p: p["index"])] for t in response.responses),
                  key=lambda t: (t[0] or "", repr(t[2])))


def varint(value: int) -> bytes:
    out = bytearray()
    rec._write_varint(out, value)
    return bytes(out)


def body_of(attributes: int = 0, ts_delta: int = 0, offset_delta: int = 0, key: bytes | None = b"k",
            value: bytes | None = b"v", headers=(), header_count: int | None = None) -> bytes:
    """One record's fields (no length prefix), any of them possibly wrong."""
    body = bytes([attributes]) + varint(ts_delta) + varint(offset_delta)
    for blob in (key, value):
        body += varint(-1) if blob is None else varint(len(blob)) + blob
    body += varint(len(headers) if header_count is None else header_count)
    for hkey, hvalue in headers:
        body += varint(len(hkey)) + hkey + (varint(-1) if hvalue is None else varint(len(hvalue)) + hvalue)
    return body


def framed(body: bytes, length: int | None = None) -> bytes:
    """A record: its length prefix (right unless `length` is given) and `body`."""
    return varint(len(body) if length is None else length) + body


def record(**fields) -> bytes:
    return framed(body_of(**fields))


def batch_of(payload: bytes, count: int, *, compression: int = 0, compress: bool = True, timestamp: int = 1_000,
             producer_id: int = -1, base_sequence: int = -1) -> bytes:
    """A batch around `payload` (records' bytes, compressed here unless `compress` is False), CRC made right."""
    body = codecs.compress(compression, payload) if compression and compress else payload
    buf = bytearray(rec.HEADER_SIZE + len(body))
    rec.HEADER.pack_into(buf, 0, 0, len(buf) - rec.LOG_OVERHEAD, -1, rec.MAGIC, 0, compression, count - 1,
                         timestamp, timestamp, producer_id, -1, base_sequence, count)
    buf[rec.HEADER_SIZE:] = body
    return resealed(buf)


def resealed(batch: bytes | bytearray) -> bytes:
    buf = bytearray(batch)
    struct.pack_into(">I", buf, 17, rec.batch_crc(buf, 0, len(buf)))
    return bytes(buf)


def patched(batch: bytes, at: int, fmt: str, value: int, *, crc: bool = True) -> bytes:
    buf = bytearray(batch)
    struct.pack_into(fmt, buf, at, value)
    return resealed(buf) if crc else bytes(buf)


GOOD = rec.build_batch([rec.Record(b"k%d" % i, b"v" * 50) for i in range(3)], timestamp=1_000)


# --- versions and request shapes -----------------------------------------------------------------------------------

def test_every_version_and_request_shape(pair):
    """Produce v3-v13 of one batch; v13 by topic id (an unknown id, a partition past the count); a partition
    named twice in one topic or in two topic entries (Kafka keys them by partition: one answer, the last
    records); unknown topics and partitions."""
    def scenario(target: Target):
        topic = dr.new_topic(target, "p-versions", partitions=2)
        out = {}
        with target.raw() as raw:
            for version in range(3, 13):
                out[f"v{version}"] = dr.produce(raw, topic, GOOD, version=version)
            tid = dr.topic_id(raw, topic)
            out["v13"] = by_partition(dr.produce_request(raw, 13, [
                {"topic_id": tid, "partition_data": [{"index": 0, "records": GOOD}, {"index": 9, "records": GOOD}]},
                {"topic_id": uuid.uuid4(), "partition_data": [{"index": 0, "records": GOOD}]}]))
            first = rec.build_batch([rec.Record(None, b"first")], timestamp=1_000)
            last = rec.build_batch([rec.Record(None, b"last")], timestamp=1_000)
            out["same-partition-twice"] = by_partition(dr.produce_request(raw, 9, [
                {"name": topic, "partition_data": [{"index": 1, "records": first}, {"index": 1, "records": last}]}]))
            out["same-topic-twice"] = by_partition(dr.produce_request(raw, 9, [
                {"name": topic, "partition_data": [{"index": 1, "records": first}]},
                {"name": topic, "partition_data": [{"index": 1, "records": last}, {"index": 7, "records": last}]}]))
            out["unknown-topic"] = dr.produce(raw, "nope-" + topic, GOOD)
            out["bad-name"] = dr.produce(raw, "bad name!", GOOD)
            out["empty-name"] = dr.produce(raw, "", GOOD)
            out["partition-1"] = [[r["value"] for r in b["records"]]
                                  for b in dr.batches(dr.fetch(raw, topic, 0, partition=1).records)]
        return out

    assert_same(pair.run(scenario), "Produce answers")


# --- timestamps ------------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("timestamp_type", ["CreateTime", "LogAppendTime"])
def test_timestamps(pair, timestamp_type):
    """Batches with old, recent, missing (-1) and future timestamps, a batch its producer flagged LogAppendTime,
    a window of message.timestamp.before.max.ms: the answers (record errors), what is stored (fetched) and what
    ListOffsets finds by timestamp."""
    def scenario(target: Target):
        topic = dr.new_topic(target, "p-ts", {"message.timestamp.type": timestamp_type})
        narrow = dr.new_topic(target, "p-ts-narrow", {"message.timestamp.type": timestamp_type,
                                                      "message.timestamp.before.max.ms": "60000"})
        now = dr.now_ms()
        out = {}
        with target.raw() as raw:
            sends = {
                "old": rec.build_batch([rec.Record(b"a", b"1", timestamp=1_000),
                                        rec.Record(b"b", None, headers=[("h", b"x"), ("n", None)], timestamp=3_000),
                                        rec.Record(None, b"3", timestamp=2_000)]),
                "no-timestamp": rec.build_batch([rec.Record(b"c", b"4", timestamp=-1)]),
                "recent": rec.build_batch([rec.Record(b"d", b"5", timestamp=now - 1_000)]),
                "future": rec.build_batch([rec.Record(b"e", b"6", timestamp=now), rec.Record(b"f", b"7",
                                                                                       timestamp=now + 2 * HOUR)]),
                "flagged-append-time": rec.build_batch([rec.Record(b"g", b"8", timestamp=4_000)],
                                                       log_append_time=True),
                "gzip": rec.build_batch([rec.Record(b"h", b"9", timestamp=5_000), rec.Record(b"i", b"10",
                                                                                       timestamp=4_500)],
                                        compression=rec.COMPRESSION_GZIP),
            }
            for name, batch in sends.items():
                out[name] = answer(dr.produce_apart(raw, topic, batch))
            out["narrow-old"] = answer(dr.produce(raw, narrow, rec.build_batch(
                [rec.Record(b"k", b"v", timestamp=now), rec.Record(b"k", b"v", timestamp=now - 2 * HOUR)])))
            out["narrow-ok"] = answer(dr.produce(raw, narrow, rec.build_batch([rec.Record(b"k", b"v",
                                                                                       timestamp=now)])))
            out["stored"] = dr.fetched(dr.fetch(raw, topic))
            out["lookups"] = {str(ts): dict(dr.list_offsets(raw, topic, ts))
                              for ts in (-1, -2, -3, 0, 1_500, 2_500, 3_001, 4_000, 4_600, 5_001)}
            out["lookup-an-hour-ahead"] = dr.list_offsets(raw, topic, now + HOUR)
        return out

    assert_same(pair.run(scenario), f"produce on a {timestamp_type} topic")


# --- codecs --------------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("topic_codec", ["producer", "uncompressed", "gzip", "snappy", "lz4", "zstd"])
def test_every_codec_with_every_compression_type(pair, topic_codec):
    """One batch in each codec (our build_batch: LZ4 frames with independent blocks, as Java and librdkafka
    write) to a topic of each compression.type: the answers and the batches as fetched. A batch kept as sent
    (its codec is the topic's, or compression.type is producer) must be stored byte for byte; a recompressed one
    is compared by header and records (Java's and cramjam's compressed bytes differ)."""
    sent = {name: rec.build_batch([rec.Record(b"k%d" % i, b"value-%d " % i * 20, headers=[("n", b"%d" % i)],
                                              timestamp=1_000 + i) for i in range(20)], compression=codec)
            for name, codec in CODECS.items()}

    def scenario(target: Target):
        topic = dr.new_topic(target, "p-codec", {"compression.type": topic_codec})
        out = {}
        with target.raw() as raw:
            for name, batch in sent.items():
                out[name] = dr.produce(raw, topic, batch)
            records = bytes(dr.fetch(raw, topic).records)
        stored = []
        for (pos, header), (name, batch) in zip(rec.iter_batches(records), sent.items(), strict=True):
            as_sent = records[pos + 16:pos + header.size] == batch[16:]  # from the magic byte on
            [fields] = dr.batches(records[pos:pos + header.size])
            if not as_sent:
                del fields["batch_length"]
            stored.append({"sent": name, "as_sent": as_sent, **fields})
        out["stored"] = stored
        return out

    assert_same(pair.run(scenario), f"batches on a compression.type={topic_codec} topic")


def test_a_java_consumer_reads_lz4_the_broker_wrote(pair):
    """Kafka's Java consumer (kafka-console-consumer) reads a compression.type=lz4 topic whose batches the
    broker recompressed from gzip: Shoal's LZ4 frames must be ones Java's reader accepts (independent blocks)."""
    def scenario(target: Target):
        topic = dr.new_topic(target, "p-lz4", {"compression.type": "lz4"})
        batch = rec.build_batch([rec.Record(None, b"lz4 value %d " % i * 30) for i in range(50)],
                                compression=rec.COMPRESSION_GZIP)
        with target.raw() as raw:
            produced = dr.produce(raw, topic, batch).error_code
            codec = rec.read_header(dr.fetch(raw, topic).records).compression
        done = run_tool("kafka-console-consumer", ["--bootstrap-server", target.bootstrap, "--topic", topic,
                                                   "--from-beginning", "--max-messages", "50", "--timeout-ms",
                                                   "60000"], timeout=120)
        return {"produced": produced, "stored_codec": codec, "values": done.stdout.splitlines()}

    seen = pair.run(scenario)
    assert_same(seen, "what Java's consumer reads of an lz4 topic")
    assert seen["shoal"]["values"] == [f"lz4 value {i} " * 30 for i in range(50)]


# --- malformed batches and records ---------------------------------------------------------------------------------

def _malformed_batches() -> dict[str, bytes | None]:
    body = GOOD[rec.HEADER_SIZE:]
    linked_lz4 = bytes(cramjam.lz4.compress(body))  # LZ4's default frame: linked blocks
    return {
        "good": GOOD,
        "bad-crc": GOOD[:-1] + bytes([GOOD[-1] ^ 1]),
        "lz4-linked-blocks": batch_of(linked_lz4, 3, compression=3, compress=False),
        "gzip-garbage": batch_of(b"\x1f\x8b" + b"\x00" * 30, 3, compression=1, compress=False),
        "snappy-garbage": batch_of(codecs.XERIAL_MAGIC + b"\x00\x00\x00\x01\x00\x00\x00\x01\x00\x00\x00\x10"
                                   + b"\xff" * 16, 3, compression=2, compress=False),
        "lz4-garbage": batch_of(b"\x04\x22\x4d\x18" + b"\xff" * 20, 3, compression=3, compress=False),
        "zstd-garbage": batch_of(b"\x28\xb5\x2f\xfd" + b"\xff" * 20, 3, compression=4, compress=False),
        "codec-5": batch_of(body, 3, compression=5, compress=False),
        "codec-7": batch_of(body, 3, compression=7, compress=False),
        "count-too-high": patched(GOOD, 57, ">i", 4),
        "count-too-low": patched(GOOD, 57, ">i", 2),
        "last-offset-delta-high": patched(GOOD, 23, ">i", 5),
        "last-offset-delta-negative": patched(GOOD, 23, ">i", -1),
        "batch-length-short": patched(GOOD, 8, ">i", len(GOOD) - 12 - 5),
        "batch-length-long": patched(GOOD, 8, ">i", len(GOOD) - 12 + 5),
        "batch-length-13": patched(GOOD, 8, ">i", 13, crc=False),
        "truncated": GOOD[:40],
        "magic-0": patched(GOOD, 16, ">b", 0),
        "magic-1": patched(GOOD, 16, ">b", 1),
        "magic-3": patched(GOOD, 16, ">b", 3),
        "magic-minus-1": patched(GOOD, 16, ">b", -1),
        "control": patched(GOOD, 21, ">h", 0x20),
        "two-batches": GOOD + GOOD,
        "partial-second-batch": GOOD + GOOD[:30],
        "trailing-bytes": GOOD + b"\x00\x01\x02",
        "base-offset-42": patched(GOOD, 0, ">q", 42),
        "leader-epoch-7": patched(GOOD, 12, ">i", 7),
        "producer-id-without-sequence": patched(GOOD, 43, ">q", 1234),
        "sequence-without-producer-id": patched(GOOD, 53, ">i", 5),
        "transactional-without-producer-id": patched(GOOD, 21, ">h", 0x10),
        "delete-horizon-flag": patched(GOOD, 21, ">h", 0x40),
        "empty": b"",
        # records
        "record-length-past-batch": batch_of(framed(body_of(), 100), 1),
        "record-length-short": batch_of(framed(body_of(), 5), 1),
        "key-length-past-record": batch_of(framed(b"\x00" + varint(0) + varint(0) + varint(50) + b"k" + varint(1)
                                                  + b"v" + varint(0)), 1),
        "negative-key-length": batch_of(framed(b"\x00" + varint(0) + varint(0) + varint(-5) + varint(1) + b"v"
                                               + varint(0)), 1),
        "negative-value-length": batch_of(framed(b"\x00" + varint(0) + varint(0) + varint(1) + b"k" + varint(-9)
                                                 + varint(0)), 1),
        "header-count-huge": batch_of(record(header_count=2 ** 62), 1),
        "header-count-negative": batch_of(record(header_count=-1), 1),
        "header-key-negative": batch_of(framed(body_of(header_count=1) + varint(-2) + varint(-1)), 1),
        "header-value-null": batch_of(record(headers=[(b"h", None)]), 1),
        "bytes-left-in-record": batch_of(framed(body_of() + b"\x00\x00"), 1),
        "bytes-after-records": batch_of(record() + b"\x00\x00\x00", 1),
        "fewer-records-than-count": batch_of(record(), 2),
        "offset-deltas-not-consecutive": batch_of(record(offset_delta=0) + record(offset_delta=5), 2),
        "record-attributes-set": batch_of(record(attributes=0x7F), 1),
        "varint-too-long": batch_of(framed(b"\x00" + b"\xff" * 11 + varint(0) + varint(1) + b"k"), 1),
        "gzip-bytes-after-records": batch_of(record() + b"\x00\x00", 1, compression=1),
        "gzip-fewer-records-than-count": batch_of(record(), 2, compression=1),
        "zstd-good": batch_of(record(), 1, compression=4),
    }


def test_malformed_batches_and_records(pair):
    """Every way a batch or its records can be wrong that Kafka checks (in the request, the log, the validator):
    each answer (error code, log start offset, message) and what the log kept, as fetched."""
    cases = _malformed_batches()

    def scenario(target: Target):
        topic = dr.new_topic(target, "p-bad")
        out = {}
        with target.raw() as raw:
            for name, batch in cases.items():
                out[name] = answer(dr.produce(raw, topic, batch))
            stored = dr.fetch(raw, topic).records
        out["stored"] = [{k: v for k, v in b.items() if k != "records"} | {"values": [r["value"] for r in
                                                                                        b["records"]]}
                         for b in dr.batches(stored)]
        return out

    assert_same(pair.run(scenario), "answers to malformed batches")


def test_whole_request_errors(pair):
    """Errors Kafka answers for every partition of the request: a first batch its record walk cannot read
    (CORRUPT_MESSAGE with Kafka's message), transactional records without a TransactionalId
    (TRANSACTIONAL_ID_AUTHORIZATION_FAILED), a codec id it does not know before Produce v7 (UNKNOWN_SERVER_ERROR);
    zstd before v7 is a partition's UNSUPPORTED_COMPRESSION_TYPE."""
    txn = patched(rec.build_batch([rec.Record(None, b"t")], timestamp=1_000, producer_id=1, producer_epoch=0,
                                  base_sequence=0), 21, ">h", 0x10)
    zstd = rec.build_batch([rec.Record(None, b"z")], timestamp=1_000, compression=rec.COMPRESSION_ZSTD)

    def scenario(target: Target):
        topic = dr.new_topic(target, "p-whole", partitions=2)
        out = {}

        def both(first: bytes | None, second: bytes | None, version: int = 9):
            answered = dr.produce_request(raw, version, [{"name": topic, "partition_data": [
                {"index": 0, "records": first}, {"index": 1, "records": second}]}])
            return by_partition(answered)

        with target.raw() as raw:
            out["bad-magic-first"] = both(GOOD, patched(GOOD, 16, ">b", 3))
            out["short-length-first"] = both(patched(GOOD, 8, ">i", 13, crc=False), GOOD)
            out["transactional-no-id"] = both(GOOD, txn)
            out["transactional-then-bad-magic"] = both(txn, patched(GOOD, 16, ">b", 9))
            out["codec-6-v5"] = both(GOOD, patched(GOOD, 21, ">h", 6), version=5)
            out["zstd-v6"] = both(zstd, GOOD, version=6)
            out["zstd-v7"] = both(zstd, GOOD, version=7)
        return out

    assert_same(pair.run(scenario), "whole-request produce errors")


def test_null_records_are_answered(pair):
    """Records null (a nullable field): Kafka fails the request with a NullPointerException it never answers (the
    connection stays open, silent); Shoal answers INVALID_RECORD, as for an empty payload."""
    def scenario(target: Target):
        topic = dr.new_topic(target, "p-null")
        with target.raw() as raw:
            raw.sock.settimeout(2)
            try:
                return {"error_code": dr.produce(raw, topic, None).error_code}
            except TimeoutError:
                return {"no answer within 2 s": True}

    known_difference(pair.run(scenario), kafka={"no answer within 2 s": True}, shoal={"error_code": 87},
                     reason="Produce with null records")


def test_compressed_batch_record_layout_is_checked(pair):
    """Two compressed batches Kafka's in-place validation misjudges: one whose records' offset deltas are not 0..n-1
    (Kafka fails it UNKNOWN_SERVER_ERROR; Shoal keeps it as sent, as both keep an uncompressed one), one whose
    record length runs past its record (Kafka stores it, skipping record bodies, and its consumers cannot read
    it; Shoal refuses it INVALID_RECORD, as both refuse an uncompressed one)."""
    deltas = batch_of(record(offset_delta=0) + record(offset_delta=5), 2, compression=1)
    length = batch_of(framed(body_of(), 100), 1, compression=1)

    def scenario(target: Target):
        topic = dr.new_topic(target, "p-inner")
        with target.raw() as raw:
            return {"offset-deltas": dr.produce(raw, topic, deltas).error_code,
                    "record-length": dr.produce(raw, topic, length).error_code}

    known_difference(pair.run(scenario), kafka={"offset-deltas": -1, "record-length": 0},
                     shoal={"offset-deltas": 0, "record-length": 87},
                     reason="Compressed batches whose record layout Kafka's in-place validation misjudges")


def test_max_timestamp_is_taken_from_the_header(pair):
    """A batch whose MaxTimestamp is not the largest of its records' timestamps: Kafka's validator rewrites it
    (it walks every record); Shoal stores the batch's own, and with message.timestamp.before.max.ms unbounded
    (the default) judges message.timestamp.after.max.ms by it (see docs/kafka-differences.md)."""
    wrong_max = patched(GOOD, 35, ">q", 9_999)  # the records' timestamps are all 1000
    future_records = patched(GOOD, 27, ">q", dr.now_ms() + 10 * HOUR)  # BaseTimestamp: its records' timestamps

    def scenario(target: Target):
        topic = dr.new_topic(target, "p-maxts")
        with target.raw() as raw:
            assert dr.produce(raw, topic, wrong_max).error_code == 0
            stored = rec.read_header(dr.fetch(raw, topic).records).max_timestamp
            return {"stored_max_timestamp": stored,
                    "max_timestamp_lookup": dr.list_offsets(raw, topic, -3).timestamp,
                    "records_ahead_of_the_window": dr.produce(raw, topic, future_records).error_code}

    known_difference(pair.run(scenario),
                     kafka={"stored_max_timestamp": 1_000, "max_timestamp_lookup": 1_000,
                            "records_ahead_of_the_window": 32},
                     shoal={"stored_max_timestamp": 9_999, "max_timestamp_lookup": 9_999,
                            "records_ahead_of_the_window": 0},
                     reason="A batch's MaxTimestamp is trusted")


def test_damaged_compressed_payloads(pair):
    """Compressed payloads cut short or damaged (valid batch CRC): UNKNOWN_SERVER_ERROR on both where the
    decompressor refuses them, also for a zstd frame that decodes past its declared size."""
    records = [rec.Record(b"key%d" % i, b"value%d" % i) for i in range(4)]
    cases = {}
    for name, codec in CODECS.items():
        if codec:
            batch = rec.build_batch(records, timestamp=1_000, compression=codec)
            cases[f"{name}-cut"] = resealed_length(batch[:-6])
    cases["gzip-cut-half"] = resealed_length(rec.build_batch(records, timestamp=1_000, compression=1)[:100])
    payload = b"".join(record(offset_delta=i, key=None, value=b"v" * 20) for i in range(5))
    cases["zstd-past-its-declared-size"] = batch_of(damaged_zstd(payload), 5, compression=4, compress=False)

    def scenario(target: Target):
        topic = dr.new_topic(target, "p-damaged")
        with target.raw() as raw:
            return {name: answer(dr.produce(raw, topic, batch)) for name, batch in cases.items()}

    assert_same(pair.run(scenario), "answers to damaged compressed payloads")


def resealed_length(batch: bytes) -> bytes:
    buf = bytearray(batch)
    struct.pack_into(">i", buf, 8, len(buf) - rec.LOG_OVERHEAD)
    return resealed(buf)


def test_a_damaged_gzip_payload_that_still_decodes(pair):
    """One byte of a gzip payload's deflate data changed: the data still decodes to its end, into wrong records.
    Kafka reads gzip as a stream and checks the records before the gzip trailer (INVALID_RECORD); Shoal
    decompresses the payload whole first, and the trailer's CRC refuses it (UNKNOWN_SERVER_ERROR)."""
    batch = bytearray(rec.build_batch([rec.Record(b"key%d" % i, b"value%d" % i, headers=[("h", b"x")] if i % 2
                                                  else []) for i in range(4)], timestamp=1_000,
                                      compression=rec.COMPRESSION_GZIP))
    batch[111] = 0xB2  # inside the deflate data (cramjam's gzip output is the same every run)

    def scenario(target: Target):
        topic = dr.new_topic(target, "p-gzip-damaged")
        with target.raw() as raw:
            return dr.produce(raw, topic, resealed(batch)).error_code

    known_difference(pair.run(scenario), kafka=87, shoal=-1, reason="Damaged compressed payloads")


def test_decompression_is_bounded(pair):
    """A gzip batch of 64 KiB whose one record decompresses to 65 MiB: Kafka stores it; Shoal refuses
    MESSAGE_TOO_LARGE (its bound on what one batch may decompress to)."""
    bomb = rec.build_batch([rec.Record(None, bytes(65 << 20))], timestamp=1_000, compression=rec.COMPRESSION_GZIP)
    assert len(bomb) < 1 << 20

    def scenario(target: Target):
        topic = dr.new_topic(target, "p-bomb")
        with target.raw() as raw:
            return dr.produce(raw, topic, bomb).error_code

    known_difference(pair.run(scenario), kafka=0, shoal=10, reason="Decompression is bounded")


# --- idempotence and transactions ----------------------------------------------------------------------------------

def test_idempotence_errors(pair):
    """Sequences: duplicates of the last five batches answer their first offset; older ones, gaps and overlaps
    OUT_OF_ORDER_SEQUENCE_NUMBER; a new epoch must start at 0; an old epoch is INVALID_PRODUCER_EPOCH; producer
    ids the broker never saw start anywhere; the sequence wraps at 2^31."""
    def scenario(target: Target):
        topic = dr.new_topic(target, "p-idem")
        out = {}
        with target.raw() as raw:
            pid = dr.init_producer_id(raw).producer_id

            def send(seq: int, *, producer: int = pid, epoch: int = 0):
                batch = rec.build_batch([rec.Record(None, b"%d-%d" % (seq, i)) for i in range(2)], timestamp=1_000,
                                        producer_id=producer, producer_epoch=epoch, base_sequence=seq)
                return dr.produce(raw, topic, batch)

            steps = [("first", 0, {}), ("second", 2, {}), ("dup-last", 2, {}), ("dup-first", 0, {}),
                     ("overlap", 1, {}), ("gap", 7, {}), ("next", 4, {})]
            steps += [(f"more-{i}", 6 + 2 * i, {}) for i in range(6)]
            steps += [("dup-sixth-latest", 4, {}), ("dup-recent", 10, {}),
                      ("new-epoch-not-zero", 18, {"epoch": 1}), ("new-epoch-zero", 0, {"epoch": 1}),
                      ("old-epoch", 18, {"epoch": 0}), ("unknown-producer-0", 0, {"producer": pid + 1000}),
                      ("unknown-producer-5", 5, {"producer": pid + 1001}),
                      ("epoch-minus-1", 0, {"producer": pid + 1002, "epoch": -1}),
                      ("sequence-max", 2 ** 31 - 1, {"producer": pid + 1004}),
                      ("sequence-wrapped", 0, {"producer": pid + 1004})]
            for name, seq, kwargs in steps:
                out[name] = answer(send(seq, **kwargs))
            out["stored"] = [(b["base_offset"], b["producer_id"] - pid, b["producer_epoch"], b["base_sequence"])
                             for b in dr.batches(dr.fetch(raw, topic).records)]
        return out

    assert_same(pair.run(scenario), "idempotent produce")


def test_transactional_produce_without_add_partitions(pair):
    """A transactional batch to a partition not added to the transaction: INVALID_TXN_STATE before v11,
    TRANSACTION_ABORTABLE at v11, added by the coordinator at v12 (transaction.version 2); another TransactionalId
    of the same producer; non-transactional records with a TransactionalId."""
    def scenario(target: Target):
        topic = dr.new_topic(target, "p-txn")
        transactional_id = target.unique("p-txn-id")
        out = {}
        with target.raw() as raw:
            init = dr.init_producer_id(raw, transactional_id)
            batch = rec.build_batch([rec.Record(None, b"t")], timestamp=1_000, producer_id=init.producer_id,
                                    producer_epoch=init.producer_epoch, base_sequence=0, transactional=True)
            for version in (9, 11, 12):
                out[f"v{version}"] = answer(dr.produce(raw, topic, batch, version=version,
                                                       transactional_id=transactional_id))
            out["other-id"] = answer(dr.produce(raw, topic, batch, transactional_id=transactional_id + "x"))
            out["plain-with-id"] = answer(dr.produce(raw, topic, GOOD, transactional_id=transactional_id))
            part = dr.fetch(raw, topic, isolation_level=1)
            out["read-committed"] = {"high_watermark": part.high_watermark,
                                     "last_stable_offset": part.last_stable_offset}
        return out

    assert_same(pair.run(scenario), "transactional produce without AddPartitionsToTxn")


# --- acks, limits, internal topics ---------------------------------------------------------------------------------

def test_acks_limits_and_internal_topics(pair):
    """acks 1, 0 (no answer; an error closes the connection) and invalid values; a batch over max.message.bytes
    and one under it compressed; the internal topics."""
    small = rec.build_batch([rec.Record(b"k", b"v")], timestamp=1_000)

    def scenario(target: Target):
        topic = dr.new_topic(target, "p-limits", {"max.message.bytes": "2000"}, partitions=2)
        out = {}
        with target.raw() as raw:
            # __consumer_offsets exists once a group coordinator was looked up (Kafka makes it then)
            wait_until(lambda: raw.call(dr.FIND_COORDINATOR, 4, {"key_type": 0, "coordinator_keys": ["g"]})
                       .coordinators[0].error_code == 0, 60, "a group coordinator")
            out["acks-1"] = answer(dr.produce(raw, topic, small, acks=1))
            for acks in (2, -2):
                out[f"acks{acks}"] = by_partition(dr.produce_request(raw, 9, [
                    {"name": topic, "partition_data": [{"index": 0, "records": small}, {"index": 5, "records": small}]},
                    {"name": "nope-" + topic, "partition_data": [{"index": 0, "records": small}]}], acks=acks))
            out["too-large"] = answer(dr.produce(raw, topic, rec.build_batch([rec.Record(b"k", b"v" * 3000)])))
            out["small-compressed"] = answer(dr.produce(raw, topic, rec.build_batch(
                [rec.Record(b"k", b"v" * 30_000)], timestamp=1_000, compression=rec.COMPRESSION_GZIP)))
            out["__consumer_offsets"] = answer(dr.produce(raw, "__consumer_offsets", small))
            raw.send(dr.PRODUCE, 9, {"acks": 0, "timeout_ms": 5000, "topic_data": [
                {"name": topic, "partition_data": [{"index": 1, "records": small}]}]})
            out["after-acks-0"] = raw.call(dr.METADATA, 12, {"topics": [{"name": topic}],
                                                             "allow_auto_topic_creation": False}).topics[0].error_code
        with target.raw() as raw:
            raw.send(dr.PRODUCE, 9, {"acks": 0, "timeout_ms": 5000, "topic_data": [
                {"name": topic, "partition_data": [{"index": 1, "records": rec.build_batch(
                    [rec.Record(b"k", b"v" * 3000)])}]}]})
            try:
                raw.call(dr.METADATA, 12, {"topics": [], "allow_auto_topic_creation": False})
                out["after-failed-acks-0"] = "open"
            except ConnectionError:
                out["after-failed-acks-0"] = "closed"
        with target.raw() as raw:
            out["ends"] = [dr.list_offsets(raw, topic, -1, partition=p).offset for p in (0, 1)]
        return out

    assert_same(pair.run(scenario), "acks, limits and internal topics")


# --- real clients --------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("codec", ["none", "gzip", "snappy", "lz4", "zstd"])
def test_confluent_round_trip(pair, codec):
    """A confluent-kafka Producer (idempotent, one codec) and Consumer: delivery reports (partition, offset,
    timestamp type) and what the consumer reads (offsets, keys, values, headers, timestamps)."""
    def scenario(target: Target):
        topic = dr.new_topic(target, "p-client", partitions=2)
        reports = []
        producer = Producer({**target.client_config(), "compression.type": codec, "enable.idempotence": True,
                             "linger.ms": 50, "log_level": 0})
        for i in range(30):
            producer.produce(topic, value=b"value %d" % i, key=b"key %d" % (i % 3), partition=i % 2,
                             timestamp=1_000_000 + i, headers=[("i", b"%d" % i), ("none", None)],
                             on_delivery=lambda err, msg: reports.append(
                                 (err, msg.partition(), msg.offset(), msg.timestamp())))
        assert producer.flush(30) == 0
        consumer = Consumer({**target.client_config(), "group.id": target.unique("p-client-group"),
                             "enable.auto.commit": False, "log_level": 0})
        consumer.assign([TopicPartition(topic, p, 0) for p in (0, 1)])
        seen = []
        deadline = time.monotonic() + 30
        while len(seen) < 30 and time.monotonic() < deadline:
            msg = consumer.poll(1)
            if msg is not None and msg.error() is None:
                seen.append((msg.partition(), msg.offset(), msg.key(), msg.value(), msg.headers(), msg.timestamp()))
        consumer.close()
        return {"reports": sorted(reports, key=lambda r: (r[1], r[2])), "consumed": sorted(seen)}

    assert_same(pair.run(scenario), f"a confluent-kafka round trip ({codec})")


def test_kafka_python_round_trip(pair):
    """kafka-python's producer (gzip, a LogAppendTime topic) and consumer: record metadata and records read."""
    from kafka import KafkaConsumer, KafkaProducer
    from kafka import TopicPartition as KTopicPartition

    def scenario(target: Target):
        topic = dr.new_topic(target, "p-kp", {"message.timestamp.type": "LogAppendTime"})
        producer = KafkaProducer(bootstrap_servers=target.bootstrap, compression_type="gzip", acks="all")
        futures = [producer.send(topic, value=b"v%d" % i, key=b"k%d" % i, headers=[("h", b"%d" % i)],
                                 timestamp_ms=1_000 + i, partition=0) for i in range(10)]
        producer.flush(30)
        metadata = [f.get(timeout=30) for f in futures]
        producer.close(5)
        consumer = KafkaConsumer(bootstrap_servers=target.bootstrap, enable_auto_commit=False,
                                 consumer_timeout_ms=10_000)
        consumer.assign([KTopicPartition(topic, 0)])
        consumer.seek_to_beginning()
        records = [(r.offset, r.key, r.value, r.headers, r.timestamp_type, r.timestamp > 1_000_000)
                   for _, r in zip(range(10), consumer, strict=False)]
        consumer.close()
        return {"metadata": [(m.partition, m.offset, m.timestamp > 1_000_000) for m in metadata],
                "records": records}

    assert_same(pair.run(scenario), "a kafka-python round trip")
