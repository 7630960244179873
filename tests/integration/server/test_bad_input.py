"""Malformed frames and bad values from a raw socket: errors or a closed connection, never a dead broker."""

from __future__ import annotations

import socket
import struct

import pytest
from confluent_kafka import Producer

from protocol.codec import request_codec, response_codec
from protocol.errors import ErrorCode
from protocol.records import Record, build_batch
from tests.helpers.confluent_clients import consume_all, create_topic

pytestmark = pytest.mark.integration


def connect(broker) -> socket.socket:
    sock = socket.create_connection(("127.0.0.1", broker.port), timeout=10)
    return sock


def frame(api_key: int, version: int, correlation_id: int, body: bytes, flexible: bool) -> bytes:
    client = b"raw-test"
    header = struct.pack(">hhih", api_key, version, correlation_id, len(client)) + client
    if flexible:
        header += b"\x00"
    payload = header + body
    return struct.pack(">i", len(payload)) + payload


def read_response(sock: socket.socket) -> bytes:
    size = struct.unpack(">i", recv_exact(sock, 4))[0]
    return recv_exact(sock, size)


def recv_exact(sock: socket.socket, n: int) -> bytes:
    buf = b""
    while len(buf) < n:
        chunk = sock.recv(n - len(buf))
        if not chunk:
            raise ConnectionError("closed")
        buf += chunk
    return buf


def is_closed(sock: socket.socket) -> bool:
    try:
        return sock.recv(1) == b""
    except (ConnectionResetError, TimeoutError):
        return True


def api_versions_ok(broker) -> bool:
    with connect(broker) as sock:
        sock.sendall(frame(18, 0, 7, b"", flexible=False))
        body = read_response(sock)
        return struct.unpack(">ih", body[:6]) == (7, 0)


@pytest.mark.parametrize(
    "raw",
    [
        struct.pack(">i", -5),  # negative size
        struct.pack(">i", 200 * 1024 * 1024) + b"x" * 10,  # over socket.request.max.bytes
        struct.pack(">i", 3) + b"abc",  # shorter than a request header
        frame(3, 12, 1, b"\xff\xff\xff\xff\xff", flexible=True),  # Metadata v12 with a broken varint
        frame(0, 9, 1, b"\x00\x01", flexible=True),  # truncated Produce body
        frame(999, 0, 1, b"", flexible=False),  # unknown api key
        frame(1, 3, 1, b"", flexible=False),  # Fetch version we do not serve
    ],
)
def test_malformed_frames_close_only_that_connection(broker, raw):
    with connect(broker) as bystander, connect(broker) as bad:
        bad.sendall(raw)
        assert is_closed(bad)
        bystander.sendall(frame(18, 0, 3, b"", flexible=False))
        assert struct.unpack(">i", read_response(bystander)[:4]) == (3,)
    assert api_versions_ok(broker)


def test_bad_values_get_kafka_errors(broker):
    create_topic(broker.bootstrap, "strict")
    produce = request_codec(0, 9)
    good = build_batch([Record(key=b"k", value=b"v")])
    corrupt = bytearray(good)
    corrupt[-1] ^= 0xFF  # breaks the CRC
    cases = {
        "unknown": ("no-such-topic", good, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION),
        "corrupt": ("strict", bytes(corrupt), ErrorCode.CORRUPT_MESSAGE),
        "too-large": ("strict", build_batch([Record(key=None, value=b"x" * 2_000_000)]),
                      ErrorCode.MESSAGE_TOO_LARGE),
        "bad-partition": ("strict", good, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION),
    }
    with connect(broker) as sock:
        for i, (case, (topic, records, expected)) in enumerate(cases.items()):
            partition = 7 if case == "bad-partition" else 0
            body = produce.encode({
                "transactional_id": None, "acks": -1, "timeout_ms": 5000,
                "topic_data": [{"name": topic, "partition_data": [{"index": partition, "records": records}]}],
            })
            sock.sendall(frame(0, 9, 100 + i, body, flexible=True))
            resp = read_response(sock)
            assert struct.unpack(">i", resp[:4]) == (100 + i,)
            decoded = response_codec(0, 9).decode(resp[5:])
            code = decoded.responses[0].partition_responses[0].error_code
            assert code == expected, case
        # Bad acks value.
        body = produce.encode({"acks": 2, "timeout_ms": 5000, "topic_data": [
            {"name": "strict", "partition_data": [{"index": 0, "records": good}]}]})
        sock.sendall(frame(0, 9, 200, body, flexible=True))
        decoded = response_codec(0, 9).decode(read_response(sock)[5:])
        assert decoded.responses[0].partition_responses[0].error_code == ErrorCode.INVALID_REQUIRED_ACKS
    # Nothing bad was stored, and the topic still works for a real client.
    producer = Producer({"bootstrap.servers": broker.bootstrap})
    producer.produce("strict", value=b"fine", partition=0)
    assert producer.flush(10) == 0
    assert [v for _, v, _ in consume_all(broker.bootstrap, "strict", 1)] == [b"fine"]
