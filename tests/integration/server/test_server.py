"""The server over raw sockets against a real broker process: ApiVersions, pipelining, bad frames, SIGTERM."""

from __future__ import annotations

import re
import socket
import struct
import subprocess

import pytest

from protocol.codec import request_codec, response_codec
from protocol.errors import ErrorCode
from protocol.framing import RequestHeader, encode_request

pytestmark = pytest.mark.integration

API_VERSIONS = 18


def connect(port: int) -> socket.socket:
    return socket.create_connection(("127.0.0.1", port), timeout=10)


def api_versions_request(version: int, correlation_id: int) -> bytes:
    body = {"client_software_name": "shoal-test", "client_software_version": "1.0"} if version >= 3 else {}
    payload = request_codec(API_VERSIONS, version).encode(body) if version <= 5 else b"\x00\x00\x00"
    return encode_request(RequestHeader(API_VERSIONS, version, correlation_id, "raw"), payload)


def recv_exact(sock: socket.socket, n: int) -> bytes:
    buf = bytearray()
    while len(buf) < n:
        chunk = sock.recv(n - len(buf))
        if not chunk:
            raise ConnectionError("connection closed")
        buf += chunk
    return bytes(buf)


def read_frame(sock: socket.socket) -> bytes:
    (size,) = struct.unpack(">i", recv_exact(sock, 4))
    return recv_exact(sock, size)


def closed(sock: socket.socket) -> bool:
    try:
        return sock.recv(1) == b""
    except (ConnectionResetError, TimeoutError):
        return True


def assert_works(port: int) -> None:
    with connect(port) as sock:
        sock.sendall(api_versions_request(0, 77))
        frame = read_frame(sock)
        assert struct.unpack_from(">i", frame) == (77,)
        assert response_codec(API_VERSIONS, 0).decode(frame[4:]).error_code == 0


@pytest.mark.parametrize("version", [0, 1, 2, 3, 4, 5])
def test_api_versions_every_version(broker_module, version):
    with connect(broker_module.port) as sock:
        sock.sendall(api_versions_request(version, 1000 + version))
        frame = read_frame(sock)
    (corr,) = struct.unpack_from(">i", frame)
    assert corr == 1000 + version
    resp = response_codec(API_VERSIONS, version).decode(frame[4:])  # response header v0 always
    assert resp.error_code == 0
    keys = {k.api_key: (k.min_version, k.max_version) for k in resp.api_keys}
    assert keys[API_VERSIONS] == (0, 5)
    if version >= 3:
        # features (broker.features; field by field in test_transactions_tv2): never empty arrays, which
        # librdkafka 2.0.2 rejects
        assert resp.supported_features and resp.finalized_features
        assert resp.finalized_features_epoch >= 0


def test_newer_api_versions_gets_v0_unsupported_answer(broker_module):
    with connect(broker_module.port) as sock:
        sock.sendall(api_versions_request(9, 5))
        frame = read_frame(sock)
        assert struct.unpack_from(">i", frame) == (5,)
        resp = response_codec(API_VERSIONS, 0).decode(frame[4:])
        assert resp.error_code == ErrorCode.UNSUPPORTED_VERSION
        keys = {k.api_key: (k.min_version, k.max_version) for k in resp.api_keys}
        assert keys[API_VERSIONS] == (0, 5)
        # The connection stays usable: the client retries with a version we serve.
        sock.sendall(api_versions_request(4, 6))
        frame = read_frame(sock)
        assert struct.unpack_from(">i", frame) == (6,)
        assert response_codec(API_VERSIONS, 4).decode(frame[4:]).error_code == 0


def test_pipelined_requests_answered_in_order(broker_module):
    n = 50
    with connect(broker_module.port) as sock:
        sock.sendall(b"".join(api_versions_request(i % 5, 10_000 + i) for i in range(n)))
        for i in range(n):
            frame = read_frame(sock)
            assert struct.unpack_from(">i", frame) == (10_000 + i,)
            assert response_codec(API_VERSIONS, i % 5).decode(frame[4:]).error_code == 0


