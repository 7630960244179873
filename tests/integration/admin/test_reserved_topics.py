"""Reserved topic names: a client can never create or write a topic that shares a directory with the metadata
journal (`__cluster_metadata-0`), and the internal topics keep Kafka's answers."""

from __future__ import annotations

import pytest
from confluent_kafka import KafkaError, KafkaException, Producer
from confluent_kafka.admin import AdminClient, NewPartitions, NewTopic

from tests.helpers.confluent_clients import admin_client
from tests.helpers.raw_client import RawClient

pytestmark = pytest.mark.integration

METADATA, CREATE_TOPICS = 3, 19
INVALID_REQUEST = 42


def _create_error(admin: AdminClient, topic: NewTopic) -> int:
    with pytest.raises(KafkaException) as err:
        admin.create_topics([topic])[topic.topic].result(timeout=30)
    return err.value.args[0].code()


def test_cluster_metadata_name_is_refused_and_restart_keeps_data(broker):
    """The reported sequence: create `__cluster_metadata`, produce 20 records to it, restart cleanly."""
    admin = admin_client(broker.bootstrap)
    admin.create_topics([NewTopic("keep", num_partitions=2)])["keep"].result(timeout=30)
    producer = Producer({"bootstrap.servers": broker.bootstrap, "acks": "all"})
    for i in range(10):
        producer.produce("keep", str(i).encode(), partition=i % 2)
    assert producer.flush(30) == 0

    assert _create_error(admin, NewTopic("__cluster_metadata", num_partitions=1)) == KafkaError.INVALID_REQUEST
    with RawClient(broker.port) as raw:
        created = raw.call(CREATE_TOPICS, 7, {"topics": [{"name": "__cluster_metadata", "num_partitions": 1,
                                                          "replication_factor": 1}], "timeout_ms": 5000})
        assert created.topics[0].error_code == INVALID_REQUEST
        assert "__cluster_metadata" in created.topics[0].error_message
        # auto-creation through Metadata is refused too (as Kafka's controller refuses it: the topic stays unknown)
        meta = raw.call(METADATA, 12, {"topics": [{"name": "__cluster_metadata"}],
                                       "allow_auto_topic_creation": True})
        assert meta.topics[0].error_code == KafkaError.UNKNOWN_TOPIC_OR_PART
        assert meta.topics[0].partitions == []

    errors = []
    bad = Producer({"bootstrap.servers": broker.bootstrap, "message.timeout.ms": 3000})
    for i in range(20):
        bad.produce("__cluster_metadata", f"r{i}".encode(), partition=0, on_delivery=lambda e, _m: errors.append(e))
    bad.flush(30)
    assert len(errors) == 20 and all(e is not None for e in errors)
    assert "__cluster_metadata" not in admin.list_topics(timeout=10).topics

    assert broker.stop() == 0
    broker.start()
    admin = admin_client(broker.bootstrap)
    topics = admin.list_topics(timeout=10).topics
    assert len(topics["keep"].partitions) == 2
    assert "__cluster_metadata" not in topics


def test_internal_topic_answers(broker):
    admin = admin_client(broker.bootstrap)
    # internal topics exist from the start: creating them again is TOPIC_ALREADY_EXISTS, as in Kafka
    assert _create_error(admin, NewTopic("__consumer_offsets", num_partitions=1)) == KafkaError.TOPIC_ALREADY_EXISTS
    with pytest.raises(KafkaException) as err:
        admin.delete_topics(["__share_group_state"])["__share_group_state"].result(timeout=30)
    assert err.value.args[0].code() == KafkaError.INVALID_REQUEST
    with pytest.raises(KafkaException) as err:
        admin.create_partitions([NewPartitions("__consumer_offsets", 100)])["__consumer_offsets"].result(timeout=30)
    assert err.value.args[0].code() == KafkaError.INVALID_REQUEST
    # the transaction coordinator's topic exists from the start too (Kafka creates it on first use), is flagged
    # internal, and no client may write it
    assert _create_error(admin, NewTopic("__transaction_state", num_partitions=1)) == KafkaError.TOPIC_ALREADY_EXISTS
    with RawClient(broker.port) as raw:
        meta = raw.call(METADATA, 12, {"topics": [{"name": "__transaction_state"}]})
        assert meta.topics[0].error_code == 0 and meta.topics[0].is_internal
    errors = []
    producer = Producer({"bootstrap.servers": broker.bootstrap, "message.send.max.retries": 0})
    producer.produce("__transaction_state", b"x", partition=0, on_delivery=lambda err, _m: errors.append(err))
    producer.flush(10)
    assert [e.code() for e in errors] == [KafkaError.TOPIC_EXCEPTION]
