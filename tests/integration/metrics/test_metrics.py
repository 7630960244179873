"""The Prometheus endpoint scraped over HTTP after a known workload with real clients (confluent-kafka), and the
endpoint off by default (no port opened)."""

from __future__ import annotations

import os
import socket
import struct
import time
import urllib.request

import pytest
from confluent_kafka import AcknowledgeType, KafkaException
from confluent_kafka.admin import NewTopic

from protocol.errors import ErrorCode
from protocol.framing import RequestHeader, encode_request
from tests.helpers.confluent_clients import admin_client, alter_group_config, create_topic, produce_all
from tests.helpers.prometheus_scrape import scrape, value
from tests.helpers.raw_client import RawClient
from tests.helpers.share_consumers import consumer, earliest, messages

pytestmark = pytest.mark.integration

# A lock far longer than the test: no record is redelivered by a lock expiry, so the counts are exact.
LONG_LOCKS = {"group.share.record.lock.duration.ms": "600000", "group.share.max.record.lock.duration.ms": "3600000"}
ON = {"metrics.prometheus.listener": "127.0.0.1:0", "errors.deadletterqueue.auto.create.topics.enable": "true",
      **LONG_LOCKS}

def listening_sockets(pid: int) -> int:
    """TCP sockets in LISTEN state owned by the process."""
    inodes = set()
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            target = os.readlink(f"/proc/{pid}/fd/{fd}")
        except OSError:
            continue
        if target.startswith("socket:["):
            inodes.add(target[8:-1])
    count = 0
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        with open(table) as f:
            next(f)
            for line in f:
                fields = line.split()
                if fields[3] == "0A" and fields[9] in inodes:
                    count += 1
    return count


def test_metrics_off_by_default_opens_no_port(broker):
    assert "prometheus" not in broker.ports
    assert listening_sockets(broker.pid) == 1  # the PLAINTEXT listener only


def test_scrape_after_a_known_workload(broker_factory):
    broker = broker_factory(ON)
    port = broker.ports["prometheus"]
    assert listening_sockets(broker.pid) == 2
    topic, group, n = "m-topic", "m-group", 200
    create_topic(broker.bootstrap, topic, 1)
    earliest(broker, group)
    alter_group_config(admin_client(broker.bootstrap), group, "errors.deadletterqueue.topic.name",
           "dlq.m-topic")
    delivered = produce_all(broker.bootstrap, topic, [f"v{i}".encode() for i in range(n)], **{"batch.size": 2000})
    assert len(delivered) == n

    # One share consumer: accept offsets < 150, reject 150-169, leave 170-199 acquired and unacknowledged.
    c = consumer(broker, group, topic, "explicit")
    try:
        got: dict[int, int] = {}
        end = time.monotonic() + 60
        while len(got) < n and time.monotonic() < end:
            for m in messages(c):
                got[m.offset()] = m.delivery_count()
                if m.offset() < 170:
                    c.acknowledge(m, AcknowledgeType.ACCEPT if m.offset() < 150 else AcknowledgeType.REJECT)
            c.commit_sync()
        assert sorted(got) == list(range(n))
        assert set(got.values()) == {1}

        # An admin call that fails: the topic exists (CreateTopics answers TOPIC_ALREADY_EXISTS).
        admin = admin_client(broker.bootstrap)
        with pytest.raises(KafkaException):
            admin.create_topics([NewTopic(topic, num_partitions=1)])[topic].result(timeout=30)

        labels = {"group": group, "topic": topic, "partition": "0"}
        deadline = time.monotonic() + 30
        while True:  # the commit's acknowledgements and the loop watchdog's first samples may trail a little
            s = scrape(port)
            ready = (value(s, "shoal_share_partition_acknowledged_records_total", **labels) == 150
                     and value(s, "shoal_share_partition_archived_records_total", **labels) == 20
                     and (value(s, "shoal_event_loop_lag_seconds_count") or 0) > 0)
            if ready or time.monotonic() > deadline:
                break
            time.sleep(0.2)
    finally:
        c.close()

    # Per API: requests, errors, latency.
    assert value(s, "shoal_requests_total", api="Produce") >= 1
    assert value(s, "shoal_requests_total", api="CreateTopics") >= 2
    assert value(s, "shoal_requests_total", api="ShareFetch") >= 1
    assert value(s, "shoal_requests_total", api="ShareGroupHeartbeat") >= 1
    assert value(s, "shoal_requests_total", api="IncrementalAlterConfigs") >= 1
    assert value(s, "shoal_request_errors_total", api="CreateTopics", error="TOPIC_ALREADY_EXISTS") == 1
    assert value(s, "shoal_request_errors_total", api="Produce", error="UNKNOWN_SERVER_ERROR") is None
    for api in ("Produce", "ShareFetch", "CreateTopics"):
        count = value(s, "shoal_request_latency_seconds_count", api=api)
        # Counted when the response is ready: at most the requests received, and every one but in-flight ones.
        assert 1 <= count <= value(s, "shoal_requests_total", api=api)
        assert value(s, "shoal_request_latency_seconds_bucket", api=api, le="+Inf") == count
        assert value(s, "shoal_request_latency_seconds_sum", api=api) > 0

    # Per partition log.
    part = {"topic": topic, "partition": "0"}
    assert value(s, "shoal_log_end_offset", **part) == n
    assert value(s, "shoal_log_start_offset", **part) == 0
    assert value(s, "shoal_log_size_bytes", **part) > n
    assert value(s, "shoal_log_segments", **part) == 1

    # The share-partition: 150 accepted, 20 archived, 30 still acquired, nothing expired.
    assert value(s, "shoal_share_partition_acquisitions_total", **labels) == n
    assert value(s, "shoal_share_partition_acknowledged_records_total", **labels) == 150
    assert value(s, "shoal_share_partition_archived_records_total", **labels) == 20
    assert value(s, "shoal_share_partition_lock_expiries_total", **labels) == 0
    assert value(s, "shoal_share_partition_start_offset", **labels) == 170
    assert value(s, "shoal_share_partition_in_flight_records", **labels) == 30
    assert value(s, "shoal_share_partition_acquired_records", **labels) == 30
    assert value(s, "shoal_share_partition_available_records", **labels) == 0
    assert value(s, "shoal_share_partition_lag", **labels) == 30

    # The share group had one member while the consumer was open.
    assert value(s, "shoal_group_members", group=group, type="share") == 1
    assert value(s, "shoal_group_rebalances_total", group=group, type="share") >= 1
    assert value(s, "shoal_groups", type="share", state="Stable") >= 1

    # Connections and share sessions while the consumer was open; the 20 rejected records in the group's DLQ.
    assert value(s, "shoal_connections", listener="PLAINTEXT") >= 1
    assert value(s, "shoal_share_sessions") >= 1
    assert value(s, "shoal_share_dlq_records_total", group=group) == 20
    assert value(s, "shoal_share_dlq_skipped_records_total", group=group) is None
    assert value(s, "shoal_log_end_offset", topic="dlq.m-topic", partition="0") == 20

    # The process: memory and descriptors (prometheus-client's process collector, in this broker's registry).
    assert value(s, "process_resident_memory_bytes") > 0
    assert value(s, "process_open_fds") > 0

    # The event-loop watchdog runs.
    assert value(s, "shoal_event_loop_lag_seconds_count") > 0
    assert value(s, "shoal_event_loop_stalls_total") is not None

    # After the consumer left: no member, its 30 records released (available again, not counted as expiries).
    deadline = time.monotonic() + 30
    while True:
        s = scrape(port)
        if value(s, "shoal_group_members", group=group, type="share") == 0 or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    assert value(s, "shoal_group_members", group=group, type="share") == 0
    assert value(s, "shoal_share_partition_acquired_records", **labels) == 0
    assert value(s, "shoal_share_partition_available_records", **labels) == 30
    assert value(s, "shoal_share_partition_lock_expiries_total", **labels) == 0


