"""AlterConfigs (33, the non-incremental API) and broker configs by Kafka's rules: kafka-python's admin client
(AlterConfigs forced) and confluent's over TCP, raw requests for the error answers; a restart keeps the changes."""

from __future__ import annotations

import pytest
from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import AlterConfigOpType, ConfigEntry, ConfigSource
from confluent_kafka.admin import ConfigResource as CResource
from confluent_kafka.admin import ResourceType as CType
from kafka.admin import ConfigResource, ConfigResourceType, KafkaAdminClient

from protocol.records import Record, build_batch
from tests.helpers.confluent_clients import admin_client, create_topic
from tests.helpers.raw_client import RawClient
from tests.helpers.raw_requests import produce

pytestmark = pytest.mark.integration

ALTER_CONFIGS, DESCRIBE_CONFIGS, INCREMENTAL_ALTER_CONFIGS = 33, 32, 44
TOPIC, BROKER, GROUP = 2, 4, 32
NONE, UNKNOWN_TOPIC_OR_PARTITION, INVALID_CONFIG, INVALID_REQUEST = 0, 3, 40, 42
MESSAGE_TOO_LARGE = 10


def _alter(client: RawClient, kind: int, name: str, configs: dict, validate_only=False, version=2):
    resp = client.call(ALTER_CONFIGS, version, {"validate_only": validate_only, "resources": [
        {"resource_type": kind, "resource_name": name,
         "configs": [{"name": k, "value": v} for k, v in configs.items()]}]})
    (result,) = resp.responses
    return result.error_code, result.error_message


def _incremental(client: RawClient, name: str, configs: dict, op: int = 0):
    resp = client.call(INCREMENTAL_ALTER_CONFIGS, 1, {"validate_only": False, "resources": [
        {"resource_type": BROKER, "resource_name": name,
         "configs": [{"name": k, "config_operation": op, "value": v} for k, v in configs.items()]}]})
    (result,) = resp.responses
    return result.error_code, result.error_message


def _describe(client: RawClient, kind: int, name: str, keys=None) -> dict:
    resp = client.call(DESCRIBE_CONFIGS, 4, {"resources": [{"resource_type": kind, "resource_name": name,
                                                            "configuration_keys": keys}],
                                             "include_synonyms": True, "include_documentation": True})
    (result,) = resp.results
    assert result.error_code == NONE, result
    return {c.name: c for c in result.configs}


@pytest.fixture(scope="module")
def cluster(broker_module):
    create_topic(broker_module.bootstrap, "legacy", config={"retention.ms": "3600000", "segment.ms": "7200000"})
    return broker_module


def test_alter_configs_kafka_python_replaces_the_topic_set(cluster):
    admin = KafkaAdminClient(bootstrap_servers=cluster.bootstrap)
    try:
        resource = ConfigResource(ConfigResourceType.TOPIC, "legacy", configs={"max.message.bytes": "200000"})
        result = admin.alter_configs([resource], incremental=False)
        assert "Error" not in repr(result) or "NoError" in repr(result), result
    finally:
        admin.close()
    with RawClient(cluster.port) as client:
        configs = _describe(client, TOPIC, "legacy")
        assert configs["max.message.bytes"].value == "200000"
        assert configs["max.message.bytes"].config_source == 1  # DYNAMIC_TOPIC_CONFIG
        # kafka-python sent the topic's other overrides along (AlterConfigs resets what it does not name)
        assert configs["retention.ms"].value == "3600000"
        # what a request does not name goes back to the broker's value: the whole set is replaced
        assert _alter(client, TOPIC, "legacy", {"max.message.bytes": "200000"}) == (NONE, None)
        configs = _describe(client, TOPIC, "legacy")
    assert configs["max.message.bytes"].value == "200000"
    assert configs["retention.ms"].value == "604800000" and configs["retention.ms"].config_source != 1
    assert configs["segment.ms"].config_source != 1


