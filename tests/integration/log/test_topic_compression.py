"""A topic's compression.type decides the codec batches are stored with, as in Kafka: 'producer' keeps each batch's
own, a codec (or 'uncompressed') rebuilds batches written with another one at the codec's configured level.
Real producers write, real consumers read the records intact; raw Fetch shows the stored codec."""

from __future__ import annotations

import pytest
from confluent_kafka import Producer

from protocol import records as rec
from tests.helpers.confluent_clients import create_topic, produce_all, read_partition
from tests.helpers.raw_client import RawClient
from tests.helpers.raw_requests import BROKER_RESOURCE, TOPIC_RESOURCE, alter_config, fetch_partition, produce

pytestmark = pytest.mark.integration

VALUES = [b"value %05d " % i + b"abcdefgh" * 20 for i in range(200)]


def stored(raw: RawClient, topic: str) -> list[rec.BatchHeader]:
    """The headers of the partition's batches as a Fetch returns them."""
    return [h for _, h in rec.iter_batches(fetch_partition(raw, topic).records)]


def codecs_of(headers: list[rec.BatchHeader]) -> set[int]:
    return {h.attributes & rec.COMPRESSION_MASK for h in headers}


@pytest.mark.parametrize(("topic_codec", "producer_codec", "expected"), [
    ("zstd", "none", rec.COMPRESSION_ZSTD),
    ("gzip", "lz4", rec.COMPRESSION_GZIP),
    ("uncompressed", "snappy", rec.COMPRESSION_NONE),
    ("producer", "lz4", rec.COMPRESSION_LZ4),
])
def test_batches_are_stored_with_the_topics_codec(broker, topic_codec, producer_codec, expected):
    topic = f"codec-{topic_codec}-{producer_codec}"
    create_topic(broker.bootstrap, topic, config={"compression.type": topic_codec})
    produce_all(broker.bootstrap, topic, VALUES, **{"compression.type": producer_codec, "linger.ms": 50})
    with RawClient(broker.port) as raw:
        assert codecs_of(stored(raw, topic)) == {expected}
    assert [(k, v, o) for k, v, o in read_partition(broker.bootstrap, topic)] == [
        (str(i).encode(), v, i) for i, v in enumerate(VALUES)]


def test_a_transactional_batch_keeps_its_producer_fields(broker):
    create_topic(broker.bootstrap, "codec-txn", config={"compression.type": "zstd"})
    producer = Producer({"bootstrap.servers": broker.bootstrap, "transactional.id": "codec-txn",
                         "compression.type": "none", "linger.ms": 20})
    producer.init_transactions(30)
    producer.begin_transaction()
    for i, value in enumerate(VALUES[:50]):
        producer.produce("codec-txn", key=str(i).encode(), value=value, partition=0)
    producer.commit_transaction(30)
    with RawClient(broker.port) as raw:
        data = [h for h in stored(raw, "codec-txn") if not h.is_control]
        assert codecs_of(data) == {rec.COMPRESSION_ZSTD}
        assert all(h.is_transactional and h.producer_id >= 0 and h.base_sequence >= 0 for h in data)
    assert [v for _, v, _ in read_partition(broker.bootstrap, "codec-txn", "read_committed")] == VALUES[:50]


def test_codec_and_level_follow_live_config_changes(broker):
    create_topic(broker.bootstrap, "codec-live")
    batch = rec.build_batch([rec.Record(b"k", v) for v in VALUES])
    with RawClient(broker.port) as raw:
        assert produce(raw, "codec-live", batch).error_code == 0
        alter_config(raw, BROKER_RESOURCE, "", "compression.type", "gzip")  # the cluster-wide default
        alter_config(raw, TOPIC_RESOURCE, "codec-live", "compression.gzip.level", "1")
        assert produce(raw, "codec-live", batch).error_code == 0
        alter_config(raw, TOPIC_RESOURCE, "codec-live", "compression.gzip.level", "9")
        assert produce(raw, "codec-live", batch).error_code == 0
        alter_config(raw, BROKER_RESOURCE, "", "compression.type", None)
        assert produce(raw, "codec-live", batch).error_code == 0
        headers = stored(raw, "codec-live")
    assert [h.attributes & rec.COMPRESSION_MASK for h in headers] == [0, 1, 1, 0]
    fast, small = headers[1].batch_length, headers[2].batch_length
    assert small < fast < headers[0].batch_length  # level 9 packs tighter than level 1


def test_fetch_before_v10_reads_a_zstd_topic(broker):
    """Kafka 4 converts nothing down (KIP-896): Fetch v4-9, which predate zstd, get a zstd topic's batches as
    stored, as Kafka 4.4 answers them (tests/differential/test_produce.py compares); other topics stay readable."""
    create_topic(broker.bootstrap, "codec-old-zstd", config={"compression.type": "zstd"})
    create_topic(broker.bootstrap, "codec-old-plain")
    batch = rec.build_batch([rec.Record(b"k", v) for v in VALUES[:10]])
    with RawClient(broker.port) as raw:
        for topic in ("codec-old-zstd", "codec-old-plain"):
            assert produce(raw, topic, batch).error_code == 0
        for version in (4, 9, 10):
            part = fetch_partition(raw, "codec-old-zstd", version=version)
            assert part.error_code == 0 and part.high_watermark == 10 and codecs_of(
                [h for _, h in rec.iter_batches(part.records)]) == {rec.COMPRESSION_ZSTD}
            assert fetch_partition(raw, "codec-old-plain", version=version).error_code == 0
