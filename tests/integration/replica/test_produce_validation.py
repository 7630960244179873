"""Produce refuses batches whose records are malformed or whose compressed payload does not decode (valid batch
CRC in both cases) with Kafka's answers, and the broker keeps serving: ListOffsets by timestamp and consumers
never see such bytes. Real clients' compressed batches (every codec) are accepted and searchable by timestamp
record by record."""

from __future__ import annotations

import struct

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import NewTopic

from protocol import records as rec
from protocol.errors import ErrorCode
from tests.helpers.confluent_clients import admin_client
from tests.helpers.raw_client import RawClient

pytestmark = pytest.mark.integration

PRODUCE, LIST_OFFSETS = 0, 2


def varint(value: int) -> bytes:
    out = bytearray()
    rec._write_varint(out, value)
    return bytes(out)


def reported_batch() -> bytes:
    """The issue's 79-byte batch: valid CRC, one record declaring 2**62 headers with a header key length of -2."""
    body = b"\x00" + varint(0) + varint(0) + varint(-1) + varint(-1) + varint(2 ** 62) + varint(-2) + b"\x00" * 4
    payload = varint(len(body)) + body
    buf = bytearray(rec.HEADER_SIZE + len(payload))
    rec.HEADER.pack_into(buf, 0, 0, len(buf) - rec.LOG_OVERHEAD, -1, rec.MAGIC, 0, 0, 0, 1_000, 1_000, -1, -1, -1, 1)
    buf[rec.HEADER_SIZE:] = payload
    struct.pack_into(">I", buf, 17, rec.batch_crc(buf, 0, len(buf)))
    return bytes(buf)


def corrupt_gzip_batch() -> bytes:
    """A gzip batch whose compressed bytes are damaged, with its batch CRC recomputed."""
    batch = bytearray(rec.build_batch([rec.Record(b"k", b"value %d" % i) for i in range(50)],
                                      compression=rec.COMPRESSION_GZIP, timestamp=1_000))
    mid = rec.HEADER_SIZE + (len(batch) - rec.HEADER_SIZE) // 2
    for i in range(mid, mid + 8):
        batch[i] ^= 0x5A
    struct.pack_into(">I", batch, 17, rec.batch_crc(batch, 0, len(batch)))
    return bytes(batch)


def produce(raw: RawClient, topic: str, records: bytes):
    response = raw.call(PRODUCE, 9, {"acks": -1, "timeout_ms": 5000, "topic_data": [
        {"name": topic, "partition_data": [{"index": 0, "records": records}]}]})
    return response.responses[0].partition_responses[0]


def offset_for_time(raw: RawClient, topic: str, timestamp: int):
    response = raw.call(LIST_OFFSETS, 7, {"replica_id": -1, "isolation_level": 0, "topics": [
        {"name": topic, "partitions": [{"partition_index": 0, "timestamp": timestamp}]}]})
    return response.topics[0].partitions[0]


def test_malformed_and_corrupt_batches_are_refused(broker) -> None:
    admin = admin_client(broker.bootstrap)
    admin.create_topics([NewTopic("checked", num_partitions=1)])["checked"].result(timeout=30)
    with RawClient(broker.port) as raw:
        bad = produce(raw, "checked", reported_batch())
        # Kafka: an InvalidRecordException from its log, answered with the log start offset and no message
        assert (bad.error_code, bad.log_start_offset, bad.error_message) == (ErrorCode.INVALID_RECORD, 0, None), bad
        bad = produce(raw, "checked", corrupt_gzip_batch())
        # Kafka fails a payload that does not decompress with an unexpected exception (tests/differential)
        assert (bad.error_code, bad.log_start_offset) == (ErrorCode.UNKNOWN_SERVER_ERROR, 0), bad
        good = produce(raw, "checked", rec.build_batch([rec.Record(None, b"fine")], timestamp=5_000))
        assert good.error_code == 0 and good.base_offset == 0  # nothing of the refused batches was stored
        found = offset_for_time(raw, "checked", 0)
        assert (found.error_code, found.offset, found.timestamp) == (0, 0, 5_000)


@pytest.mark.parametrize("codec", ["gzip", "snappy", "lz4", "zstd"])
def test_real_client_compressed_batches_are_accepted_and_searched_by_record(broker, codec: str) -> None:
    topic = f"compressed-{codec}"
    admin = admin_client(broker.bootstrap)
    admin.create_topics([NewTopic(topic, num_partitions=1)])[topic].result(timeout=30)
    producer = Producer({"bootstrap.servers": broker.bootstrap, "compression.type": codec, "linger.ms": 200,
                         "batch.num.messages": 1000})
    for i in range(300):  # one or a few compressed batches, timestamps 1000, 1010, ...
        producer.produce(topic, b"payload %d " % i * 20, key=b"k%d" % i, partition=0, timestamp=1_000 + 10 * i)
    assert producer.flush(30) == 0
    with RawClient(broker.port) as raw:
        for target, offset in ((1_000, 0), (1_005, 1), (2_000, 100), (3_990, 299)):
            found = offset_for_time(raw, topic, target)
            assert (found.error_code, found.offset) == (0, offset), (target, found)
            assert found.timestamp == 1_000 + 10 * offset
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": f"g-{codec}",
                         "enable.auto.commit": False})
    consumer.assign([TopicPartition(topic, 0, 0)])
    seen = []
    while len(seen) < 300:
        msg = consumer.poll(10)
        assert msg is not None and msg.error() is None
        seen.append(msg.value())
    consumer.close()
    assert seen == [b"payload %d " % i * 20 for i in range(300)]
