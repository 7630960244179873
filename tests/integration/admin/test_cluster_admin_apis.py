"""Log dirs, elections, reassignments and the quorum on one node: kafka-python's admin client and confluent's
elect_leaders over TCP, raw requests for what no client exposes (errors, v0 shapes, the bad-input answers)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from confluent_kafka import ElectionType as ConfluentElectionType
from confluent_kafka import KafkaError, TopicPartition
from kafka.admin import KafkaAdminClient

from tests.helpers.confluent_clients import admin_client, create_topic, produce_all
from tests.helpers.raw_client import RawClient
from tests.helpers.segment_files import log_bytes

pytestmark = pytest.mark.integration

ALTER_REPLICA_LOG_DIRS, DESCRIBE_LOG_DIRS, ELECT_LEADERS = 34, 35, 43
ALTER_REASSIGNMENTS, LIST_REASSIGNMENTS, DESCRIBE_QUORUM = 45, 46, 55
NONE, UNKNOWN_TOPIC_OR_PARTITION, INVALID_REQUEST = 0, 3, 42
INVALID_REPLICA_ASSIGNMENT, LOG_DIR_NOT_FOUND, ELECTION_NOT_NEEDED, NO_REASSIGNMENT_IN_PROGRESS = 39, 57, 84, 85


@pytest.fixture(scope="module")
def cluster(broker_module):
    create_topic(broker_module.bootstrap, "dirs", partitions=2)
    produce_all(broker_module.bootstrap, "dirs", [b"x" * 100] * 20, partition=1)
    return broker_module


def _log_dir(broker) -> str:
    return os.path.abspath(str(broker.data_dir))


def _on_disk(broker, topic: str, partition: int) -> int:
    return log_bytes(Path(broker.data_dir) / f"{topic}-{partition}")


def test_describe_log_dirs_kafka_python(cluster):
    admin = KafkaAdminClient(bootstrap_servers=cluster.bootstrap)
    try:
        result = admin.describe_log_dirs()
    finally:
        admin.close()
    text = repr(result)
    assert _log_dir(cluster) in text, text
    assert "__cluster_metadata" not in text


def test_describe_log_dirs_sizes_are_the_files(cluster):
    with RawClient(cluster.port) as client:
        for version in range(1, 6):
            resp = client.call(DESCRIBE_LOG_DIRS, version, {"topics": None})
            assert resp.get("error_code", 0) == NONE
            (result,) = resp.results
            assert result.error_code == NONE and result.log_dir == _log_dir(cluster)
            topics = {t.name: {p.partition_index: p for p in t.partitions} for t in result.topics}
            assert set(topics["dirs"]) == {0, 1}
            for index, part in topics["dirs"].items():
                assert part.partition_size == _on_disk(cluster, "dirs", index)
                assert part.offset_lag == 0 and part.is_future_key is False
            assert topics["dirs"][1].partition_size > 2000
            if version >= 4:
                assert 0 < result.usable_bytes <= result.total_bytes
        # only what is asked for; unknown partitions are left out
        resp = client.call(DESCRIBE_LOG_DIRS, 4, {"topics": [{"topic": "dirs", "partitions": [1, 7]},
                                                             {"topic": "nope", "partitions": [0]}]})
        assert [(t.name, [p.partition_index for p in t.partitions]) for t in resp.results[0].topics] == \
            [("dirs", [1])]
        resp = client.call(DESCRIBE_LOG_DIRS, 4, {"topics": []})
        assert resp.results[0].topics == []


def test_alter_replica_log_dirs(cluster):
    same = _log_dir(cluster)
    with RawClient(cluster.port) as client:
        resp = client.call(ALTER_REPLICA_LOG_DIRS, 2, {"dirs": [
            {"path": same, "topics": [{"name": "dirs", "partitions": [0, 1, 9]}, {"name": "nope", "partitions": [0]}]},
            {"path": "/elsewhere", "topics": [{"name": "other", "partitions": [0]}]}]})
    errors = {(t.topic_name, p.partition_index): p.error_code for t in resp.results for p in t.partitions}
    # A partition the metadata does not have is UNKNOWN_TOPIC_OR_PARTITION, as Kafka 4.4 answers
    # (tests/differential/test_java_clients_admin.py compares it).
    assert errors == {("dirs", 0): NONE, ("dirs", 1): NONE, ("dirs", 9): UNKNOWN_TOPIC_OR_PARTITION,
                      ("nope", 0): UNKNOWN_TOPIC_OR_PARTITION, ("other", 0): LOG_DIR_NOT_FOUND}
    admin = KafkaAdminClient(bootstrap_servers=cluster.bootstrap)
    try:
        admin.alter_replica_log_dirs({("dirs", 0, 1): same})  # (topic, partition, broker) -> dir
    finally:
        admin.close()


def test_elect_leaders_confluent(cluster):
    admin = admin_client(cluster.bootstrap)
    future = admin.elect_leaders(ConfluentElectionType.PREFERRED, [TopicPartition("dirs", 0),
                                                                   TopicPartition("dirs", 9)])
    result = future.result(timeout=30)
    assert result[TopicPartition("dirs", 0)].code() == KafkaError.ELECTION_NOT_NEEDED
    assert result[TopicPartition("dirs", 9)].code() == KafkaError.UNKNOWN_TOPIC_OR_PART


def test_elect_leaders_raw(cluster):
    with RawClient(cluster.port) as client:
        resp = client.call(ELECT_LEADERS, 2, {"election_type": 0, "timeout_ms": 1000, "topic_partitions": [
            {"topic": "dirs", "partitions": [0, 5]}, {"topic": "nope", "partitions": [0]}]})
        assert resp.error_code == NONE
        got = {(r.topic, p.partition_id): p.error_code for r in resp.replica_election_results
               for p in r.partition_result}
        assert got == {("dirs", 0): ELECTION_NOT_NEEDED, ("dirs", 5): UNKNOWN_TOPIC_OR_PARTITION,
                       ("nope", 0): UNKNOWN_TOPIC_OR_PARTITION}
        # all partitions: the ones not needing an election are left out
        resp = client.call(ELECT_LEADERS, 1, {"election_type": 1, "timeout_ms": 1000, "topic_partitions": None})
        assert all(r.partition_result == [] for r in resp.replica_election_results)
        assert "dirs" in {r.topic for r in resp.replica_election_results}
        resp = client.call(ELECT_LEADERS, 0, {"timeout_ms": 1000, "topic_partitions": [
            {"topic": "dirs", "partitions": [1]}]})
        assert resp.replica_election_results[0].partition_result[0].error_code == ELECTION_NOT_NEEDED
        resp = client.call(ELECT_LEADERS, 2, {"election_type": 7, "timeout_ms": 1000, "topic_partitions": [
            {"topic": "dirs", "partitions": [1]}]})
        assert resp.error_code == INVALID_REQUEST
        assert resp.replica_election_results[0].partition_result[0].error_code == INVALID_REQUEST


def test_partition_reassignments(cluster):
    with RawClient(cluster.port) as client:
        for version in (0, 1):
            resp = client.call(ALTER_REASSIGNMENTS, version, {"timeout_ms": 1000, "topics": [
                {"name": "dirs", "partitions": [
                    {"partition_index": 0, "replicas": [1]},
                    {"partition_index": 1, "replicas": [2]},
                    {"partition_index": 2, "replicas": [1]}]},
                {"name": "dirs-other", "partitions": [{"partition_index": 0, "replicas": [1]}]}]})
            assert resp.error_code == NONE
            got = {(t.name, p.partition_index): p.error_code for t in resp.responses for p in t.partitions}
            assert got == {("dirs", 0): NONE, ("dirs", 1): INVALID_REPLICA_ASSIGNMENT,
                           ("dirs", 2): UNKNOWN_TOPIC_OR_PARTITION, ("dirs-other", 0): UNKNOWN_TOPIC_OR_PARTITION}
        resp = client.call(ALTER_REASSIGNMENTS, 0, {"timeout_ms": 1000, "topics": [{"name": "dirs", "partitions": [
            {"partition_index": 0, "replicas": None}, {"partition_index": 1, "replicas": []},
            {"partition_index": 1, "replicas": [1, 1]}]}]})
        codes = [(p.error_code, p.error_message) for p in resp.responses[0].partitions]
        assert [c for c, _ in codes] == [NO_REASSIGNMENT_IN_PROGRESS, INVALID_REPLICA_ASSIGNMENT,
                                         INVALID_REPLICA_ASSIGNMENT]
        assert "more than once" in codes[2][1]
        for topics in (None, [{"name": "dirs", "partition_indexes": [0, 1]}]):
            resp = client.call(LIST_REASSIGNMENTS, 0, {"timeout_ms": 1000, "topics": topics})
            assert resp.error_code == NONE and resp.topics == []
    admin = KafkaAdminClient(bootstrap_servers=cluster.bootstrap)
    try:
        assert not admin.list_partition_reassignments()
    finally:
        admin.close()


def test_describe_quorum(cluster):
    admin = KafkaAdminClient(bootstrap_servers=cluster.bootstrap)
    try:
        quorum = admin.describe_metadata_quorum()
    finally:
        admin.close()
    assert "1" in repr(quorum)
    with RawClient(cluster.port) as client:
        ask = {"topics": [{"topic_name": "__cluster_metadata", "partitions": [{"partition_index": 0}]}]}
        for version in (0, 1, 2):
            resp = client.call(DESCRIBE_QUORUM, version, ask)
            assert resp.error_code == NONE
            part = resp.topics[0].partitions[0]
            assert part.error_code == NONE and part.leader_id == 1 and part.leader_epoch == 1
            (voter,) = part.current_voters
            assert voter.replica_id == 1 and voter.log_end_offset == part.high_watermark > 0
            assert part.observers == []
            if version >= 1:
                assert voter.last_fetch_timestamp > 0
            if version >= 2:
                (node,) = resp.nodes
                assert node.node_id == 1 and node.listeners[0].port == cluster.port
        before = client.call(DESCRIBE_QUORUM, 2, ask).topics[0].partitions[0].high_watermark
        create_topic(cluster.bootstrap, "quorum-grows")
        after = client.call(DESCRIBE_QUORUM, 2, ask).topics[0].partitions[0].high_watermark
        assert after > before
        resp = client.call(DESCRIBE_QUORUM, 2, {"topics": [{"topic_name": "dirs",
                                                           "partitions": [{"partition_index": 0}]}]})
        assert resp.error_code == NONE
        assert resp.topics[0].partitions[0].error_code == UNKNOWN_TOPIC_OR_PARTITION


DESCRIBE_TOPIC_PARTITIONS = 75
INVALID_TOPIC_EXCEPTION = 17


def _dtp(client: RawClient, names, limit: int = 2000, cursor=None):
    return client.call(DESCRIBE_TOPIC_PARTITIONS, 0, {"topics": [{"name": n} for n in names],
                                                      "response_partition_limit": limit, "cursor": cursor})


def test_describe_topic_partitions_kafka_python(cluster):
    create_topic(cluster.bootstrap, "paged-a", partitions=3)
    admin = KafkaAdminClient(bootstrap_servers=cluster.bootstrap)
    try:
        result = admin.describe_topic_partitions(["paged-a", "missing"])
    finally:
        admin.close()
    topics = {t["name"]: t for t in result["topics"]}
    assert topics["paged-a"]["error_code"] == NONE
    assert [p["partition_index"] for p in topics["paged-a"]["partitions"]] == [0, 1, 2]
    assert topics["paged-a"]["partitions"][0]["leader_id"] == 1
    assert topics["paged-a"]["topic_authorized_operations"] > 0  # no authorizer: every topic operation
    assert topics["missing"]["error_code"] == UNKNOWN_TOPIC_OR_PARTITION
    assert result["next_cursor"] is None


def test_describe_topic_partitions_pages(cluster):
    for name in ("pg-a", "pg-b", "pg-c"):
        create_topic(cluster.bootstrap, name, partitions=3)
    with RawClient(cluster.port) as client:
        # 3 + 3 + 3 partitions, 4 at a time, from the cursor on
        names = ["pg-c", "pg-b", "pg-a", "pg-b"]
        seen = []
        cursor = None
        for _ in range(5):
            resp = _dtp(client, names, limit=4, cursor=cursor)
            for topic in resp.topics:
                assert topic.error_code == NONE
                assert [p.eligible_leader_replicas for p in topic.partitions] == [[]] * len(topic.partitions)
                assert all(p.last_known_elr == [] and p.isr_nodes == [1] for p in topic.partitions)
                seen += [(topic.name, p.partition_index) for p in topic.partitions]
            assert sum(len(t.partitions) for t in resp.topics) <= 4
            cursor = resp.next_cursor
            if cursor is None:
                break
            cursor = {"topic_name": cursor.topic_name, "partition_index": cursor.partition_index}
        assert seen == [(n, p) for n in ("pg-a", "pg-b", "pg-c") for p in range(3)]
        # a cursor ending a topic exactly: the next topic's first partition
        resp = _dtp(client, ["pg-a", "pg-b"], limit=3)
        assert resp.next_cursor.topic_name == "pg-b" and resp.next_cursor.partition_index == 0
        # every topic (an empty list), from a cursor
        resp = _dtp(client, [], limit=2, cursor={"topic_name": "pg-b", "partition_index": 2})
        assert [(t.name, [p.partition_index for p in t.partitions]) for t in resp.topics] == \
            [("pg-b", [2]), ("pg-c", [0])]
        assert (resp.next_cursor.topic_name, resp.next_cursor.partition_index) == ("pg-c", 1)
        # a limit of 0 serves 1; unknown and illegal names
        resp = _dtp(client, ["pg-a", "nope", "bad name"], limit=0)
        got = {t.name: (t.error_code, len(t.partitions)) for t in resp.topics}
        assert got["bad name"] == (INVALID_TOPIC_EXCEPTION, 0) and got["nope"] == (UNKNOWN_TOPIC_OR_PARTITION, 0)
        assert got["pg-a"] == (NONE, 1)
        # bad cursors: the whole request is INVALID_REQUEST
        for cursor in ({"topic_name": "pg-z", "partition_index": 0},
                       {"topic_name": "pg-a", "partition_index": -1}):
            resp = _dtp(client, ["pg-a"], cursor=cursor)
            assert [(t.name, t.error_code) for t in resp.topics] == [("pg-a", INVALID_REQUEST)]
