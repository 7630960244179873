"""The differential harness itself: a scenario that must agree (ApiVersions' error and the Metadata of a new
topic) and the normaliser's rules."""

from __future__ import annotations

import uuid

import pytest
from confluent_kafka.admin import AdminClient, NewTopic

from tests.helpers.differential import Target, assert_same, diff, normalize

pytestmark = pytest.mark.integration


def test_metadata_of_a_new_topic(pair):
    def scenario(target: Target):
        topic = target.unique("smoke")
        admin = AdminClient(target.client_config())
        admin.create_topics([NewTopic(topic, 3, 1)])[topic].result(timeout=30)
        with target.raw() as raw:
            answer = raw.call(3, 12, {"topics": [{"name": topic}], "allow_auto_topic_creation": False,
                                      "include_topic_authorized_operations": False})
        [topic_answer] = answer.topics
        return {"topic": topic_answer, "brokers": answer.brokers, "controller_id": answer.controller_id}

    assert_same(pair.run(scenario), "Metadata of a new 3-partition topic")


def test_normalize_and_diff():
    target = Target("shoal", "127.0.0.1", 9999)
    name = target.unique("orders")
    a, b = uuid.uuid4(), uuid.uuid4()
    seen = normalize({"name": name, "ids": [a, b, a], "throttle_time_ms": 5, "host": "127.0.0.1", "port": 9999,
                      "commit_timestamp": 1_800_000_000_000, "timestamp": -1, "cluster_id": "x",
                      "message": f"Topic {name} at 127.0.0.1:9999"}, target)
    assert seen == {"name": "orders", "ids": ["<uuid:1>", "<uuid:2>", "<uuid:1>"], "host": "<host>",
                    "port": "<port>", "commit_timestamp": "<timestamp>", "timestamp": -1, "cluster_id": "<cluster-id>",
                    "message": "Topic orders at <host>:<port>"}
    assert diff({"a": [1, {"b": 2}], "c": 1}, {"a": [1, {"b": 3}], "d": 1}) == [
        ".a[1].b: kafka=2 shoal=3", ".c: only Kafka has it (1)", ".d: only Shoal has it (1)"]
