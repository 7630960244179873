"""The run's SASL Kafka 4.4 (the `kafka_sasl` fixture): SCRAM users made by the storage tool at format time, and
StandardAuthorizer deciding what they may do, for the ACL comparisons to come."""

from __future__ import annotations

import uuid

import pytest
from confluent_kafka import KafkaError, KafkaException, Producer
from confluent_kafka.admin import (
    AclBinding,
    AclOperation,
    AclPermissionType,
    AdminClient,
    NewTopic,
    ResourcePatternType,
    ResourceType,
)

from tests.helpers.kafka_process import SCRAM_MECHANISMS, KafkaNode
from tests.helpers.sasl import SaslRefused, scram_raw_client
from tests.helpers.waiting import wait_until

SASL_AUTHENTICATION_FAILED = 58


def produce_one(config: dict, topic: str) -> KafkaError | None:
    """Produce one record; the delivery error, or None."""
    result: list[KafkaError | None] = []
    producer = Producer({**config, "acks": "all", "message.timeout.ms": 20000})
    producer.produce(topic, b"v", partition=0, on_delivery=lambda err, _msg: result.append(err))
    producer.flush(30)
    assert result, "no delivery report"
    return result[0]


@pytest.mark.parametrize("mechanism", SCRAM_MECHANISMS)
def test_a_scram_user_made_at_format_time_connects(kafka_sasl: KafkaNode, mechanism: str) -> None:
    admin = AdminClient(kafka_sasl.client_config("alice", mechanism))
    assert list(admin.list_topics(timeout=30).brokers) == [1]
    # Our own SCRAM client (tests/helpers/sasl.py) completes the exchange with Kafka and verifies its signature.
    raw, final = scram_raw_client(kafka_sasl.port, "alice", "alice-secret", mechanism)
    raw.close()
    assert final.error_code == 0


def test_a_wrong_password_is_refused(kafka_sasl: KafkaNode) -> None:
    errors: list[KafkaError] = []
    config = {**kafka_sasl.client_config("alice"), "sasl.password": "not-her-password", "error_cb": errors.append}
    producer = Producer(config)

    def refused() -> bool:
        producer.poll(0.1)  # serves error_cb
        return any(e.code() == KafkaError._AUTHENTICATION for e in errors)

    wait_until(refused, 30, "librdkafka to report the failed authentication")
    with pytest.raises(SaslRefused) as raw_refused:
        scram_raw_client(kafka_sasl.port, "alice", "not-her-password", "SCRAM-SHA-512")
    assert raw_refused.value.answer.error_code == SASL_AUTHENTICATION_FAILED


def test_the_authorizer_decides_until_an_acl_grants(kafka_sasl: KafkaNode) -> None:
    topic = f"acl-{uuid.uuid4().hex[:8]}"
    admin = AdminClient(kafka_sasl.client_config("admin"))  # a super user
    admin.create_topics([NewTopic(topic, num_partitions=1)])[topic].result(timeout=30)

    alice = kafka_sasl.client_config("alice")
    alice_admin = AdminClient(alice)
    denied = alice_admin.create_topics([NewTopic(f"{topic}-hers", num_partitions=1)])
    with pytest.raises(KafkaException) as refused:
        denied[f"{topic}-hers"].result(timeout=30)
    assert refused.value.args[0].code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    error = produce_one(alice, topic)
    assert error is not None and error.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED, error

    grant = AclBinding(ResourceType.TOPIC, topic, ResourcePatternType.LITERAL, "User:alice", "*",
                       AclOperation.WRITE, AclPermissionType.ALLOW)
    admin.create_acls([grant])[grant].result(timeout=30)
    # ACLs reach the broker through the metadata log: the first produce after the grant may still be refused.
    for _ in range(20):
        error = produce_one(alice, topic)
        if error is None:
            break
    assert error is None, error
