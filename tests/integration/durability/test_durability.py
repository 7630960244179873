"""Restarts: records and topic ids survive a clean restart, acknowledged records survive kill -9."""

from __future__ import annotations

import time

import pytest
from confluent_kafka import Producer

from tests.helpers.confluent_clients import admin_client, consume_all, create_topic, produce_all

pytestmark = pytest.mark.integration


def _topic_ids(bootstrap: str) -> dict[str, str]:
    admin = admin_client(bootstrap)
    from confluent_kafka import TopicCollection

    names = [t for t in admin.list_topics(timeout=10).topics if not t.startswith("__")]
    described = admin.describe_topics(TopicCollection(names))
    return {name: str(f.result(timeout=30).topic_id) for name, f in described.items()}


def test_restart_keeps_records_and_topic_ids(broker):
    create_topic(broker.bootstrap, "keep", partitions=2)
    values = [f"r{i}".encode() for i in range(5_000)]
    produce_all(broker.bootstrap, "keep", values)
    ids_before = _topic_ids(broker.bootstrap)
    broker.restart()
    assert _topic_ids(broker.bootstrap) == ids_before
    got = consume_all(broker.bootstrap, "keep", len(values))
    assert [v for _, v, _ in got] == values
    # Appends continue after the restored end offset.
    produce_all(broker.bootstrap, "keep", [b"after"])
    got = consume_all(broker.bootstrap, "keep", len(values) + 1)
    assert got[-1][1:] == (b"after", len(values))


def test_kill9_keeps_acknowledged_records(broker):
    create_topic(broker.bootstrap, "durable")
    acked: dict[int, bytes] = {}

    def on_delivery(err, msg):
        if err is None:
            acked[msg.offset()] = msg.value()

    producer = Producer({"bootstrap.servers": broker.bootstrap, "acks": "all", "enable.idempotence": True,
                         "linger.ms": 2, "message.timeout.ms": 5000})
    sent = 0
    deadline = time.monotonic() + 120  # the loop ends at 20 000 acknowledgements; a loaded machine is slow
    while len(acked) < 20_000 and time.monotonic() < deadline:
        try:
            producer.produce("durable", value=f"m{sent}".encode(), partition=0, on_delivery=on_delivery)
            sent += 1
        except BufferError:
            pass
        producer.poll(0)
    broker.kill9()  # while the producer still has requests in flight
    producer.flush(6)
    producer.purge()
    assert len(acked) >= 20_000
    broker.restart()
    got = consume_all(broker.bootstrap, "durable", max(acked) + 1)
    stored = {offset: value for _, value, offset in got}
    missing = [o for o in acked if stored.get(o) != acked[o]]
    assert missing == []
