import uuid

import pytest

from broker.cluster.topics import (
    CONFIG_RECORD,
    PARTITION_RECORD,
    REMOVE_TOPIC_RECORD,
    TOPIC_RECORD,
    TOPIC_RESOURCE,
    TopicError,
    TopicRegistry,
    validate_topic_name,
)
from protocol.errors import ErrorCode


@pytest.mark.parametrize("name", ["", ".", "..", "a" * 250, "bad name", "x/y", "ü"])
def test_illegal_names(name):
    with pytest.raises(TopicError) as err:
        validate_topic_name(name)
    assert err.value.code == ErrorCode.INVALID_TOPIC_EXCEPTION


@pytest.mark.parametrize(("name", "why"), [
    ("", "the empty string is not allowed"),
    (".", "'.' is not allowed"),
    ("..", "'..' is not allowed"),
    ("a" * 250, f"the length of '{'a' * 250}' is longer than the max allowed length 249"),
    ("bad name!", "'bad name!' contains one or more characters other than ASCII alphanumerics, '.', '_' and '-'"),
])
def test_illegal_name_messages_are_kafkas(name, why):
    """Kafka's Topic.validate words them so (CreateTopics, DescribeProducers, kafka-topics show them)."""
    with pytest.raises(TopicError) as err:
        validate_topic_name(name)
    assert err.value.message == f"Topic name is invalid: {why}"


def _create(reg: TopicRegistry, name: str, partitions: int) -> uuid.UUID:
    tid = uuid.uuid4()
    reg.apply(TOPIC_RECORD, {"name": name, "topic_id": tid})
    for p in range(partitions):
        reg.apply(PARTITION_RECORD, {"partition_id": p, "topic_id": tid})
    return tid


def test_create_config_delete():
    reg = TopicRegistry()
    tid = _create(reg, "orders.v1", 3)
    info = reg.get("orders.v1")
    assert info.num_partitions == 3 and reg.by_id(tid) is info
    with pytest.raises(TopicError) as err:
        reg.check_new_topic("orders.v1")
    assert err.value.code == ErrorCode.TOPIC_ALREADY_EXISTS
    with pytest.raises(TopicError) as err:
        reg.check_new_topic("orders_v1")
    assert err.value.code == ErrorCode.INVALID_TOPIC_EXCEPTION
    reg.apply(CONFIG_RECORD, {"resource_type": TOPIC_RESOURCE, "resource_name": "orders.v1",
                              "name": "retention.ms", "value": "1000"})
    assert info.configs == {"retention.ms": "1000"}
    reg.apply(CONFIG_RECORD, {"resource_type": TOPIC_RESOURCE, "resource_name": "orders.v1",
                              "name": "retention.ms", "value": None})
    assert info.configs == {}
    reg.apply(REMOVE_TOPIC_RECORD, {"topic_id": tid})
    assert reg.get("orders.v1") is None and reg.by_id(tid) is None
    reg.check_new_topic("orders_v1")  # the collision is gone with the topic
