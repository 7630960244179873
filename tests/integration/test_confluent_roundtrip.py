"""confluent-kafka (librdkafka 2.16) Producer/Consumer against a real broker process."""

from __future__ import annotations

import pytest
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

pytestmark = pytest.mark.integration


def create_topic(bootstrap: str, name: str, partitions: int = 1, config: dict | None = None) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    futures = admin.create_topics([NewTopic(name, num_partitions=partitions, config=config or {})])
    futures[name].result(timeout=30)


def produce_all(bootstrap: str, topic: str, values: list[bytes], partition: int | None = 0,
                **conf) -> list[tuple[int, int]]:
    """Produce with acks=all and idempotence; return (partition, offset) of every delivered record.

    `partition=None` lets the client's partitioner spread the records (keyed by their index)."""
    delivered: list[tuple[int, int]] = []
    errors: list[object] = []

    def on_delivery(err, msg):
        if err is not None:
            errors.append(err)
        else:
            delivered.append((msg.partition(), msg.offset()))

    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "acks": "all",
            "enable.idempotence": True,
            "linger.ms": 5,
            **conf,
        }
    )
    for i, value in enumerate(values):
        while True:
            try:
                extra = {} if partition is None else {"partition": partition}
                producer.produce(topic, key=str(i).encode(), value=value, on_delivery=on_delivery, **extra)
                break
            except BufferError:
                producer.poll(0.1)
        producer.poll(0)
    assert producer.flush(60) == 0
    assert errors == []
    return delivered


def consume_all(bootstrap: str, topic: str, count: int, timeout: float = 60.0) -> list[tuple[bytes, bytes, int]]:
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "unused-with-assign",
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
        }
    )
    consumer.assign([TopicPartition(topic, 0, 0)])
    out: list[tuple[bytes, bytes, int]] = []
    import time

    deadline = time.monotonic() + timeout
    try:
        while len(out) < count and time.monotonic() < deadline:
            for msg in consumer.consume(10000, 1.0):
                if msg.error():
                    raise KafkaException(msg.error())
                out.append((msg.key(), msg.value(), msg.offset()))
    finally:
        consumer.close()
    return out


@pytest.mark.parametrize("compression", ["none", "gzip", "snappy", "lz4", "zstd"])
def test_compressed_roundtrip(broker, compression):
    topic = f"rt-{compression}"
    create_topic(broker.bootstrap, topic)
    n = 100_000 if compression == "lz4" else 20_000
    values = [f"value-{i}-{compression}".encode() * (1 + i % 3) for i in range(n)]
    delivered = produce_all(broker.bootstrap, topic, values, **{"compression.type": compression})
    assert sorted(offset for _, offset in delivered) == list(range(n))
    got = consume_all(broker.bootstrap, topic, n)
    assert [(k, v) for k, v, _ in got] == [(str(i).encode(), values[i]) for i in range(n)]
    assert [o for _, _, o in got] == list(range(n))