def test_endpoint_answers_errors_and_openmetrics(broker_factory):
    broker = broker_factory({"metrics.prometheus.listener": "127.0.0.1:0"})
    port = broker.ports["prometheus"]
    request = urllib.request.Request(f"http://127.0.0.1:{port}/metrics",
                                     headers={"Accept": "application/openmetrics-text; version=1.0.0"})
    with urllib.request.urlopen(request, timeout=30) as response:
        assert response.headers["Content-Type"].startswith("application/openmetrics-text")
        assert response.read().decode().rstrip().endswith("# EOF")
    with pytest.raises(urllib.error.HTTPError) as err:
        urllib.request.urlopen(f"http://127.0.0.1:{port}/nothing", timeout=30)
    assert err.value.code == 404
    with pytest.raises(urllib.error.HTTPError) as err:
        urllib.request.urlopen(urllib.request.Request(f"http://127.0.0.1:{port}/metrics", data=b"x"), timeout=30)
    assert err.value.code == 405


def test_group_members_and_rebalances_of_classic_and_consumer_groups(broker_factory):
    from confluent_kafka import Consumer

    broker = broker_factory(ON)
    port = broker.ports["prometheus"]
    create_topic(broker.bootstrap, "m-groups", 2)
    produce_all(broker.bootstrap, "m-groups", [b"x"] * 10, partition=None)
    consumers = {kind: Consumer({"bootstrap.servers": broker.bootstrap, "group.id": f"g-{kind}",
                                 "group.protocol": kind, "auto.offset.reset": "earliest"})
                 for kind in ("classic", "consumer")}
    try:
        for c in consumers.values():
            c.subscribe(["m-groups"])
        for kind, c in consumers.items():  # a record read: the member joined and got an assignment
            end = time.monotonic() + 60
            while time.monotonic() < end:
                m = c.poll(0.5)
                if m is not None and m.error() is None:
                    break
            else:
                raise AssertionError(f"{kind} consumer read nothing")
        deadline = time.monotonic() + 30
        while True:  # a consumer-group member is Stable once a heartbeat acknowledged its assignment
            s = scrape(port)
            if all(value(s, "shoal_groups", type=kind, state="Stable") == 1 for kind in consumers) \
                    or time.monotonic() > deadline:
                break
            time.sleep(0.2)
        for kind in consumers:
            assert value(s, "shoal_group_members", group=f"g-{kind}", type=kind) == 1
            assert value(s, "shoal_group_rebalances_total", group=f"g-{kind}", type=kind) >= 1
            assert value(s, "shoal_groups", type=kind, state="Stable") == 1
        assert value(s, "shoal_requests_total", api="JoinGroup") >= 1
        assert value(s, "shoal_requests_total", api="ConsumerGroupHeartbeat") >= 1
    finally:
        for c in consumers.values():
            c.close()
    deadline = time.monotonic() + 30
    while True:  # both left: no member
        s = scrape(port)
        members = [value(s, "shoal_group_members", group=f"g-{kind}", type=kind) for kind in consumers]
        if members == [0, 0] or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    assert members == [0, 0]


