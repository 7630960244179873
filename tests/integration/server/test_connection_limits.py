"""Connection-level limits against a real broker: clients that never read, idle and half-sent connections,
max.connections.per.ip, and acks=0 errors (a closed connection and an INFO line, no traceback)."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import struct
import threading
import time

import pytest

from protocol.codec import request_codec
from protocol.framing import RequestHeader, encode_request
from protocol.records import Record, build_batch
from tests.helpers.confluent_clients import consume_all, create_topic, produce_all
from tests.helpers.proc_stats import peak_rss_mib, rss_mib
from tests.helpers.raw_client import RawClient

pytestmark = pytest.mark.integration

PRODUCE, FETCH, API_VERSIONS = 0, 1, 18
MIB = 1 << 20

# Stated bound for test_clients_that_never_read_keep_broker_memory_bounded: each of the 10 clients may hold
# about one Fetch response (at most its 50 MB MaxBytes) plus connections.max.unsent.bytes; the broker itself
# holds the partition index and the normal client's traffic.
NEVER_READING_CLIENTS = 10
FETCH_MAX_BYTES = 50 * MIB
RSS_BOUND_MIB = 1000


def fill(port: int, topic: str, mib: int) -> None:
    """About `mib` MiB in ~1 MiB batches of 100 KiB values."""
    value = b"v" * (100 * 1024)
    with RawClient(port) as client:
        for _ in range(mib):
            batch = build_batch([Record(value=value) for _ in range(10)])
            resp = client.call(PRODUCE, 9, {"acks": 1, "timeout_ms": 10_000, "topic_data": [
                {"name": topic, "partition_data": [{"index": 0, "records": batch}]}]})
            assert resp.responses[0].partition_responses[0].error_code == 0


def fetch_frame(topic: str, correlation_id: int) -> bytes:
    body = request_codec(FETCH, 11).encode({
        "replica_id": -1, "max_wait_ms": 0, "min_bytes": 1, "max_bytes": FETCH_MAX_BYTES, "isolation_level": 0,
        "session_id": 0, "session_epoch": -1, "rack_id": "",
        "topics": [{"topic": topic, "partitions": [
            {"partition": 0, "current_leader_epoch": -1, "fetch_offset": 0, "log_start_offset": -1,
             "partition_max_bytes": FETCH_MAX_BYTES}]}],
        "forgotten_topics_data": []})
    return encode_request(RequestHeader(FETCH, 11, correlation_id, "never-reads"), body)


class RssWatch(threading.Thread):
    """Samples the broker's RSS; SIGKILLs it past `kill_mib` so a regression cannot exhaust the shared machine."""

    def __init__(self, pid: int, kill_mib: float) -> None:
        super().__init__(daemon=True)
        self.pid = pid
        self.kill_mib = kill_mib
        self.peak = 0.0
        self.killed = False
        self.stop = threading.Event()

    def run(self) -> None:
        while not self.stop.is_set():
            try:
                rss = rss_mib(self.pid)
            except (FileNotFoundError, ProcessLookupError):
                return
            self.peak = max(self.peak, rss)
            if rss > self.kill_mib:
                self.killed = True
                with_signal(self.pid, signal.SIGKILL)
                return
            time.sleep(0.02)


def with_signal(pid: int, sig: int) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, sig)


def test_clients_that_never_read_keep_broker_memory_bounded(broker_factory):
    broker = broker_factory()
    create_topic(broker.bootstrap, "big")
    create_topic(broker.bootstrap, "live")
    fill(broker.port, "big", 58)
    before = rss_mib(broker.pid)
    watch = RssWatch(broker.pid, kill_mib=2 * RSS_BOUND_MIB)
    watch.start()
    hogs = []
    try:
        for i in range(NEVER_READING_CLIENTS):
            sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 64 * 1024)
            sock.connect(("127.0.0.1", broker.port))
            sock.sendall(b"".join(fetch_frame("big", 1000 * i + n) for n in range(20)))  # then never reads
            hogs.append(sock)
        # A normal client keeps producing and consuming meanwhile.
        started = time.monotonic()
        for round_ in range(3):
            values = [f"r{round_}-{n}".encode() for n in range(200)]
            produce_all(broker.bootstrap, "live", values)
            got = consume_all(broker.bootstrap, "live", 200 * (round_ + 1), timeout=60)
            assert [v for _, v, _ in got][-200:] == values
        normal_s = time.monotonic() - started
        assert broker.alive(), broker.tail()
        peak = peak_rss_mib(broker.pid)
    finally:
        watch.stop.set()
        for sock in hogs:
            sock.close()
    print(f"RSS before {before:.0f} MiB, peak {peak:.0f} MiB (bound {RSS_BOUND_MIB}); normal client: 3 rounds of "
          f"200 produced + consumed in {normal_s:.1f} s")
    assert not watch.killed, f"broker RSS passed {watch.kill_mib} MiB"
    assert peak < RSS_BOUND_MIB


