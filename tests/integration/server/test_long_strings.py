"""Client strings at the 32 767-byte limit are answered with the right error code, never a failed encode (an
UNKNOWN_SERVER_ERROR or a closed connection); one byte more is a malformed request that closes the connection."""

from __future__ import annotations

import json
import socket
import struct

import pytest

from protocol.errors import ErrorCode
from protocol.primitives import MAX_STRING
from tests.helpers.raw_client import RawClient

pytestmark = pytest.mark.integration

DESCRIBE_CONFIGS, INCREMENTAL_ALTER_CONFIGS = 32, 44
SHARE_GROUP_HEARTBEAT, SHARE_GROUP_DESCRIBE, SHARE_FETCH, SHARE_ACKNOWLEDGE = 76, 77, 78, 79
TOPIC, BROKER = 2, 4
LONG = "g" * MAX_STRING


def test_error_answers_quoting_the_longest_client_strings(broker):
    with RawClient(broker.port) as client:
        resp = client.call(SHARE_GROUP_DESCRIBE, 1, {"group_ids": [LONG]})
        assert resp.groups[0].error_code == ErrorCode.GROUP_ID_NOT_FOUND
        assert resp.groups[0].group_id == LONG

        resp = client.call(DESCRIBE_CONFIGS, 4, {"resources": [
            {"resource_type": TOPIC, "resource_name": LONG, "configuration_keys": None}]})
        assert resp.results[0].error_code != 0 and resp.results[0].error_code != ErrorCode.UNKNOWN_SERVER_ERROR

        resp = client.call(INCREMENTAL_ALTER_CONFIGS, 1, {"resources": [
            {"resource_type": TOPIC, "resource_name": LONG, "configs": []}]})
        assert resp.responses[0].error_code not in (0, ErrorCode.UNKNOWN_SERVER_ERROR)
        resp = client.call(INCREMENTAL_ALTER_CONFIGS, 1, {"resources": [
            {"resource_type": BROKER, "resource_name": "1",
             "configs": [{"name": LONG, "config_operation": 0, "value": "x"}]}]})
        assert resp.responses[0].error_code not in (0, ErrorCode.UNKNOWN_SERVER_ERROR)

        for api_key in (SHARE_ACKNOWLEDGE, SHARE_FETCH):
            body = {"group_id": "g", "member_id": LONG, "share_session_epoch": 1, "topics": []}
            resp = client.call(api_key, 1, body)
            assert resp.error_code not in (0, ErrorCode.UNKNOWN_SERVER_ERROR), api_key

        resp = client.call(SHARE_GROUP_HEARTBEAT, 1, {"group_id": LONG, "member_id": LONG, "member_epoch": 5,
                                                       "rack_id": None, "subscribed_topic_names": None})
        assert resp.error_code not in (0, ErrorCode.UNKNOWN_SERVER_ERROR)
    broker.stop()
    entries = [json.loads(line) for line in broker.log_path.read_text().splitlines() if line.startswith("{")]
    assert [e["event"] for e in entries if e["level"] in ("error", "critical")] == []


def test_a_compact_string_over_the_limit_closes_the_connection(broker):
    body = b"\x02" + bytes([0x81, 0x80, 0x02]) + b"g" * (MAX_STRING + 1) + b"\x00\x00"  # length 32768
    header = struct.pack(">hhih", SHARE_GROUP_DESCRIBE, 1, 9, 3) + b"raw" + b"\x00"
    with socket.create_connection(("127.0.0.1", broker.port), timeout=10) as sock:
        sock.sendall(struct.pack(">i", len(header) + len(body)) + header + body)
        assert sock.recv(1) == b""
    with RawClient(broker.port) as client:
        assert client.call(18, 0, {}).error_code == 0