def _frame(api_key: int, version: int, body: bytes = b"", correlation_id: int = 1) -> bytes:
    """A request frame with the header of that version and any body."""
    return encode_request(RequestHeader(api_key, version, correlation_id, "raw"), body)


def _closed_after(port: int, data: bytes) -> bytes:
    """Send `data` and read until the broker closes the connection; what it answered before closing."""
    with socket.create_connection(("127.0.0.1", port), timeout=30) as sock:
        sock.sendall(data)
        got = b""
        while chunk := sock.recv(65536):
            got += chunk
        return got


def test_requests_refused_before_their_handler_are_counted(broker_factory):
    """Kafka's RequestMetrics count a request by its API whatever becomes of it: unsupported versions (ApiVersions is
    answered UNSUPPORTED_VERSION, others close the connection), unknown or unserved APIs, malformed headers or
    bodies, frames over socket.request.max.bytes, and requests the SASL authenticator answers or refuses."""
    from tests.helpers.sasl import PLAIN_JAAS

    broker = broker_factory({**ON, "listeners": "PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0",
                             "sasl.enabled.mechanisms": "PLAIN", "socket.request.max.bytes": "1048576",
                             "listener.name.sasl_plaintext.plain.sasl.jaas.config": PLAIN_JAAS})
    port, sasl_port = broker.ports["PLAINTEXT"], broker.ports["SASL_PLAINTEXT"]
    with RawClient(port) as raw:  # ApiVersions v99: answered (v0 layout), the connection stays
        answer = raw.receive(18, 0, _send_raw(raw, _frame(18, 99)))
        assert answer.error_code == ErrorCode.UNSUPPORTED_VERSION
        assert raw.call(18, 3, {"client_software_name": "raw", "client_software_version": "1"}).error_code == 0
    assert _closed_after(port, _frame(3, 99)) == b""  # Metadata v99
    assert _closed_after(port, _frame(30_000, 0)) == b""  # no such API
    assert _closed_after(port, _frame(75, 0)) == b""  # DescribeTopicPartitions: Kafka's, not served here
    assert _closed_after(port, _frame(3, 12, b"\xff\xff\xff")) == b""  # malformed Metadata body
    assert _closed_after(port, struct.pack(">ihh", 2_000_000, 0, 9)) == b""  # Produce frame over the limit
    assert _closed_after(sasl_port, _frame(3, 12, b"\x01\x00")) == b""  # Metadata before SASL authentication
    with RawClient(sasl_port) as raw:
        assert raw.call(17, 1, {"mechanism": "GSSAPI"}).error_code == ErrorCode.UNSUPPORTED_SASL_MECHANISM

    s = scrape(broker.ports["prometheus"])
    expected = {
        ("ApiVersions", "UNSUPPORTED_VERSION"): 1, ("Metadata", "UNSUPPORTED_VERSION"): 1,
        ("unknown", "INVALID_REQUEST"): 1, ("DescribeTopicPartitions", "INVALID_REQUEST"): 1,
        ("Metadata", "INVALID_REQUEST"): 1, ("Metadata", "ILLEGAL_SASL_STATE"): 1,
        ("SaslHandshake", "UNSUPPORTED_SASL_MECHANISM"): 1,
    }
    for (api, error), count in expected.items():
        assert value(s, "shoal_request_errors_total", api=api, error=error) == count, (api, error)
    assert value(s, "shoal_requests_total", api="ApiVersions") == 2
    assert value(s, "shoal_requests_total", api="Metadata") == 3
    assert value(s, "shoal_requests_total", api="unknown") == 1
    assert value(s, "shoal_requests_total", api="DescribeTopicPartitions") == 1
    assert value(s, "shoal_requests_total", api="Produce") == 1  # the frame too large: no error code answered
    assert value(s, "shoal_request_errors_total", api="Produce", error="INVALID_REQUEST") is None
    assert value(s, "shoal_requests_total", api="SaslHandshake") == 1


def _send_raw(raw: RawClient, frame: bytes) -> int:
    raw.sock.sendall(frame)
    return 1
