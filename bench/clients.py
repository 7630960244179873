"""Client-side steps the benches share: create a topic, push records through a confluent Producer, read a known
number of records with a Consumer, and write a result file under bench/results/."""

from __future__ import annotations

import json
import platform
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic


def create_topic(bootstrap: str, topic: str, partitions: int = 1) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap, "log_level": 3})
    admin.create_topics([NewTopic(topic, num_partitions=partitions)])[topic].result(timeout=30)


def produce_with_room(producer: Producer, topic: str, value: bytes, *, backoff_s: float = 0.01, **kwargs) -> None:
    """producer.produce(topic, value, **kwargs), polling `backoff_s` at a time while the local queue is full."""
    while True:
        try:
            producer.produce(topic, value, **kwargs)
            return
        except BufferError:
            producer.poll(backoff_s)


def send(producer: Producer, topic: str, payload: bytes, records: int, partitions: int = 1,
         on_delivery: Callable | None = None, first: int = 0) -> None:
    """Queue `records` copies of `payload`, round-robin over the partitions starting after the `first`-th
    record, waiting for room when the local queue is full. Does not flush."""
    for i in range(first, first + records):
        produce_with_room(producer, topic, payload, partition=i % partitions, on_delivery=on_delivery)


def read(consumer: Consumer, topic: str, partitions: int, records: int, timeout: float = 180) -> tuple[float, float]:
    """Assign the partitions from offset 0 and consume until `records` arrived; returns (perf_counter at the
    assign, at the first record). The caller closes the consumer; the time of the last record is now."""
    start = time.perf_counter()
    consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    seen, first = 0, None
    while seen < records:
        if time.perf_counter() - start > timeout:
            raise RuntimeError(f"fetch of {topic} stalled at {seen}/{records}")
        # Ask for no more than are missing: consume() waits out its timeout when fewer arrive.
        for msg in consumer.consume(min(10_000, records - seen), 0.5):
            if msg.error():
                raise KafkaException(msg.error())
            if first is None:
                first = time.perf_counter()
            seen += 1
    if seen != records:
        raise RuntimeError(f"read {seen} records of {topic}, expected {records}")
    return start, first if first is not None else start


def write_results(out: str | Path, name: str, results: Any) -> Path:
    """Write `results` with the machine they were measured on to <out>/<name>-<timestamp>.json."""
    out_dir = Path(out)
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / f"{name}-{time.strftime('%Y%m%dT%H%M%S')}.json"
    path.write_text(json.dumps({"machine": platform.platform(), "python": platform.python_version(),
                                "results": results}, indent=2))
    return path
