"""Internal topics exist from the first start, are compacted, and refuse client writes."""

from __future__ import annotations

import pytest
from confluent_kafka import KafkaError, Producer
from confluent_kafka.admin import ConfigResource, ResourceType

from tests.helpers.confluent_clients import admin_client

pytestmark = pytest.mark.integration


def test_internal_topics_created_on_start(broker_factory):
    broker = broker_factory({"offsets.topic.num.partitions": "3", "share.coordinator.state.topic.num.partitions": "5",
                             "offsets.topic.segment.bytes": "1048576"})
    admin = admin_client(broker.bootstrap)
    topics = admin.list_topics(timeout=10).topics
    assert len(topics["__consumer_offsets"].partitions) == 3
    assert len(topics["__share_group_state"].partitions) == 5
    resource = ConfigResource(ResourceType.TOPIC, "__consumer_offsets")
    configs = admin.describe_configs([resource])[resource].result(timeout=30)
    assert configs["cleanup.policy"].value == "compact"
    assert configs["segment.bytes"].value == "1048576"  # offsets.topic.segment.bytes, as Kafka creates it
    resource = ConfigResource(ResourceType.TOPIC, "__share_group_state")
    configs = admin.describe_configs([resource])[resource].result(timeout=30)
    assert (configs["cleanup.policy"].value, configs["retention.ms"].value) == ("delete", "-1")

    errors = []
    producer = Producer({"bootstrap.servers": broker.bootstrap, "message.send.max.retries": 0})
    producer.produce("__consumer_offsets", b"x", partition=0, on_delivery=lambda err, _m: errors.append(err))
    producer.flush(10)
    assert [e.code() for e in errors] == [KafkaError.TOPIC_EXCEPTION]

    broker.restart()  # still there, same partition counts, nothing duplicated
    topics = admin_client(broker.bootstrap).list_topics(timeout=10).topics
    assert len(topics["__share_group_state"].partitions) == 5
