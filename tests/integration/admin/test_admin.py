"""confluent-kafka AdminClient: create, describe, alter config and delete topics."""

from __future__ import annotations

import time

import pytest
from confluent_kafka import KafkaError, KafkaException, TopicCollection
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ConfigSource,
    NewPartitions,
    NewTopic,
    ResourceType,
)

from tests.helpers.confluent_clients import admin_client

pytestmark = pytest.mark.integration


def _configs(admin: AdminClient, resource: ConfigResource) -> dict:
    return admin.describe_configs([resource])[resource].result(timeout=30)


def test_admin_topic_lifecycle(broker):
    admin = admin_client(broker.bootstrap)

    created = admin.create_topics([NewTopic("adm", num_partitions=3, config={"retention.ms": "3600000"})])
    created["adm"].result(timeout=30)
    with pytest.raises(KafkaException) as err:
        admin.create_topics([NewTopic("adm", num_partitions=1)])["adm"].result(timeout=30)
    assert err.value.args[0].code() == KafkaError.TOPIC_ALREADY_EXISTS
    with pytest.raises(KafkaException) as err:
        admin.create_topics([NewTopic("bad name!", num_partitions=1)])["bad name!"].result(timeout=30)
    assert err.value.args[0].code() == KafkaError.TOPIC_EXCEPTION
    with pytest.raises(KafkaException) as err:
        admin.create_topics([NewTopic("adm2", num_partitions=1, replication_factor=3)])["adm2"].result(timeout=30)
    assert err.value.args[0].code() == KafkaError.INVALID_REPLICATION_FACTOR
    # validate_only creates nothing.
    admin.create_topics([NewTopic("only-validated", num_partitions=2)], validate_only=True)[
        "only-validated"
    ].result(timeout=30)

    described = admin.describe_topics(TopicCollection(["adm"]))["adm"].result(timeout=30)
    assert described.name == "adm" and len(described.partitions) == 3
    assert str(described.topic_id) not in ("", "AAAAAAAAAAAAAAAAAAAAAA")
    assert "only-validated" not in admin.list_topics(timeout=30).topics

    topic_res = ConfigResource(ResourceType.TOPIC, "adm")
    configs = _configs(admin, topic_res)
    assert configs["retention.ms"].value == "3600000"
    assert configs["retention.ms"].source == ConfigSource.DYNAMIC_TOPIC_CONFIG.value
    assert configs["cleanup.policy"].value == "delete"

    topic_res = ConfigResource(
        ResourceType.TOPIC,
        "adm",
        incremental_configs=[
            ConfigEntry("retention.ms", "7200000", incremental_operation=AlterConfigOpType.SET),
            ConfigEntry("max.message.bytes", "2000000", incremental_operation=AlterConfigOpType.SET),
        ],
    )
    admin.incremental_alter_configs([topic_res])[topic_res].result(timeout=30)
    configs = _configs(admin, ConfigResource(ResourceType.TOPIC, "adm"))
    assert configs["retention.ms"].value == "7200000"
    assert configs["max.message.bytes"].value == "2000000"

    delete_op = ConfigResource(
        ResourceType.TOPIC, "adm",
        incremental_configs=[ConfigEntry("retention.ms", None, incremental_operation=AlterConfigOpType.DELETE)],
    )
    admin.incremental_alter_configs([delete_op])[delete_op].result(timeout=30)
    configs = _configs(admin, ConfigResource(ResourceType.TOPIC, "adm"))
    assert configs["retention.ms"].value == "604800000"

    broker_res = ConfigResource(ResourceType.BROKER, "1")
    broker_configs = _configs(admin, broker_res)
    assert broker_configs["num.partitions"].value == "1"

    alter_broker = ConfigResource(
        ResourceType.BROKER, "1",
        incremental_configs=[ConfigEntry("log.retention.ms", "86400000", incremental_operation=AlterConfigOpType.SET)],
    )
    admin.incremental_alter_configs([alter_broker])[alter_broker].result(timeout=30)
    assert _configs(admin, broker_res)["log.retention.ms"].value == "86400000"
    adm = _configs(admin, ConfigResource(ResourceType.TOPIC, "adm"))["retention.ms"]
    # set on broker "1": this broker's own setting, as Kafka (the empty name sets the cluster-wide default)
    assert (adm.value, adm.source) == ("86400000", ConfigSource.DYNAMIC_BROKER_CONFIG.value)
    static_only = ConfigResource(
        ResourceType.BROKER, "1",
        incremental_configs=[ConfigEntry("node.id", "7", incremental_operation=AlterConfigOpType.SET)],
    )
    with pytest.raises(KafkaException) as err:
        admin.incremental_alter_configs([static_only])[static_only].result(timeout=30)
    assert err.value.args[0].code() == KafkaError.INVALID_REQUEST  # "Cannot update these configs dynamically"
    bad_value = ConfigResource(
        ResourceType.TOPIC, "adm",
        incremental_configs=[ConfigEntry("retention.ms", "soon", incremental_operation=AlterConfigOpType.SET)],
    )
    with pytest.raises(KafkaException) as err:
        admin.incremental_alter_configs([bad_value])[bad_value].result(timeout=30)
    assert err.value.args[0].code() == KafkaError.INVALID_CONFIG

    admin.create_partitions([NewPartitions("adm", 4)], validate_only=True)["adm"].result(timeout=30)
    assert len(admin.list_topics(topic="adm", timeout=30).topics["adm"].partitions) == 3
    with pytest.raises(KafkaException) as err:
        admin.create_partitions([NewPartitions("adm", 2)])["adm"].result(timeout=30)
    assert err.value.args[0].code() == KafkaError.INVALID_PARTITIONS
    admin.create_partitions([NewPartitions("adm", 5)])["adm"].result(timeout=30)
    assert len(admin.list_topics(topic="adm", timeout=30).topics["adm"].partitions) == 5

    assert len(list(broker.data_dir.glob("adm-*"))) == 5
    admin.delete_topics(["adm"])["adm"].result(timeout=30)
    deadline = time.monotonic() + 30
    while "adm" in admin.list_topics(timeout=30).topics and time.monotonic() < deadline:
        time.sleep(0.1)
    assert "adm" not in admin.list_topics(timeout=30).topics
    assert not any(broker.data_dir.glob("adm-*")), "partition directories remain after delete"
    with pytest.raises(KafkaException) as err:
        admin.delete_topics(["adm"])["adm"].result(timeout=30)
    assert err.value.args[0].code() == KafkaError.UNKNOWN_TOPIC_OR_PART


