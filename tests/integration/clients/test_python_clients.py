"""kafka-python 3.0.12 and aiokafka 0.14 produce and consume against a real broker process."""

from __future__ import annotations

import asyncio

import pytest
from kafka import KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import KafkaAdminClient, NewTopic

pytestmark = pytest.mark.integration

N = 2_000


def test_kafka_python_roundtrip(broker):
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    try:
        admin.create_topics([NewTopic("kp-topic", num_partitions=2, replication_factor=1)])
        assert "kp-topic" in admin.list_topics()
    finally:
        admin.close()
    # kafka-python 3 defaults to an idempotent producer (InitProducerId + sequence numbers).
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap, acks="all", linger_ms=5)
    futures = [
        producer.send("kp-topic", key=f"k{i}".encode(), value=f"v{i}".encode(), partition=i % 2) for i in range(N)
    ]
    producer.flush(30)
    metas = [f.get(timeout=30) for f in futures]
    producer.close()
    assert sorted(m.offset for m in metas if m.partition == 0) == list(range(N // 2))

    consumer = KafkaConsumer(bootstrap_servers=broker.bootstrap, enable_auto_commit=False,
                             auto_offset_reset="earliest", consumer_timeout_ms=30_000)
    consumer.assign([TopicPartition("kp-topic", 0), TopicPartition("kp-topic", 1)])
    consumer.seek_to_beginning()
    got = {}
    for msg in consumer:
        got[msg.key] = (msg.value, msg.partition)
        if len(got) == N:
            break
    consumer.close()
    assert got == {f"k{i}".encode(): (f"v{i}".encode(), i % 2) for i in range(N)}


def test_aiokafka_roundtrip(broker):
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
    from aiokafka import TopicPartition as AioTP

    async def run():
        producer = AIOKafkaProducer(bootstrap_servers=broker.bootstrap, acks="all", enable_idempotence=True)
        await producer.start()
        try:
            # Metadata auto-creates the topic (auto.create.topics.enable defaults to true).
            for i in range(N):
                await producer.send("aio-topic", key=f"k{i}".encode(), value=f"v{i}".encode(), partition=0)
            await producer.flush()
        finally:
            await producer.stop()
        consumer = AIOKafkaConsumer(bootstrap_servers=broker.bootstrap, enable_auto_commit=False,
                                    auto_offset_reset="earliest")
        await consumer.start()
        try:
            consumer.assign([AioTP("aio-topic", 0)])
            await consumer.seek_to_beginning()
            got = []
            while len(got) < N:
                batch = await consumer.getmany(timeout_ms=5000)
                assert batch, "no records within 5 s"
                for msgs in batch.values():
                    got.extend((m.key, m.value, m.offset) for m in msgs)
        finally:
            await consumer.stop()
        return got

    got = asyncio.run(run())
    assert got == [(f"k{i}".encode(), f"v{i}".encode(), i) for i in range(N)]
