"""Produce and fetch throughput with confluent-kafka against a Kafka-wire server.

One scenario = produce N records of a given size with acks=all into a fresh topic (one partition unless told),
then read them back with an assigned Consumer from offset 0. Times are wall-clock from first produce() to flush() and
from assign() to the last record.
"""

from __future__ import annotations

import contextlib
import time
import uuid
from dataclasses import asdict, dataclass

from confluent_kafka import Consumer, KafkaException, Producer

from bench.clients import create_topic, read, send


@dataclass
class Result:
    server: str
    scenario: str
    record_bytes: int
    records: int
    produce_s: float
    fetch_s: float

    @property
    def produce_mib_s(self) -> float:
        return self.records * self.record_bytes / self.produce_s / 2**20

    @property
    def fetch_mib_s(self) -> float:
        return self.records * self.record_bytes / self.fetch_s / 2**20

    def as_dict(self) -> dict:
        return {
            **asdict(self),
            "produce_mib_s": round(self.produce_mib_s, 1),
            "produce_records_s": round(self.records / self.produce_s),
            "fetch_mib_s": round(self.fetch_mib_s, 1),
            "fetch_records_s": round(self.records / self.fetch_s),
        }


def _create_topic(bootstrap: str, topic: str, partitions: int = 1) -> None:
    # Peers without CreateTopics auto-create the topic on first produce.
    with contextlib.suppress(KafkaException):
        create_topic(bootstrap, topic, partitions)


def produce(bootstrap: str, topic: str, records: int, size: int, compression: str = "none",
            partitions: int = 1) -> float:
    producer = Producer(
        {
            "bootstrap.servers": bootstrap, "log_level": 3,
            "acks": "all",
            "linger.ms": 5,
            "batch.size": 1_000_000,
            "queue.buffering.max.kbytes": 1_048_576,
            "compression.type": compression,
        }
    )
    errors = []

    def on_delivery(err, _msg):
        if err is not None:
            errors.append(err)

    start = time.perf_counter()
    send(producer, topic, b"x" * size, records, partitions, on_delivery=on_delivery)
    remaining = producer.flush(120)
    elapsed = time.perf_counter() - start
    if remaining or errors:
        raise RuntimeError(f"produce failed: {remaining} undelivered, errors {errors[:3]}")
    return elapsed


def fetch(bootstrap: str, topic: str, records: int, partitions: int = 1) -> float:
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap, "log_level": 3,
            "group.id": f"bench-{uuid.uuid4()}",
            "enable.auto.commit": False,
            "fetch.max.bytes": 52_428_800,
            "max.partition.fetch.bytes": 10_485_760,
        }
    )
    try:
        start, _first = read(consumer, topic, partitions, records, timeout=120)
        return time.perf_counter() - start
    finally:
        consumer.close()


def run_scenario(server: str, bootstrap: str, size: int, records: int, compression: str = "none") -> Result:
    topic = f"bench-{size}-{uuid.uuid4().hex[:8]}"
    _create_topic(bootstrap, topic)
    produce_s = produce(bootstrap, topic, records, size, compression)
    fetch_s = fetch(bootstrap, topic, records)
    label = f"{size}B acks=all" + ("" if compression == "none" else f" {compression}")
    return Result(server, label, size, records, produce_s, fetch_s)
