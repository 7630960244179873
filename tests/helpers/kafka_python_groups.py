"""kafka-python (3.0.12) group consumers that join with their subscription's metadata already known.

kafka-python's leader records the metadata it assigned from (`_assignment_snapshot`) and rejoins when its
metadata later differs. A leader that assigns before its client has the subscribed topic's partitions hands out
an empty assignment, then rejoins only because of that difference, with `rejoin_needed` still false. Once its
SyncGroup answers, its snapshot matches again, so `need_rejoin()` turns false while the finished join task waits
for a `poll()` to collect it: a `poll()` whose timer ran out during that join never collects it, and the member
never applies its assignment nor sends another heartbeat, so the broker expires it after its session timeout. It
happens against Kafka and Shoal alike, on a loaded machine with short polls: two members joining a new group
with `poll(timeout_ms=50)` stalled in 8 of 44 joins against Shoal (load 11-16) and in 6 of 30 against Kafka 4.4
(`group.initial.rebalance.delay.ms=0` as in the fixtures, six busy processes beside it); with the subscription's
metadata fetched first, in none of 280 against Shoal and none of 40 against Kafka.
Subscribing first and then asking for the topic's partitions makes the client fetch them with the subscription
set, so its snapshot holds them before the first join.
"""

from __future__ import annotations

from typing import Any

from kafka import KafkaConsumer


def subscribed_consumer(topic: str, partitions: int, **config: Any) -> KafkaConsumer:
    """A KafkaConsumer subscribed to `topic` whose metadata snapshot holds the topic's `partitions` partitions."""
    consumer = KafkaConsumer(**config)
    consumer.subscribe([topic])
    known = consumer.partitions_for_topic(topic)
    assert known == set(range(partitions)), known
    return consumer
