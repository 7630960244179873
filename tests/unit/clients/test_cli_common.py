"""What Shoal's command-line tools take from Kafka's to print what they print: Java's String.hashCode and a
java.util.HashMap's iteration order (the order of a group listing and of an offset reset's partitions in Kafka's
tools), Kafka's exception class names and messages for error codes."""

from __future__ import annotations

from protocol.errors import ErrorCode
from protocol.java_hash import java_hash_order, java_string_hash
from shoal_client.cli_common import (
    kafka_error,
    kafka_exception,
    kafka_message,
    topic_partition_hash,
)


def test_java_string_hash() -> None:
    # values printed by a JVM ("hello".hashCode(), ...)
    assert java_string_hash("hello") == 99162322
    assert java_string_hash("tool-sg-active-d33affb4") == -579392206
    assert java_string_hash("ü€") == 16176
    assert java_string_hash("") == 0


def test_hash_map_order_is_kafkas_tools_order() -> None:
    # the order kafka-share-groups 4.4 listed these groups in (the broker answered them in another one)
    answered = ["tool-sg-empty-cc4ee4f1", "tool-sg-active-7a4fdfd5", "tool-sg-active-3523360b",
                "tool-sg-empty-15dd9bb3", "tool-sg-empty-d026f16c", "tool-sg-active-d33affb4"]
    assert java_hash_order(answered, java_string_hash) == [
        "tool-sg-active-d33affb4", "tool-sg-empty-15dd9bb3", "tool-sg-empty-d026f16c", "tool-sg-empty-cc4ee4f1",
        "tool-sg-active-7a4fdfd5", "tool-sg-active-3523360b"]
    # past 12 keys the table doubles (load factor 0.75): the order follows the larger table
    keys = [f"g{i}" for i in range(40)]
    ordered = java_hash_order(keys, java_string_hash)
    assert sorted(ordered) == sorted(keys)
    assert ordered == sorted(keys, key=lambda k: ((java_string_hash(k) & 0xFFFFFFFF) ^
                                                  ((java_string_hash(k) & 0xFFFFFFFF) >> 16)) & 63)


def test_topic_partition_hash() -> None:
    # TopicPartition.hashCode(): 31 * (31 + partition) + topic.hashCode()
    assert topic_partition_hash("t", 0) == 31 * 31 + java_string_hash("t")
    assert topic_partition_hash("hello", 3) == 31 * 34 + 99162322


def test_kafka_exceptions_and_messages() -> None:
    assert kafka_exception(ErrorCode.GROUP_ID_NOT_FOUND) == "org.apache.kafka.common.errors.GroupIdNotFoundException"
    assert kafka_exception(ErrorCode.NON_EMPTY_GROUP) == "org.apache.kafka.common.errors.GroupNotEmptyException"
    assert kafka_exception(ErrorCode.INVALID_TOPIC_EXCEPTION) == "org.apache.kafka.common.errors.InvalidTopicException"
    assert kafka_exception(ErrorCode.REQUEST_TIMED_OUT) == "org.apache.kafka.common.errors.TimeoutException"
    assert kafka_error(ErrorCode.GROUP_ID_NOT_FOUND, "Group g not found.") == (
        "org.apache.kafka.common.errors.GroupIdNotFoundException: Group g not found.")
    assert kafka_message(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION) == "This server does not host this topic-partition."
    assert kafka_message(9999) == "Unexpected error code: 9999."
