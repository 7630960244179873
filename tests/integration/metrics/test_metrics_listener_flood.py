"""The metrics listener under hostile HTTP clients (endless header lines, hundreds of idle connections, slowloris)
while a real confluent-kafka producer keeps producing: its median latency stays within 2x of the baseline measured
in the same test (before and after the floods), the broker's resident memory stays bounded, slow and idle connections are closed, and /metrics answers
again once the flood stops."""

from __future__ import annotations

import json
import signal
import socket
import statistics
import subprocess
import time
import urllib.error
import urllib.request

import pytest
from confluent_kafka import Producer

from broker.metrics import http as listener
from tests.helpers.broker_process import REPO, BrokerProcess, start_broker, venv_python
from tests.helpers.confluent_clients import create_topic
from tests.helpers.proc_stats import open_sockets, rss_mib
from tests.helpers.waiting import wait_until

pytestmark = pytest.mark.integration

TOPIC = "flood"


@pytest.fixture(scope="module")
def metrics_broker(tmp_path_factory: pytest.TempPathFactory):
    tmp = tmp_path_factory.mktemp("flood")
    proc = start_broker(tmp, {"metrics.prometheus.listener": "127.0.0.1:0"})
    try:
        create_topic(proc.bootstrap, TOPIC, 1)
        yield proc
    finally:
        proc.stop()


def produce_latencies(producer: Producer, n: int) -> list[float]:
    """Seconds from produce() to delivery, one record at a time."""
    out = []
    for i in range(n):
        delivered: list[object] = []
        started = time.perf_counter()
        producer.produce(TOPIC, value=b"v%d" % i, on_delivery=lambda err, _m, d=delivered: d.append(err))
        while not delivered:
            producer.poll(0.0005)
        assert delivered == [None]
        out.append(time.perf_counter() - started)
    return out


def scrape_status(port: int, timeout: float = 5) -> int:
    """The HTTP status of a scrape; 0 when there was no answer in time."""
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=timeout) as response:
            response.read()
            return response.status
    except urllib.error.HTTPError as err:
        return err.code
    except OSError:
        return 0


def start_flood(mode: str, port: int) -> subprocess.Popen:
    return subprocess.Popen([venv_python(), "-m", "tests.helpers.http_flood", mode, str(port)], cwd=REPO,
                            stdout=subprocess.PIPE, text=True)


def stop_flood(proc: subprocess.Popen) -> dict:
    proc.send_signal(signal.SIGTERM)
    out, _ = proc.communicate(timeout=30)
    return json.loads(out.strip().splitlines()[-1])


def test_flood_leaves_producer_latency_and_memory_bounded(metrics_broker: BrokerProcess):
    port = metrics_broker.ports["prometheus"]
    # acks=1: the latency measured is the broker's answer, not the disk's fsync time (which the flood cannot move).
    producer = Producer({"bootstrap.servers": metrics_broker.bootstrap, "acks": 1, "linger.ms": 0})
    produce_latencies(producer, 50)  # warm: connection, metadata
    rss_before = rss_mib(metrics_broker.pid)
    # Phase 1: the header flood alone (it gets a connection whenever it wants one); phase 2: idle connections and
    # slowloris on top, which take every slot the listener has. The baseline is measured in rounds between flood
    # rounds (the flood processes stopped with SIGSTOP, their connections held): the machine's other load drifts
    # over a test, so idle and flood samples are interleaved.
    floods = [start_flood("headers", port)]
    peak_rss = rss_before
    idle: list[float] = []
    p50s = []
    try:
        wait_until(lambda: open_sockets(metrics_broker.pid) >= 4, 30, "the header flood to connect")
        for phase in (1, 2):
            if phase == 2:
                floods += [start_flood(mode, port) for mode in ("connections", "slowloris")]
                wait_until(lambda: open_sockets(metrics_broker.pid) >= listener.MAX_CONNECTIONS, 30,
                           "the connection floods to connect")
            samples: list[float] = []
            for _ in range(12):  # short alternating rounds: both see the same spells of the machine's load
                for f in floods:
                    f.send_signal(signal.SIGSTOP)
                idle += produce_latencies(producer, 20)
                for f in floods:
                    f.send_signal(signal.SIGCONT)
                samples += produce_latencies(producer, 20)
                peak_rss = max(peak_rss, rss_mib(metrics_broker.pid))
            p50s.append(statistics.median(samples))
        assert all(f.poll() is None for f in floods), "a flood process died"
    finally:
        for f in floods:
            f.send_signal(signal.SIGCONT)
        counters = [stop_flood(f) for f in floods]
    baseline = statistics.median(idle)
    print(f"produce p50 {baseline * 1000:.2f} ms idle, {[round(p * 1000, 2) for p in p50s]} ms under floods; "
          f"RSS {rss_before:.0f} -> peak {peak_rss:.0f} MiB; floods {counters}")
    headers, connections, slowloris = counters
    assert headers["closed_by_server"] > 0 and headers["bytes_sent"] > 0
    assert connections["opened"] + slowloris["opened"] >= listener.MAX_CONNECTIONS
    # Sub-millisecond medians move by a few ms with the machine's scheduling alone (seen at load 16 on two
    # cores: 0.49 ms idle, 2.0 ms under the floods); a flood the listener did not bound holds the event loop
    # for tens of ms per request.
    assert max(p50s) <= 2 * baseline + 0.005, (baseline, p50s)
    assert peak_rss - rss_before < 64, (rss_before, peak_rss)
    # Once the flood is gone the endpoint serves again.
    wait_until(lambda: scrape_status(port) == 200, 30, "/metrics to answer after the flood")