def test_alter_configs_raw_errors(cluster):
    with RawClient(cluster.port) as client:
        assert _alter(client, TOPIC, "missing", {"retention.ms": "1"})[0] == UNKNOWN_TOPIC_OR_PARTITION
        assert _alter(client, TOPIC, "legacy", {"no.such.config": "1"})[0] == INVALID_CONFIG
        assert _alter(client, TOPIC, "legacy", {"retention.ms": "soon"})[0] == INVALID_CONFIG
        assert _alter(client, TOPIC, "legacy", {"retention.ms": None}) == \
            (INVALID_REQUEST, "Null value not supported for : retention.ms")
        assert _alter(client, 99, "x", {"a": "1"}) == (INVALID_REQUEST, "Unknown resource type 99")
        assert _alter(client, BROKER, "7", {"log.retention.ms": "1"})[0] == INVALID_REQUEST
        assert _alter(client, BROKER, "one", {"log.retention.ms": "1"}) == \
            (INVALID_REQUEST, "Node id must be an integer, but it is: one")
        resp = client.call(ALTER_CONFIGS, 0, {"validate_only": False, "resources": [
            {"resource_type": TOPIC, "resource_name": "legacy", "configs": [{"name": "retention.ms", "value": "1"}]},
            {"resource_type": TOPIC, "resource_name": "legacy", "configs": []}]})
        assert [(r.error_code, r.error_message) for r in resp.responses] == \
            [(INVALID_REQUEST, "Each resource must appear at most once.")] * 2
        resp = client.call(ALTER_CONFIGS, 1, {"validate_only": False, "resources": [
            {"resource_type": TOPIC, "resource_name": "legacy", "configs": [
                {"name": "retention.ms", "value": "1"}, {"name": "retention.ms", "value": "2"}]}]})
        assert (resp.responses[0].error_code, resp.responses[0].error_message) == \
            (INVALID_REQUEST, "Error due to duplicate config keys")
        # validate_only changes nothing
        assert _alter(client, TOPIC, "legacy", {"retention.ms": "5000"}, validate_only=True)[0] == NONE
        assert _describe(client, TOPIC, "legacy", ["retention.ms"])["retention.ms"].value == "604800000"


def test_alter_configs_client_metrics_subscription(cluster):
    CLIENT_METRICS = 16
    with RawClient(cluster.port) as client:
        assert _alter(client, CLIENT_METRICS, "sub", {"metrics": "org.apache.kafka.producer.",
                                                      "interval.ms": "60000"}) == (NONE, None)
        # as Kafka 4.4, the configs not set are described with their defaults
        assert {n: c.value for n, c in _describe(client, CLIENT_METRICS, "sub").items()} == \
            {"metrics": "org.apache.kafka.producer.", "interval.ms": "60000", "match": ""}
        assert _alter(client, CLIENT_METRICS, "sub", {"interval.ms": "30000"}) == (NONE, None)
        assert {n: c.value for n, c in _describe(client, CLIENT_METRICS, "sub").items()} == {
            "interval.ms": "30000", "metrics": "", "match": ""}
        assert _alter(client, CLIENT_METRICS, "sub", {"interval.ms": None})[0] == INVALID_REQUEST


def test_broker_configs_by_kafka_rules(cluster):
    with RawClient(cluster.port) as client:
        # a Kafka broker config Shoal does not use: accepted per broker, stored, described as having no effect
        assert _incremental(client, "1", {"sasl.kerberos.min.time.before.relogin": "120000"}) == (NONE, None)
        row = _describe(client, BROKER, "1", ["sasl.kerberos.min.time.before.relogin"])[
            "sasl.kerberos.min.time.before.relogin"]
        assert (row.value, row.config_source, row.read_only) == ("120000", 2, False)  # DYNAMIC_BROKER_CONFIG
        assert "no effect" in row.documentation
        # ... but per-broker: not at the cluster level
        code, message = _incremental(client, "", {"sasl.kerberos.min.time.before.relogin": "1"})
        assert code == INVALID_REQUEST and message.startswith("Cannot update these configs at default cluster level")
        # names Kafka does not define; read-only configs; security configs without a listener prefix
        assert _incremental(client, "1", {"no.such.broker.config": "1"}) == \
            (INVALID_CONFIG, "Unknown broker config no.such.broker.config")
        assert _incremental(client, "1", {"log.dirs": "/x"}) == \
            (INVALID_REQUEST, "Cannot update these configs dynamically: [log.dirs]")
        assert _incremental(client, "1", {"ssl.keystore.location": "/x"})[0] == INVALID_REQUEST
        assert _incremental(client, "1", {"num.io.threads": "many"})[0] == INVALID_REQUEST
        # read-only configs are described as such, with Kafka's defaults
        rows = _describe(client, BROKER, "1")
        assert rows["node.id"].read_only and rows["num.io.threads"].value == "8"
        assert not rows["num.io.threads"].read_only  # cluster-wide in Kafka
        # a cluster-wide default through AlterConfigs: the "" resource lists only the dynamic defaults
        assert _alter(client, BROKER, "", {"log.retention.ms": "86400000", "num.io.threads": "4"}) == (NONE, None)
        defaults = _describe(client, BROKER, "")
        assert {n: (c.value, c.config_source) for n, c in defaults.items()} == \
            {"log.retention.ms": ("86400000", 3), "num.io.threads": ("4", 3)}
        topic = _describe(client, TOPIC, "legacy", ["retention.ms"])["retention.ms"]
        assert (topic.value, topic.config_source) == ("86400000", 3)  # DYNAMIC_DEFAULT_BROKER_CONFIG
        # replacing the set drops what is not named
        assert _alter(client, BROKER, "", {"num.io.threads": "4"}) == (NONE, None)
        assert set(_describe(client, BROKER, "")) == {"num.io.threads"}
        # the broker's own setting wins over the cluster default
        assert _incremental(client, "1", {"log.retention.ms": "7200000"}) == (NONE, None)
        topic = _describe(client, TOPIC, "legacy", ["retention.ms"])["retention.ms"]
        assert (topic.value, topic.config_source) == ("7200000", 2)


