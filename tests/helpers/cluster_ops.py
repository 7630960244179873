"""Moving things around a Kafka cluster for tests (the `kafka_cluster` fixtures): where each partition's leader is,
moving leadership while every broker stays up, waiting for failovers and for a restarted broker to catch up, and
which broker coordinates a group."""

from __future__ import annotations

import time

from confluent_kafka import ElectionType, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from tests.helpers.kafka_process import KafkaCluster
from tests.helpers.raw_client import RawClient
from tests.helpers.waiting import wait_until

ALTER_PARTITION_REASSIGNMENTS, FIND_COORDINATOR = 45, 10


def admin(cluster: KafkaCluster) -> AdminClient:
    """An AdminClient bootstrapped from the nodes that run now."""
    return AdminClient({"bootstrap.servers": ",".join(n.bootstrap for n in cluster.nodes if n.alive())})


def partitions(cluster: KafkaCluster, topic: str) -> dict[int, object]:
    return dict(admin(cluster).list_topics(topic, timeout=30).topics[topic].partitions)


def leaders(cluster: KafkaCluster, topic: str) -> dict[int, int]:
    """partition -> leader id (-1: none)."""
    return {p: meta.leader for p, meta in partitions(cluster, topic).items()}


def create_spread_topic(cluster: KafkaCluster, topic: str, count: int) -> dict[int, int]:
    """A topic of `count` partitions, replication factor 3, whose preferred leaders go round the brokers
    (partition p led by broker p % 3 + 1); waits until each has its leader and three in-sync replicas."""
    ids = [n.node_id for n in cluster.nodes]
    assignment = [[ids[(p + i) % len(ids)] for i in range(len(ids))] for p in range(count)]
    client = admin(cluster)  # kept until the future is done: destroying it fails the future
    client.create_topics([NewTopic(topic, num_partitions=count, replica_assignment=assignment)])[topic].result(
        timeout=60)
    wait_until(lambda: all(p.leader == assignment[i][0] and len(p.isrs) == len(ids)
                           for i, p in partitions(cluster, topic).items()) and len(partitions(cluster, topic)) == count,
               60, f"{topic}'s leaders on every broker with full ISRs")
    return leaders(cluster, topic)


def move_leadership(cluster: KafkaCluster, topic: str, moves: dict[int, int]) -> None:
    """Make broker `moves[p]` the leader of partition p while every broker stays up: reorder the partition's
    replicas so that it comes first (AlterPartitionReassignments, same replica set) and elect preferred leaders.
    Waits until the metadata shows the new leaders."""
    current = partitions(cluster, topic)
    body = {"timeout_ms": 30000, "topics": [{"name": topic, "partitions": [
        {"partition_index": p, "replicas": [leader] + [r for r in current[p].replicas if r != leader]}
        for p, leader in moves.items()]}]}
    node = next(n for n in cluster.nodes if n.alive())
    with RawClient(node.port) as client:
        resp = client.call(ALTER_PARTITION_REASSIGNMENTS, 0, body)
    assert resp.error_code == 0 and all(p.error_code == 0 for t in resp.responses for p in t.partitions), resp
    tps = [TopicPartition(topic, p) for p in moves]

    def elected() -> bool:
        client = admin(cluster)
        try:
            client.elect_leaders(ElectionType.PREFERRED, tps).result(timeout=30)
        except Exception:  # noqa: BLE001 - the reassignment may not be applied yet: try again
            return False
        return leaders(cluster, topic).items() >= moves.items()

    wait_until(elected, 60, f"leaders {moves} of {topic}", interval=0.5)


def wait_for_failover(cluster: KafkaCluster, topic: str, gone: int, timeout: float = 60.0) -> dict[int, int]:
    """Wait until no partition of `topic` is led by broker `gone` (stopped or killed) and each has a leader."""
    return wait_until(lambda: (lambda ls: ls if all(v not in (-1, gone) for v in ls.values()) else None)(
        leaders(cluster, topic)), timeout, f"{topic}'s partitions led by brokers other than {gone}", interval=0.3)


def wait_for_full_isr(cluster: KafkaCluster, topics: list[str], timeout: float = 180.0) -> None:
    """Wait until every partition of `topics` has all the brokers in its ISR (a restarted broker caught up)."""
    size = len(cluster.nodes)
    wait_until(lambda: all(partitions(cluster, t) and all(len(p.isrs) == size for p in partitions(cluster, t).values())
                           for t in topics), timeout,
               f"every broker back in the ISRs of {topics}", interval=0.5)


def group_coordinator(cluster: KafkaCluster, group: str) -> int:
    """The broker that coordinates `group`."""
    return _coordinator(cluster, group, 0)


def transaction_coordinator(cluster: KafkaCluster, transactional_id: str) -> int:
    """The broker that coordinates `transactional_id`."""
    return _coordinator(cluster, transactional_id, 1)


def _coordinator(cluster: KafkaCluster, key: str, key_type: int) -> int:
    """FindCoordinator v4, asked of any broker that runs, until it names one."""
    node = next(n for n in cluster.nodes if n.alive())
    end = time.monotonic() + 60
    while True:
        with RawClient(node.port) as client:
            c = client.call(FIND_COORDINATOR, 4, {"key_type": key_type, "coordinator_keys": [key]}).coordinators[0]
        if c.error_code == 0:
            return c.node_id
        assert time.monotonic() < end, f"no coordinator for {key}: error {c.error_code}"
        time.sleep(0.2)