@pytest.mark.parametrize(
    "raw",
    [
        struct.pack(">i", 104_857_600 + 1),  # over socket.request.max.bytes
        struct.pack(">i", -1),
        struct.pack(">i", 6) + struct.pack(">hhh", 18, 0, 0),  # header cut short
        struct.pack(">i", 10) + struct.pack(">hhih", 999, 0, 1, -1),  # unknown api key
    ],
    ids=["oversized", "negative", "garbage-header", "unknown-api-key"],
)
def test_bad_frame_closes_only_that_connection(broker_module, raw):
    with connect(broker_module.port) as bystander, connect(broker_module.port) as bad:
        bystander.sendall(api_versions_request(0, 1))
        read_frame(bystander)
        bad.sendall(raw)
        assert closed(bad)
        bystander.sendall(api_versions_request(2, 2))
        assert struct.unpack_from(">i", read_frame(bystander)) == (2,)
    assert_works(broker_module.port)


def test_sigterm_exits_zero(broker):
    assert_works(broker.port)
    with connect(broker.port):  # an open idle connection does not block shutdown
        assert broker.stop() == 0


def test_restart_keeps_cluster_id(broker):
    meta = (broker.data_dir / "meta.properties").read_text()
    broker.restart()
    assert_works(broker.port)
    assert (broker.data_dir / "meta.properties").read_text() == meta


def test_kafka_python_api_versions_handshake(broker_module):
    """kafka-python 3.0.12 sends ApiVersions v4 first; its connection handshake must succeed without fallback."""
    from kafka.net.compat import KafkaNetClient

    client = KafkaNetClient(bootstrap_servers=broker_module.bootstrap, request_timeout_ms=10_000)
    try:
        manager = client._manager
        node_id = manager.cluster.bootstrap_brokers()[0].node_id
        client.await_ready(node_id, timeout_ms=10_000)
        conn = manager._conns[node_id]
        assert conn._api_versions_idx == 4  # no UNSUPPORTED_VERSION round trip
        assert conn.broker_version_data.api_versions[API_VERSIONS] == (0, 5)
    finally:
        client.close()


def _server_side_skmem(port: int) -> dict[str, int]:
    """The socket memory figures `ss` reports for the broker's side of the one connection to `port`."""
    out = subprocess.run(["ss", "-tmnH", "state", "established", f"( sport = :{port} )"], capture_output=True,
                         text=True, check=True).stdout
    (skmem,) = re.findall(r"skmem:\(([^)]*)\)", out)
    return {m.group(1): int(m.group(2)) for m in re.finditer(r"([a-z_]+)(\d+)", skmem)}


def _listen_backlog(port: int) -> int:
    """The backlog of the broker's listening socket on `port` (`ss` shows it as a listener's Send-Q)."""
    out = subprocess.run(["ss", "-ltnH", f"( sport = :{port} )"], capture_output=True, text=True, check=True).stdout
    (line,) = out.splitlines()
    return int(line.split()[2])


def test_socket_configs_apply(broker_factory):
    """socket.send.buffer.bytes, socket.receive.buffer.bytes and socket.listen.backlog.size set the broker's
    sockets, as in Kafka (Linux keeps twice the buffer size asked: `ss` shows tb and rb doubled)."""
    broker = broker_factory({"socket.send.buffer.bytes": "50000", "socket.receive.buffer.bytes": "60000",
                             "socket.listen.backlog.size": "77"})
    assert _listen_backlog(broker.port) == 77
    with connect(broker.port) as sock:
        sock.sendall(api_versions_request(0, 5))
        read_frame(sock)
        skmem = _server_side_skmem(broker.port)
        assert skmem["tb"] == 100_000, skmem
        assert skmem["rb"] == 120_000, skmem