def test_idle_and_slow_connections_are_closed_and_extra_ones_wait(metrics_broker: BrokerProcess):
    port = metrics_broker.ports["prometheus"]
    wait_until(lambda: scrape_status(port) == 200, 30, "/metrics to answer")
    started = time.monotonic()
    held = [socket.create_connection(("127.0.0.1", port)) for _ in range(listener.MAX_CONNECTIONS)]
    try:
        held[0].sendall(b"GET /metrics HTTP/1.1\r\nX-Slow: ")  # a head never finished
        # Every slot taken: the next connection is not served (it waits in the kernel's backlog).
        assert scrape_status(port, timeout=2) == 0
        for s in held:  # each is closed by the server (EOF; a socket.timeout here fails the test)
            s.settimeout(listener.IDLE_TIMEOUT_S + 10)
            while s.recv(4096):
                pass
        waited = time.monotonic() - started
        assert listener.IDLE_TIMEOUT_S - 1 <= waited <= listener.IDLE_TIMEOUT_S + 8, waited
    finally:
        for s in held:
            s.close()
    wait_until(lambda: scrape_status(port) == 200, 30, "/metrics to answer once the slots are free")


def test_only_bodyless_get_is_served(metrics_broker: BrokerProcess):
    port = metrics_broker.ports["prometheus"]

    def exchange(request: bytes) -> bytes:
        with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
            data = b""
            try:
                s.sendall(request)
                while chunk := s.recv(65536):
                    data += chunk
            except (ConnectionResetError, BrokenPipeError):
                pass  # cut off (reset: our bytes unread)
            return data

    assert exchange(b"POST /metrics HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nhello").startswith(
        b"HTTP/1.1 405")
    # A body announced on a GET is never read: refused and the connection closed.
    assert exchange(b"GET /metrics HTTP/1.1\r\nHost: x\r\nContent-Length: 100000000\r\n\r\n").startswith(
        b"HTTP/1.1 413")
    too_many = b"".join(b"X-%d: v\r\n" % i for i in range(listener.MAX_HEADERS + 1))
    assert exchange(b"GET /metrics HTTP/1.1\r\n" + too_many + b"\r\n").split(b" ")[1] == b"400"
    long_line = b"X-Long: " + b"v" * (listener.MAX_FIELD_BYTES + 1) + b"\r\n"
    assert exchange(b"GET /metrics HTTP/1.1\r\n" + long_line + b"\r\n").split(b" ")[1] in (b"400", b"431")
    # A head of lines each within bounds but too big in total: the connection is cut, nothing answered.
    big = b"".join(b"X-%d: %s\r\n" % (i, b"v" * 7000) for i in range(12))
    assert len(big) > listener.MAX_HEAD_BYTES
    assert exchange(b"GET /metrics HTTP/1.1\r\n" + big + b"\r\n") == b""
    ok = exchange(b"GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
    assert ok.startswith(b"HTTP/1.1 200") and b"shoal_requests_total" in ok