def test_min_compaction_lag_above_max_is_refused(broker):
    """Kafka's LogConfig.validateValues: min.compaction.lag.ms > max.compaction.lag.ms is INVALID_CONFIG, checked on
    the topic's whole effective config (its overrides over the broker's settings) in CreateTopics (validate-only
    too) and IncrementalAlterConfigs, and nothing is created or changed."""
    admin = admin_client(broker.bootstrap)
    conflict = "conflict topic config setting min.compaction.lag.ms (5000) > max.compaction.lag.ms (1000)"
    for validate_only in (True, False):
        bad = NewTopic("lags", num_partitions=1,
                       config={"min.compaction.lag.ms": "5000", "max.compaction.lag.ms": "1000"})
        with pytest.raises(KafkaException) as err:
            admin.create_topics([bad], validate_only=validate_only)["lags"].result(timeout=30)
        assert err.value.args[0].code() == KafkaError.INVALID_CONFIG
        assert err.value.args[0].str() == conflict
    assert "lags" not in admin.list_topics(timeout=30).topics

    admin.create_topics([NewTopic("lags", num_partitions=1, config={"max.compaction.lag.ms": "1000"})])[
        "lags"].result(timeout=30)
    resource = ConfigResource(ResourceType.TOPIC, "lags")
    too_high = ConfigResource(ResourceType.TOPIC, "lags", incremental_configs=[
        ConfigEntry("min.compaction.lag.ms", "5000", incremental_operation=AlterConfigOpType.SET)])
    with pytest.raises(KafkaException) as err:
        admin.incremental_alter_configs([too_high])[too_high].result(timeout=30)
    assert err.value.args[0].code() == KafkaError.INVALID_CONFIG
    assert err.value.args[0].str() == conflict
    assert _configs(admin, resource)["min.compaction.lag.ms"].value == "0"
    # removing the max override (back to the default, Long.MAX_VALUE) makes the same minimum valid
    both = ConfigResource(ResourceType.TOPIC, "lags", incremental_configs=[
        ConfigEntry("max.compaction.lag.ms", None, incremental_operation=AlterConfigOpType.DELETE),
        ConfigEntry("min.compaction.lag.ms", "5000", incremental_operation=AlterConfigOpType.SET)])
    admin.incremental_alter_configs([both])[both].result(timeout=30)
    assert _configs(admin, resource)["min.compaction.lag.ms"].value == "5000"
    # and a lower maximum than that is refused again
    lower = ConfigResource(ResourceType.TOPIC, "lags", incremental_configs=[
        ConfigEntry("max.compaction.lag.ms", "4999", incremental_operation=AlterConfigOpType.SET)])
    with pytest.raises(KafkaException) as err:
        admin.incremental_alter_configs([lower])[lower].result(timeout=30)
    assert err.value.args[0].code() == KafkaError.INVALID_CONFIG
    assert "(5000) > max.compaction.lag.ms (4999)" in err.value.args[0].str()


def test_segment_bytes_below_one_mebibyte_is_refused(broker):
    """KIP-1030 (Kafka 4.0): segment.bytes and log.segment.bytes are at least 1 MiB; internal.segment.bytes (Kafka's
    internal config for tests) still gives smaller segments; DescribeConfigs lists it where a topic sets it (as Kafka
lists a set internal config)."""
    admin = admin_client(broker.bootstrap)
    with pytest.raises(KafkaException) as err:
        admin.create_topics([NewTopic("segs", num_partitions=1, config={"segment.bytes": "65536"})])[
            "segs"].result(timeout=30)
    assert err.value.args[0].code() == KafkaError.INVALID_CONFIG
    assert err.value.args[0].str() == \
        "Invalid value 65536 for configuration segment.bytes: Value must be at least 1048576"
    too_small = ConfigResource(ResourceType.BROKER, "1", incremental_configs=[
        ConfigEntry("log.segment.bytes", "65536", incremental_operation=AlterConfigOpType.SET)])
    with pytest.raises(KafkaException) as err:
        admin.incremental_alter_configs([too_small])[too_small].result(timeout=30)
    # a bad broker value is INVALID_REQUEST in Kafka (ConfigAdminManager wraps the ConfigException, KAFKA-13609)
    assert err.value.args[0].code() == KafkaError.INVALID_REQUEST
    admin.create_topics([NewTopic("segs", num_partitions=1, config={"internal.segment.bytes": "65536"})])[
        "segs"].result(timeout=30)
    configs = _configs(admin, ConfigResource(ResourceType.TOPIC, "segs"))
    assert configs["internal.segment.bytes"].value == "65536" and configs["segment.bytes"].value == "1073741824"
    plain = _configs(admin, ConfigResource(ResourceType.TOPIC, "__consumer_offsets"))
    assert "internal.segment.bytes" not in plain
