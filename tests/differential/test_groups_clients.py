"""Consumer groups through real clients, Kafka 4.4 against Shoal: confluent-kafka Consumers with
group.protocol=classic and group.protocol=consumer (the assignment each sees once the group settles, the offsets
it commits) and the AdminClient's view (list_consumer_groups, describe_consumer_groups,
list_consumer_group_offsets, alter_consumer_group_offsets, delete_consumer_groups), offsets a transactional
producer commits (OffsetFetch with require_stable while they are pending); kafka-python's and aiokafka's classic
consumers.

Normalisation: which member gets which partitions depends on the members' ids, which are random (made by the
broker for classic members, by the client for consumer-protocol members) - so an assignment is compared by its
structure: each member's count of partitions, sorted, and that together they hold each partition once. Members
are told apart by their client ids.
"""

from __future__ import annotations

import asyncio
import threading

import pytest
from aiokafka import AIOKafkaConsumer
from aiokafka.structs import TopicPartition as AioPartition
from confluent_kafka import Consumer, ConsumerGroupTopicPartitions, Producer, TopicPartition
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewTopic,
    ResourceType,
)
from kafka import KafkaAdminClient

from tests.helpers.differential import assert_same
from tests.helpers.group_diff import OFFSET_FETCH, plain, run_both, wait_group_coordinator
from tests.helpers.kafka_python_groups import subscribed_consumer
from tests.helpers.waiting import wait_until

pytestmark = pytest.mark.integration

PARTITIONS = 4


def _topic(target, base: str) -> str:
    topic = target.unique(base)
    admin = AdminClient(target.client_config())
    admin.create_topics([NewTopic(topic, PARTITIONS, 1)])[topic].result(timeout=30)
    wait_until(lambda: topic in admin.list_topics(timeout=10).topics, 30, "the topic's metadata")
    return topic


def _settle(consumers: list[Consumer], topic: str) -> list[list[int]]:
    """Poll every consumer until together they hold each partition once; their partitions, by consumer."""
    def settled():
        for consumer in consumers:
            consumer.poll(0.05)
        held = [sorted(tp.partition for tp in consumer.assignment() if tp.topic == topic) for consumer in consumers]
        together = sorted(p for ps in held for p in ps)
        return together == list(range(PARTITIONS)) and all(held) and held

    return wait_until(settled, 60, "the group to settle", interval=0.01)


def _structure(held: list[list[int]]) -> dict:
    return {"counts": sorted(len(ps) for ps in held),
            "each_partition_once": sorted(p for ps in held for p in ps) == list(range(PARTITIONS))}


def _describe(admin: AdminClient, group: str) -> dict:
    d = admin.describe_consumer_groups([group], request_timeout=30)[group].result()
    members = sorted(d.members, key=lambda m: m.client_id)
    return {"group_id": d.group_id, "simple": d.is_simple_consumer_group, "state": str(d.state),
            "type": str(d.type), "assignor": d.partition_assignor,
            "members": [{"client_id": m.client_id, "host": m.host, "instance": m.group_instance_id,
                         "partitions": len(m.assignment.topic_partitions),
                         "target": None if m.target_assignment is None
                         else len(m.target_assignment.topic_partitions)} for m in members]}


def _offsets(admin: AdminClient, group: str, topic: str) -> dict:
    request = ConsumerGroupTopicPartitions(group, [TopicPartition(topic, p) for p in range(PARTITIONS)])
    result = admin.list_consumer_group_offsets([request], request_timeout=30)[group].result()
    return {str(tp.partition): [tp.offset, tp.metadata, tp.error and tp.error.code()]
            for tp in result.topic_partitions}


def _listed(admin: AdminClient, group: str) -> list:
    listed = admin.list_consumer_groups(request_timeout=30).result()
    return [[g.group_id, str(g.state), str(g.type), g.is_simple_consumer_group] for g in listed.valid
            if g.group_id == group]


