"""Kafka's Admin client (4.4) against Kafka and Shoal: every admin call Shoal serves on a PLAINTEXT broker, each
result or exception compared (tests/java/src/shoal/javaclients/AdminScenarios.java; the SASL-only calls are in
test_java_clients_security.py, the share-group ones in test_java_clients_share.py). One JVM per broker runs every
scenario; each test compares one scenario's observations."""

from __future__ import annotations

import pytest
from confluent_kafka.admin import AdminClient, NewTopic

from tests.helpers import java_clients
from tests.helpers.differential import assert_same

pytestmark = pytest.mark.integration

# docs/kafka-differences.md entries
CLUSTER_MIN_ISR = "Kafka's Java clients: the cluster-level min.insync.replicas"
UNKNOWN_BROKER_CONFIG = "Kafka's Java clients: an unknown broker config in a validate-only change"
QUORUM_LISTENER = "Kafka's Java clients: describeMetadataQuorum's listener"
FEATURES = "Kafka's Java clients: features"
FIXED_GROUP_VERSION = "Kafka's Java clients: group.version is fixed while running"
TELEMETRY = "Kafka's Java clients: client telemetry without a plugin"

KAFKA_SUPPORTED = {
    "eligible.leader.replicas.version": {"max_version": 1, "min_version": 0},
    "group.version": {"max_version": 1, "min_version": 0}, "kraft.version": {"max_version": 1, "min_version": 0},
    "metadata.version": {"max_version": 33, "min_version": 7}, "share.version": {"max_version": 2, "min_version": 0},
    "streams.version": {"max_version": 1, "min_version": 0},
    "transaction.version": {"max_version": 2, "min_version": 0}}
SHOAL_SUPPORTED = {
    "group.version": {"max_version": 1, "min_version": 0}, "kraft.version": {"max_version": 1, "min_version": 0},
    "metadata.version": {"max_version": 25, "min_version": 7}, "share.version": {"max_version": 1, "min_version": 0},
    "streams.version": {"max_version": 1, "min_version": 0},
    "transaction.version": {"max_version": 2, "min_version": 0}}


def _levels(**levels: int) -> dict:
    return {name.replace("_", "."): {"max_version_level": level, "min_version_level": level}
            for name, level in levels.items()}


KNOWN = {
    "topics": {
        ("created_config", "min.insync.replicas", "source"): (
            "DYNAMIC_DEFAULT_BROKER_CONFIG", "DEFAULT_CONFIG", CLUSTER_MIN_ISR),
    },
    "topic_configs": {
        ("describe", "min.insync.replicas", "source"): ("DYNAMIC_DEFAULT_BROKER_CONFIG", "DEFAULT_CONFIG",
                                                        CLUSTER_MIN_ISR),
    },
    "broker_and_group_configs": {
        ("broker", "min.insync.replicas", "source"): ("DYNAMIC_DEFAULT_BROKER_CONFIG", "DEFAULT_CONFIG",
                                                      CLUSTER_MIN_ISR),
        ("validate_unknown",): ("ok", {"error": "INVALID_CONFIG", "exception": "InvalidConfigurationException"},
                                UNKNOWN_BROKER_CONFIG),
    },
    "features": {
        ("supported",): (KAFKA_SUPPORTED, SHOAL_SUPPORTED, FEATURES),
        ("finalized",): (
            _levels(eligible_leader_replicas_version=1, group_version=1, metadata_version=33, share_version=2,
                    streams_version=1, transaction_version=2),
            _levels(group_version=1, metadata_version=25, share_version=1, streams_version=1, transaction_version=2),
            FEATURES),
        ("validate_only_updates", "group_version_safe_downgrade", "group.version"): (
            "ok", {"error": "INVALID_UPDATE_VERSION", "exception": "InvalidUpdateVersionException"},
            FIXED_GROUP_VERSION),
    },
    "client_metrics": {
        ("client_instance_id",): (False, True, TELEMETRY),
    },
    "cluster": {
        ("quorum", "nodes", "1"): (["CONTROLLER"], ["PLAINTEXT"], QUORUM_LISTENER),
    },
}
# the configs only Kafka describes, by scenario and path
KAFKA_ONLY = {
    "topic_configs": {
        ("after_set_append",): (("min.insync.replicas",), CLUSTER_MIN_ISR),
        ("after_subtract_delete",): (("min.insync.replicas",), CLUSTER_MIN_ISR),
        ("after_invalid",): (("min.insync.replicas",), CLUSTER_MIN_ISR),
    },
}
SCENARIOS = ["topics", "topic_configs", "broker_and_group_configs", "consumer_groups", "list_groups", "features",
             "client_quotas", "client_metrics", "log_dirs", "elections_and_reassignments", "records_and_offsets",
             "cluster", "transactions"]


@pytest.fixture(scope="module")
def seen(pair):
    return java_clients.run_pair(pair, "admin")


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_admin(seen, scenario):
    java_clients.compare(seen, scenario, KNOWN.get(scenario), KAFKA_ONLY.get(scenario))


def test_metadata_by_topic_id_with_an_empty_name(pair):
    """What the Java Admin's describeTopics by id sends: Metadata v12/v13 naming each topic by id with the name ""
    (and, mixed in, a topic by name and an unknown id): answered by id alone."""
    def scenario(target):
        topic = target.unique("by-id")
        other = target.unique("by-name")
        admin = AdminClient(target.client_config())
        for name in (topic, other):
            admin.create_topics([NewTopic(name, 1, 1)])[name].result(timeout=30)
        with target.raw() as raw:
            meta = raw.call(3, 12, {"topics": [{"name": topic}], "allow_auto_topic_creation": False,
                                    "include_topic_authorized_operations": False})
            topic_id = meta.topics[0].topic_id
            answers = {}
            for version in (12, 13):
                reply = raw.call(3, version, {
                    "topics": [{"topic_id": topic_id, "name": ""}, {"name": other},
                               {"topic_id": java_clients.UNKNOWN_TOPIC_ID, "name": ""}],
                    "allow_auto_topic_creation": False, "include_topic_authorized_operations": False})
                answers[version] = sorted(
                    ({"error_code": t.error_code, "name": t.name, "topic_id": t.topic_id,
                      "partitions": len(t.partitions)} for t in reply.topics), key=lambda t: t["error_code"])
        return answers

    assert_same(pair.run(scenario), "Metadata by topic id with the name \"\"")
