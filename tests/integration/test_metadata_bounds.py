"""Metadata de-duplicates requested topics as Kafka does (a set of names, a set of ids) and bounds what one request
can make the broker do: the answer to 50 000 copies of a 100-partition topic is one topic entry."""

from __future__ import annotations

import struct

import pytest
from confluent_kafka.admin import AdminClient, NewTopic

from protocol.codec import request_codec
from protocol.errors import ErrorCode
from protocol.framing import RequestHeader, encode_request
from tests.integration.raw_client import RawClient

pytestmark = pytest.mark.integration

METADATA = 3


def test_fifty_thousand_copies_of_one_topic_answer_once(broker) -> None:
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
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