@pytest.mark.parametrize("protocol", ["classic", "consumer"])
def test_confluent_consumers_and_admin(pair, protocol):
    def scenario(target):
        topic, group = _topic(target, f"cl-{protocol}"), target.unique(f"cl-{protocol}")
        admin = AdminClient(target.client_config())
        if target.name == "kafka" and protocol == "consumer":
            # the assignment interval is Kafka's alone (docs/kafka-differences.md): 0 is Shoal's behaviour
            resource = ConfigResource(ResourceType.GROUP, group, incremental_configs=[ConfigEntry(
                "consumer.assignment.interval.ms", "0", incremental_operation=AlterConfigOpType.SET)])
            admin.incremental_alter_configs([resource])[resource].result(timeout=30)
        settings = {**target.client_config(), "group.id": group, "group.protocol": protocol,
                    "auto.offset.reset": "earliest", "enable.auto.commit": False}
        if protocol == "classic":
            settings.update({"session.timeout.ms": 6000, "heartbeat.interval.ms": 500})
        seen = {}
        consumers = [Consumer({**settings, "client.id": f"member-{i}"}) for i in (1, 2)]
        try:
            for consumer in consumers:
                consumer.subscribe([topic])
            seen["assignment"] = _structure(_settle(consumers, topic))
            for consumer in consumers:
                offsets = [TopicPartition(topic, tp.partition, 10 + tp.partition, f"m{tp.partition}")
                           for tp in consumer.assignment()]
                committed = consumer.commit(offsets=offsets, asynchronous=False)
                assert all(tp.error is None for tp in committed), committed
            seen["committed_seen_by_consumer"] = sorted(
                (tp.partition, tp.offset) for consumer in consumers
                for tp in consumer.committed(consumer.assignment(), timeout=30))
            seen["listed"] = _listed(admin, group)
            seen["described"] = _describe(admin, group)
            seen["offsets"] = _offsets(admin, group, topic)
            seen["delete_while_active"] = _delete(admin, group)
        finally:
            for consumer in consumers:
                consumer.close()
        seen["described_after_close"] = _describe(admin, group)
        request = ConsumerGroupTopicPartitions(group, [TopicPartition(topic, 0, 3), TopicPartition(topic, 1, 0)])
        altered = admin.alter_consumer_group_offsets([request], request_timeout=30)[group].result()
        seen["altered"] = sorted((tp.partition, tp.offset, tp.error) for tp in altered.topic_partitions)
        seen["offsets_after_alter"] = _offsets(admin, group, topic)
        seen["delete"] = _delete(admin, group)
        seen["listed_after_delete"] = _listed(admin, group)
        seen["described_after_delete"] = _describe(admin, group)
        return seen

    assert_same(run_both(pair, scenario), f"confluent-kafka consumers with group.protocol={protocol}")


def _delete(admin: AdminClient, group: str):
    try:
        admin.delete_consumer_groups([group], request_timeout=30)[group].result()
        return "deleted"
    except Exception as exc:  # the error's code is what the client observed
        return {"error": exc.args[0].code()}


def test_kafka_python_classic_consumer_and_admin(pair):
    def scenario(target):
        topic, group = _topic(target, "kp"), target.unique("kp")
        consumers = [subscribed_consumer(topic, PARTITIONS, bootstrap_servers=target.bootstrap, group_id=group,
                                         client_id=f"kp-{i}", enable_auto_commit=False, auto_offset_reset="earliest",
                                         session_timeout_ms=6000, heartbeat_interval_ms=500) for i in (1, 2)]
        admin = KafkaAdminClient(bootstrap_servers=target.bootstrap, client_id="kp-admin")
        seen = {}
        # kafka-python joins inside poll() and blocks there while the broker parks its JoinGroup: one thread each
        stop = threading.Event()
        held: dict[int, list[int]] = {}

        def run(i: int, consumer) -> None:
            while not stop.is_set():
                consumer.poll(timeout_ms=50)
                held[i] = sorted(tp.partition for tp in consumer.assignment())

        threads = [threading.Thread(target=run, args=(i, c), daemon=True) for i, c in enumerate(consumers)]
        for thread in threads:
            thread.start()
        try:
            def settled():
                now = [held.get(i, []) for i in range(len(consumers))]
                return sorted(p for ps in now for p in ps) == list(range(PARTITIONS)) and all(now) and now

            what = f"the kafka-python group on {target.name} to settle"
            seen["assignment"] = _structure(wait_until(settled, 60, what))
            described = admin.describe_groups([group])[group]
            members = sorted(described.pop("members"), key=lambda m: m["client_id"])
            seen["described"] = {k: v for k, v in described.items() if k != "group_id"}
            seen["members"] = [{"client_id": m["client_id"], "client_host": m["client_host"],
                                "subscription": m["member_metadata"],
                                "partitions": sum(len(t["partitions"])
                                                  for t in m["member_assignment"]["assigned_partitions"])}
                               for m in members]
            seen["listed"] = [g for g in admin.list_groups() if g["group_id"] == group]
        finally:
            stop.set()
            for thread in threads:
                thread.join(30)
            for consumer in consumers:
                consumer.close()
            admin.close()
        return seen

    assert_same(run_both(pair, scenario), "kafka-python's classic group")