def test_half_sent_frame_and_idle_connections_are_closed(broker_factory):
    broker = broker_factory({"connections.max.idle.ms": "1000"})
    stuck = socket.create_connection(("127.0.0.1", broker.port), timeout=30)
    stuck.sendall(struct.pack(">i", 1000) + b"\x00" * 100)  # a frame that never completes
    silent = socket.create_connection(("127.0.0.1", broker.port), timeout=30)
    assert stuck.recv(1) == b""  # closed by the broker (a timeout here would raise)
    assert silent.recv(1) == b""
    stuck.close()
    silent.close()
    lines = [json.loads(line) for line in broker.log_path.read_text().splitlines() if line.startswith("{")]
    assert sum(entry["event"] == "closing idle connection" for entry in lines) >= 2


def test_max_connections_per_ip_closes_extra_connections(broker_factory):
    broker = broker_factory({"max.connections.per.ip": "3"})
    kept = [RawClient(broker.port) for _ in range(3)]
    try:
        for client in kept:
            assert client.call(API_VERSIONS, 0, {}).error_code == 0
        extra = socket.create_connection(("127.0.0.1", broker.port), timeout=30)
        with contextlib.suppress(OSError):  # the broker may have closed it already
            extra.sendall(encode_request(RequestHeader(API_VERSIONS, 0, 1, "extra"), b""))
        with contextlib.suppress(ConnectionResetError):
            assert extra.recv(1) == b""
        extra.close()
    finally:
        for client in kept:
            client.close()
    # Once the others are gone, a new connection is served again.
    deadline = time.monotonic() + 30
    while True:
        try:
            with RawClient(broker.port) as client:
                assert client.call(API_VERSIONS, 0, {}).error_code == 0
            break
        except (ConnectionError, OSError):
            assert time.monotonic() < deadline
            time.sleep(0.05)


def test_connections_over_the_creation_rate_are_served_late_not_refused(broker_factory):
    """max.connection.creation.rate 4/s over two 1 s samples: twelve clients opening one after the other are all
    served, the later ones only after the accept loop's waits (about 2 s of them in all), which the broker logs."""
    broker = broker_factory({"max.connection.creation.rate": "4", "quota.window.num": "2"})
    started = time.monotonic()
    for _ in range(12):
        with RawClient(broker.port) as client:
            assert client.call(API_VERSIONS, 0, {}).error_code == 0
    assert time.monotonic() - started >= 1.5
    assert "max.connection.creation.rate reached" in broker.tail(400)


def test_acks0_error_closes_with_an_info_line_and_no_traceback(broker_factory):
    broker = broker_factory({"auto.create.topics.enable": "false"})
    with RawClient(broker.port) as client:
        client.send(PRODUCE, 9, {"acks": 0, "timeout_ms": 5000, "topic_data": [
            {"name": "missing", "partition_data": [{"index": 0, "records": build_batch([Record(value=b"x")])}]}]})
        with pytest.raises(ConnectionError):
            client._recv_exact(1)
    broker.stop()
    text = broker.log_path.read_text()
    entries = [json.loads(line) for line in text.splitlines() if line.startswith("{")]
    assert any(e["event"] == "acks=0 produce failed, closing connection" and e["level"] == "info" for e in entries)
    assert [e for e in entries if e["level"] in ("error", "critical")] == []
    assert "Traceback" not in text
