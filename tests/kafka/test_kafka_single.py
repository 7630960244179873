"""The run's single-node Kafka 4.4 (the `kafka` fixture) serves as the referee needs: it answers our raw codecs,
runs share groups at share.version=2 and transactions, has the settings the tests rely on, and Kafka's own tools
run against it by their main classes."""

from __future__ import annotations

import uuid

from confluent_kafka import Producer
from confluent_kafka.admin import ConfigResource, ResourceType

from tests.helpers import kafka_dist
from tests.helpers.confluent_clients import (
    admin_client,
    alter_group_config,
    create_topic,
    produce_all,
    share_from_earliest,
)
from tests.helpers.kafka_process import REFEREE_CONFIG, KafkaNode
from tests.helpers.raw_client import RawClient
from tests.helpers.share_consumers import consumer, drain
from tests.helpers.txn_clients import read_to_end

API_VERSIONS, SHARE_GROUP_HEARTBEAT, SHARE_FETCH, SHARE_ACKNOWLEDGE = 18, 76, 78, 79


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"  # the broker is shared by the whole run


def test_kafka_answers_api_versions_through_our_codecs(kafka: KafkaNode) -> None:
    with RawClient(kafka.port) as raw:
        answer = raw.call(API_VERSIONS, 3, {"client_software_name": "shoal-tests", "client_software_version": "1"})
    assert answer.error_code == 0
    served = {k.api_key: k.max_version for k in answer.api_keys}
    assert {SHARE_GROUP_HEARTBEAT, SHARE_FETCH, SHARE_ACKNOWLEDGE} <= served.keys()
    finalized = {f.name: f.max_version_level for f in answer.finalized_features}
    assert finalized["share.version"] == 2
    assert finalized["transaction.version"] == 2
    assert finalized["metadata.version"] == 33  # 4.4-IV2, the latest of 4.4


def test_kafka_has_the_referee_settings(kafka: KafkaNode) -> None:
    resource = ConfigResource(ResourceType.BROKER, "1")
    admin = admin_client(kafka.bootstrap)
    configs = admin.describe_configs([resource])[resource].result(timeout=30)
    for name, value in {**REFEREE_CONFIG, "offsets.topic.replication.factor": "1",
                        "share.coordinator.state.topic.replication.factor": "1",
                        "process.roles": "broker,controller"}.items():
        assert configs[name].value == value, name


def test_a_share_group_reads_from_kafka(kafka: KafkaNode) -> None:
    topic, group = unique("share"), unique("sg")
    create_topic(kafka.bootstrap, topic)
    share_from_earliest(kafka.bootstrap, group)
    # Below Kafka's default minimum (5 s): accepted as the referee lowers group.share.min.heartbeat.interval.ms,
    # and the member gets its assignment a heartbeat sooner.
    alter_group_config(admin_client(kafka.bootstrap), group, "share.heartbeat.interval.ms", "200")
    produce_all(kafka.bootstrap, topic, [f"r{i}".encode() for i in range(20)])
    member = consumer(kafka, group, topic)
    try:
        seen: list = []
        drain(member, 20, 60.0, seen)
    finally:
        member.close()
    assert sorted(seen) == [(0, i) for i in range(20)]


def test_a_transaction_commits_on_kafka(kafka: KafkaNode) -> None:
    topic = unique("txn")
    create_topic(kafka.bootstrap, topic)
    producer = Producer({"bootstrap.servers": kafka.bootstrap, "transactional.id": unique("tx")})
    producer.init_transactions(30)
    producer.begin_transaction()
    for i in range(5):
        producer.produce(topic, f"c{i}".encode(), partition=0)
    producer.commit_transaction(30)
    producer.begin_transaction()
    producer.produce(topic, b"aborted", partition=0)
    producer.abort_transaction(30)
    assert read_to_end(kafka.bootstrap, topic, 1, committed=True) == [f"c{i}".encode() for i in range(5)]


def test_kafka_tools_run_against_it(kafka: KafkaNode) -> None:
    features = kafka_dist.run_tool("kafka-features", ["--bootstrap-server", kafka.bootstrap, "describe"]).stdout
    share = next(line for line in features.splitlines() if line.startswith("Feature: share.version"))
    assert "FinalizedVersionLevel: 2" in share, features
    topic = unique("tool")
    kafka_dist.run_tool("kafka-topics", ["--bootstrap-server", kafka.bootstrap, "--create", "--topic", topic,
                                         "--partitions", "3"])
    described = kafka_dist.run_tool("kafka-topics", ["--bootstrap-server", kafka.bootstrap, "--describe",
                                                     "--topic", topic]).stdout
    assert "PartitionCount: 3" in described, described
