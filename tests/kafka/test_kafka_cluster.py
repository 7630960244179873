"""The three-node Kafka 4.4 cluster (the `kafka_cluster` fixture): replicated topics with leaders on every node,
acks=all writes that survive a node's SIGKILL while two replicas remain in sync, and the node's return."""

from __future__ import annotations

import time
import uuid

from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition
from confluent_kafka.admin import AdminClient, ConfigResource, NewTopic, ResourceType

from tests.helpers.confluent_clients import produce_all
from tests.helpers.kafka_process import KafkaCluster
from tests.helpers.waiting import wait_until

PARTITIONS = 6


def read_all(bootstrap: str, topic: str, count: int, timeout: float = 60.0) -> list[bytes]:
    """The values of every partition of `topic` from its start, once `count` records were read."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"reader-{uuid.uuid4().hex[:6]}",
                         "enable.auto.commit": False})
    consumer.assign([TopicPartition(topic, p, 0) for p in range(PARTITIONS)])
    values: list[bytes] = []
    deadline = time.monotonic() + timeout
    try:
        while len(values) < count:
            assert time.monotonic() < deadline, f"read {len(values)} of {count} records in {timeout:g} s"
            for msg in consumer.consume(1000, 0.5):
                if msg.error():
                    raise KafkaException(msg.error())
                values.append(msg.value())
    finally:
        consumer.close()
    return values


def partitions(admin: AdminClient, topic: str):
    return admin.list_topics(topic, timeout=30).topics[topic].partitions.values()


def every_partition(admin: AdminClient, topic: str, condition) -> bool:
    """`condition` holds for each of the topic's PARTITIONS partitions (not vacuously, before the broker lists
    them: a topic just created may be listed without partitions for a moment)."""
    listed = list(partitions(admin, topic))
    return len(listed) == PARTITIONS and all(condition(p) for p in listed)


def test_a_replicated_topic_survives_the_sigkill_of_a_node(kafka_cluster: KafkaCluster) -> None:
    admin = AdminClient({"bootstrap.servers": kafka_cluster.bootstrap})
    topic = f"replicated-{uuid.uuid4().hex[:8]}"
    # No replication factor given: the cluster's default (3) applies.
    admin.create_topics([NewTopic(topic, num_partitions=PARTITIONS)])[topic].result(timeout=30)
    wait_until(lambda: every_partition(admin, topic, lambda p: len(p.isrs) == 3 and p.leader > 0), 30,
               "every partition to have a leader and three in-sync replicas")
    layout = list(partitions(admin, topic))
    assert len(layout) == PARTITIONS
    assert all(sorted(p.replicas) == [1, 2, 3] for p in layout), layout
    assert {p.leader for p in layout} == {1, 2, 3}, "leaders are not spread over the three nodes"
    resource = ConfigResource(ResourceType.TOPIC, topic)

    def min_isr() -> str | None:
        """The topic's min.insync.replicas, or None while the broker asked has not learned of the topic yet (the
        admin client asks any broker; a follower may replay the topic's records after the leaders' answer)."""
        try:
            return admin.describe_configs([resource])[resource].result(timeout=30)["min.insync.replicas"].value
        except KafkaException as err:
            if err.args[0].code() != KafkaError.UNKNOWN_TOPIC_OR_PART:
                raise
            return None
    assert wait_until(min_isr, 30, "the topic's configs on the broker asked") == "2"

    first = [f"a{i}".encode() for i in range(60)]
    assert len(produce_all(kafka_cluster.bootstrap, topic, first, partition=None)) == 60  # acks=all
    assert sorted(read_all(kafka_cluster.bootstrap, topic, 60)) == sorted(first)

    victim = kafka_cluster.node(2)
    victim.kill9()
    # Two replicas of each partition remain: acks=all writes go on once the leaders it had have moved.
    second = [f"b{i}".encode() for i in range(60)]
    assert len(produce_all(kafka_cluster.bootstrap, topic, second, partition=None)) == 60
    assert all(p.leader in (1, 3) for p in partitions(admin, topic))
    assert sorted(read_all(kafka_cluster.bootstrap, topic, 120)) == sorted(first + second)

    victim.start()  # same ports, same log directory
    wait_until(lambda: every_partition(admin, topic, lambda p: len(p.isrs) == 3), 120,
               "the restarted node to catch up and rejoin every partition's ISR")
    third = [f"c{i}".encode() for i in range(30)]
    assert len(produce_all(kafka_cluster.bootstrap, topic, third, partition=None)) == 30
    assert sorted(read_all(kafka_cluster.bootstrap, topic, 150)) == sorted(first + second + third)