def test_transactional_offsets_and_require_stable(pair):
    def scenario(target):
        topic, group = _topic(target, "txo"), target.unique("txo")
        consumer = Consumer({**target.client_config(), "group.id": group, "enable.auto.commit": False})
        producer = Producer({**target.client_config(), "transactional.id": target.unique("txo-producer")})
        seen = {}
        with target.raw() as c:
            wait_group_coordinator(c, group)

            def fetch(require_stable):
                answer = plain(c.call(OFFSET_FETCH, 8, {"groups": [{"group_id": group, "topics": [
                    {"name": topic, "partition_indexes": [0, 1]}]}], "require_stable": require_stable}))
                return [[p["partition_index"], p["committed_offset"], p["error_code"]]
                        for p in answer["groups"][0]["topics"][0]["partitions"]]

            try:
                producer.init_transactions(30)
                producer.begin_transaction()
                producer.send_offsets_to_transaction([TopicPartition(topic, 0, 7)],
                                                     consumer.consumer_group_metadata(), 30)
                seen["pending_require_stable"] = fetch(True)
                seen["pending_read_committed"] = fetch(False)
                producer.commit_transaction(30)
                # the markers reach the group coordinator after EndTxn answers
                seen["committed"] = wait_until(lambda: (f := fetch(True)) and f[0][2] == 0 and f, 30,
                                               "the offsets' commit marker")
                producer.begin_transaction()
                producer.send_offsets_to_transaction([TopicPartition(topic, 1, 9)],
                                                     consumer.consumer_group_metadata(), 30)
                producer.abort_transaction(30)
                seen["aborted"] = wait_until(lambda: (f := fetch(True)) and f[1][2] == 0 and f, 30,
                                             "the offsets' abort marker")
            finally:
                consumer.close()
                producer.flush(10)
        return seen

    assert_same(run_both(pair, scenario), "transactional offsets and require_stable")


def test_aiokafka_classic_consumers_commit_and_committed(pair):
    def scenario(target):
        topic, group = _topic(target, "aio"), target.unique("aio")

        async def run() -> dict:
            consumers = [AIOKafkaConsumer(topic, bootstrap_servers=target.bootstrap, group_id=group,
                                          client_id=f"aio-{i}", enable_auto_commit=False,
                                          session_timeout_ms=6000, heartbeat_interval_ms=500) for i in (1, 2)]
            for consumer in consumers:
                await consumer.start()
            try:
                loop = asyncio.get_running_loop()
                end = loop.time() + 60
                while True:
                    await asyncio.gather(*(c.getmany(timeout_ms=50) for c in consumers))
                    held = [sorted(tp.partition for tp in c.assignment()) for c in consumers]
                    if sorted(p for ps in held for p in ps) == list(range(PARTITIONS)) and all(held):
                        break
                    assert loop.time() < end, f"aiokafka's group did not settle: {held}"
                for consumer in consumers:
                    await consumer.commit({tp: 20 + tp.partition for tp in consumer.assignment()})
                committed = [[p, await consumers[0].committed(AioPartition(topic, p))] for p in range(PARTITIONS)]
                return {"assignment": _structure(held), "committed": committed}
            finally:
                for consumer in consumers:
                    await consumer.stop()

        return asyncio.run(run())

    assert_same(run_both(pair, scenario), "aiokafka's classic group")