def test_confluent_incremental_on_a_kafka_only_config(cluster):
    admin = admin_client(cluster.bootstrap)
    resource = CResource(CType.BROKER, "1", incremental_configs=[
        ConfigEntry("replica.fetch.max.bytes", "2097152", incremental_operation=AlterConfigOpType.SET)])
    with pytest.raises(KafkaException) as err:  # read-only in Kafka
        admin.incremental_alter_configs([resource])[resource].result(timeout=30)
    assert err.value.args[0].code() == KafkaError.INVALID_REQUEST
    resource = CResource(CType.BROKER, "1", incremental_configs=[
        ConfigEntry("background.threads", "5", incremental_operation=AlterConfigOpType.SET)])
    admin.incremental_alter_configs([resource])[resource].result(timeout=30)
    described = admin.describe_configs([CResource(CType.BROKER, "1")])[CResource(CType.BROKER, "1")].result(30)
    assert described["background.threads"].value == "5"
    assert described["background.threads"].source == ConfigSource.DYNAMIC_BROKER_CONFIG.value


def test_changes_survive_a_restart(cluster):
    with RawClient(cluster.port) as client:
        assert _alter(client, TOPIC, "legacy", {"retention.ms": "5000", "cleanup.policy": "compact"}) == (NONE, None)
    cluster.restart()
    with RawClient(cluster.port) as client:
        topic = _describe(client, TOPIC, "legacy")
        assert topic["retention.ms"].value == "5000" and topic["cleanup.policy"].value == "compact"
        assert topic["max.message.bytes"].config_source != 1  # replaced away before the restart
        broker = _describe(client, BROKER, "1", ["sasl.kerberos.min.time.before.relogin", "num.io.threads",
                                                 "log.retention.ms", "background.threads"])
        assert {n: (c.value, c.config_source) for n, c in broker.items()} == {
            "sasl.kerberos.min.time.before.relogin": ("120000", 2), "num.io.threads": ("4", 3),
            "log.retention.ms": ("7200000", 2), "background.threads": ("5", 2)}


def test_produce_follows_live_changes_of_the_size_limit_and_timestamp_type(cluster):
    """max.message.bytes and message.timestamp.type changed at run time (a topic override, then the broker
    default) apply to the next batch produced."""
    create_topic(cluster.bootstrap, "live-limits")
    big = build_batch([Record(key=None, value=b"x" * 500)])
    with RawClient(cluster.port) as client:
        assert produce(client, "live-limits", big).error_code == NONE
        assert _alter(client, TOPIC, "live-limits", {"max.message.bytes": "300"}) == (NONE, None)
        assert produce(client, "live-limits", big).error_code == MESSAGE_TOO_LARGE
        assert _alter(client, TOPIC, "live-limits", {}) == (NONE, None)  # the override removed
        created = produce(client, "live-limits", build_batch([Record(key=None, value=b"v")], timestamp=1))
        assert created.error_code == NONE and created.log_append_time_ms == -1
        try:
            assert _incremental(client, "", {"log.message.timestamp.type": "LogAppendTime"}) == (NONE, None)
            stamped = produce(client, "live-limits", build_batch([Record(key=None, value=b"v")], timestamp=1))
            assert stamped.error_code == NONE and stamped.log_append_time_ms > 1
        finally:
            assert _incremental(client, "", {"log.message.timestamp.type": None}, op=1) == (NONE, None)
