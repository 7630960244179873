"""Metadata de-duplicates requested topics as Kafka does (a set of names, a set of ids) and bounds what one request
can make the broker do: the answer to 50 000 copies of a 100-partition topic is one topic entry."""

from __future__ import annotations

import struct

import pytest
from confluent_kafka.admin import NewTopic

from protocol.codec import request_codec
from protocol.errors import ErrorCode
from protocol.framing import RequestHeader, encode_request
from tests.helpers.confluent_clients import admin_client
from tests.helpers.raw_client import RawClient

pytestmark = pytest.mark.integration

METADATA = 3


def test_fifty_thousand_copies_of_one_topic_answer_once(broker) -> None:
    admin = admin_client(broker.bootstrap)
    admin.create_topics([NewTopic("wide", num_partitions=100)])["wide"].result(timeout=60)
    body = request_codec(METADATA, 12).encode({"topics": [{"name": "wide"}] * 50_000,
                                               "allow_auto_topic_creation": True})
    assert len(body) > 500_000  # the request is big; the answer must not be 50 000 times bigger
    with RawClient(broker.port) as raw:
        raw.sock.sendall(encode_request(RequestHeader(METADATA, 12, 1, "dup"), body))
        size = struct.unpack(">i", raw._recv_exact(4))[0]
        assert size < 20_000, size  # one 100-partition topic entry (it was 131 MB)
        raw._recv_exact(size)
        meta = raw.call(METADATA, 12, {"topics": [{"name": "wide"}, {"name": "wide"}, {"name": "other"},
                                                  {"name": "other"}], "allow_auto_topic_creation": False})
        assert sorted((t.name, t.error_code) for t in meta.topics) == [
            ("other", ErrorCode.UNKNOWN_TOPIC_OR_PARTITION), ("wide", 0)]
        topic_id = next(t.topic_id for t in meta.topics if t.name == "wide")
        meta = raw.call(METADATA, 12, {"topics": [{"name": None, "topic_id": topic_id}] * 1000})
        assert [(t.name, len(t.partitions)) for t in meta.topics] == [("wide", 100)]
        # the broker still answers everyone else
        meta = raw.call(METADATA, 12, {"topics": None})
        assert "wide" in {t.name for t in meta.topics}


def test_auto_creation_in_one_request_is_bounded_as_kafka_bounds_one_controller_operation(broker) -> None:
    """Kafka's controller refuses an operation of more than 10 000 metadata records (the auto-creation it was
    asked for then never happens and Metadata answers UNKNOWN_TOPIC_OR_PARTITION)."""
    names = [f"auto-{i}" for i in range(6_000)]  # 2 records each with num.partitions=1: 12 000 records
    with RawClient(broker.port) as raw:
        meta = raw.call(METADATA, 12, {"topics": [{"name": n} for n in names], "allow_auto_topic_creation": True})
        assert len(meta.topics) == len(names)
        assert {t.error_code for t in meta.topics} == {ErrorCode.UNKNOWN_TOPIC_OR_PARTITION}
        meta = raw.call(METADATA, 12, {"topics": None})
        assert not any(t.name.startswith("auto-") for t in meta.topics)
        few = raw.call(METADATA, 12, {"topics": [{"name": n} for n in names[:50]] + [{"name": "bad name"}],
                                      "allow_auto_topic_creation": True})
        codes = {t.name: t.error_code for t in few.topics}
        assert codes.pop("bad name") == ErrorCode.INVALID_TOPIC_EXCEPTION
        assert set(codes.values()) == {0} and len(codes) == 50


DESCRIBE_CONFIGS, INCREMENTAL_ALTER_CONFIGS = 32, 44
BROKER, TOPIC = 4, 2


def test_a_resource_named_twice_in_config_requests_is_refused_not_described_again(broker) -> None:
    """20 000 copies of the broker resource in a 100 KB DescribeConfigs built a 260 MB answer (56 s of blocked
    loop, 2 GB RSS); later copies now answer INVALID_REQUEST "Duplicate resource." as Kafka's alterations do."""
    admin = admin_client(broker.bootstrap)
    admin.create_topics([NewTopic("conf", num_partitions=1)])["conf"].result(timeout=60)
    broker_id = "1"
    with RawClient(broker.port) as raw:
        meta = raw.call(METADATA, 12, {"topics": None})
        broker_id = str(meta.brokers[0].node_id)
        body = request_codec(DESCRIBE_CONFIGS, 4).encode(
            {"resources": [{"resource_type": BROKER, "resource_name": broker_id, "configuration_keys": None}] * 20_000,
             "include_synonyms": True, "include_documentation": True})
        raw.sock.sendall(encode_request(RequestHeader(DESCRIBE_CONFIGS, 4, 7, "dup"), body))
        size = struct.unpack(">i", raw._recv_exact(4))[0]
        assert size < 2_000_000, size  # one described broker, 19 999 short refusals
        raw._recv_exact(size)
        answer = raw.call(DESCRIBE_CONFIGS, 4, {
            "resources": [{"resource_type": TOPIC, "resource_name": "conf", "configuration_keys": None},
                          {"resource_type": BROKER, "resource_name": broker_id, "configuration_keys": None},
                          {"resource_type": TOPIC, "resource_name": "conf", "configuration_keys": None}],
            "include_synonyms": False, "include_documentation": False})
        first, other, again = answer.results
        assert first.error_code == 0 and first.configs and other.error_code == 0 and other.configs
        assert (again.error_code, again.error_message, again.configs) == (
            ErrorCode.INVALID_REQUEST, "Duplicate resource.", [])
        change = {"resource_type": TOPIC, "resource_name": "conf",
                  "configs": [{"name": "retention.ms", "config_operation": 0, "value": "1000"}]}
        answer = raw.call(INCREMENTAL_ALTER_CONFIGS, 1, {"resources": [change, change], "validate_only": False})
        assert [(r.error_code, r.error_message) for r in answer.responses] == [
            (ErrorCode.INVALID_REQUEST, "Each resource must appear at most once.")] * 2
        described = raw.call(DESCRIBE_CONFIGS, 4, {
            "resources": [{"resource_type": TOPIC, "resource_name": "conf", "configuration_keys": ["retention.ms"]}],
            "include_synonyms": False, "include_documentation": False})
        assert described.results[0].configs[0].value != "1000"  # neither copy was applied
