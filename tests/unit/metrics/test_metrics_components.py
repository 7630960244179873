"""Metrics: the scrape-time collectors on real components, the loop-lag watchdog, the HTTP endpoint in process,
and one registry per broker."""

from __future__ import annotations

import asyncio
import gzip
import threading
import time
import uuid
from dataclasses import dataclass
from typing import Any

import structlog.testing
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.parser import text_string_to_metric_families

from broker.context import ConnectionInfo
from broker.groups.classic.group import ClassicGroup, ClassicMember, ClassicState
from broker.groups.consumer.group import ConsumerGroup, ConsumerMember
from broker.groups.coordinator import GroupCoordinator
from broker.groups.share.group import ShareGroup, ShareMember
from broker.log import LogManager
from broker.metrics.collectors import (
    GroupCollector,
    LogCollector,
    LoopStateCollector,
    ServerCollector,
    SharePartitionCollector,
    TransactionCollector,
)
from broker.metrics.http import MetricsEndpoint
from broker.metrics.loop_lag import LoopLagWatchdog
from broker.share_partition.inflight import ACK_ACCEPT, ACK_REJECT, ShareInFlight
from broker.share_partition.partition import SharePartition
from tests.helpers.record_batches import batch


# Small typed stand-ins for what a collector reads of a component.
@dataclass
class PartitionEnd:
    high_watermark: int


@dataclass
class Logs:
    high_watermark: int

    def find(self, topic: str, partition: int) -> PartitionEnd:
        return PartitionEnd(self.high_watermark)


@dataclass
class Leader:
    partitions: list[SharePartition]

    def loaded_partitions(self) -> list[SharePartition]:
        return list(self.partitions)


@dataclass
class Runtime:
    """A coordinator runtime as the collectors see it: the sans-IO coordinator it hosts."""

    coordinator: Any


@dataclass
class Connection:
    info: ConnectionInfo


@dataclass
class Server:
    connections: list[Connection]


@dataclass
class DlqCounts:
    written: dict[str, int]
    skipped: dict[str, int]


@dataclass
class SessionsAndDlq:
    """The share-partition leader's share sessions and dead-letter counts."""

    sessions: list[int]
    dlq: DlqCounts


@dataclass
class Unstable:
    partitions: list[tuple[str, int, int, int]]

    def unstable_partitions(self) -> list[tuple[str, int, int, int]]:
        return list(self.partitions)


def registry_with(*collectors) -> CollectorRegistry:
    registry = CollectorRegistry()
    for collector in collectors:
        registry.register(collector)
    return registry


def get(registry: CollectorRegistry, name: str, **labels: str) -> float | None:
    return registry.get_sample_value(name, labels)


def test_log_collector_reads_every_partition_log(tmp_path):
    logs = LogManager(tmp_path)
    logs.start()
    try:
        a = logs.get_or_create("orders", 0)
        logs.get_or_create("orders", 1)
        a.append(batch(3))
        a.append(batch(2))
        a.delete_records_before(1)
        registry = registry_with(LogCollector(logs))
        assert get(registry, "shoal_log_end_offset", topic="orders", partition="0") == 5
        assert get(registry, "shoal_log_start_offset", topic="orders", partition="0") == 1
        assert get(registry, "shoal_log_size_bytes", topic="orders", partition="0") == a.size_bytes > 0
        assert get(registry, "shoal_log_segments", topic="orders", partition="0") == 1
        assert get(registry, "shoal_log_end_offset", topic="orders", partition="1") == 0
        a.append(batch(1))  # read at scrape time: a later scrape sees the new end
        assert get(registry, "shoal_log_end_offset", topic="orders", partition="0") == 6
    finally:
        logs.close()


def test_collectors_export_nothing_without_their_component():
    registry = registry_with(LogCollector(None), SharePartitionCollector(None, None), GroupCollector(None))
    families = list(registry.collect())
    assert families and all(not f.samples for f in families)
    sessions = registry_with(ServerCollector(None, None)).get_sample_value("shoal_share_sessions")
    assert sessions == 0


def test_share_partition_collector_follows_acquire_ack_and_expiry():
    inflight = ShareInFlight(0, lock_duration_ms=1000)
    acquired = inflight.acquire("m1", [(0, 9), (10, 19)], 20, now_ms=0)
    assert [(r.first_offset, r.last_offset) for r in acquired] == [(0, 19)]
    assert inflight.acknowledge("m1", [(0, 4, [ACK_ACCEPT]), (5, 6, [ACK_REJECT])], now_ms=10) == [0, 0]
    sp = SharePartition(("g", uuid.uuid4(), 0), "t", inflight)
    registry = registry_with(SharePartitionCollector(Leader([sp]), Logs(high_watermark=25)))
    labels = {"group": "g", "topic": "t", "partition": "0"}
    assert get(registry, "shoal_share_partition_acquisitions_total", **labels) == 20
    assert get(registry, "shoal_share_partition_acknowledged_records_total", **labels) == 5
    assert get(registry, "shoal_share_partition_archived_records_total", **labels) == 2
    assert get(registry, "shoal_share_partition_start_offset", **labels) == 7
    assert get(registry, "shoal_share_partition_in_flight_records", **labels) == 13
    assert get(registry, "shoal_share_partition_acquired_records", **labels) == 13
    assert get(registry, "shoal_share_partition_lag", **labels) == 25 - 7
    assert get(registry, "shoal_share_partition_lock_expiries_total", **labels) == 0

    assert inflight.expire_locks(now_ms=5000) == 13  # the rest's locks expire: available again
    assert get(registry, "shoal_share_partition_lock_expiries_total", **labels) == 13
    assert get(registry, "shoal_share_partition_acquired_records", **labels) == 0
    assert get(registry, "shoal_share_partition_available_records", **labels) == 13
    inflight.acquire("m2", [], 3, now_ms=6000)  # redelivery counts as acquisitions too
    assert get(registry, "shoal_share_partition_acquisitions_total", **labels) == 23
    assert inflight.acknowledge("m2", [(7, 9, [ACK_ACCEPT])], now_ms=6001) == [0]
    assert get(registry, "shoal_share_partition_lag", **labels) == 25 - 10  # accepted prefix moved SPSO on


def test_group_collector_counts_members_and_rebalances_of_every_type():
    classic = ClassicGroup("c", 0, state=ClassicState.STABLE, generation_id=4)
    for mid in ("a", "b"):
        classic.members[mid] = ClassicMember(mid, None, "client", "/127.0.0.1", 1000, 1000, "consumer", [])
    consumer = ConsumerGroup("k", group_epoch=7, assignment_epoch=7,
                             members={"x": ConsumerMember("x", member_epoch=7)})
    share = ShareGroup("s", group_epoch=3, members={m: ShareMember(m, member_epoch=3) for m in ("p", "q", "r")})
    empty_share = ShareGroup("s2", group_epoch=2)
    coordinator = GroupCoordinator(topic_info=lambda name: None)
    coordinator.classic.groups["c"] = classic
    coordinator.consumer.groups["k"] = consumer
    coordinator.share.groups.update({"s": share, "s2": empty_share})
    registry = registry_with(GroupCollector(Runtime(coordinator)))
    assert get(registry, "shoal_group_members", group="c", type="classic") == 2
    assert get(registry, "shoal_group_members", group="k", type="consumer") == 1
    assert get(registry, "shoal_group_members", group="s", type="share") == 3
    assert get(registry, "shoal_group_members", group="s2", type="share") == 0
    assert get(registry, "shoal_group_rebalances_total", group="c", type="classic") == 4
    assert get(registry, "shoal_group_rebalances_total", group="k", type="consumer") == 7
    assert get(registry, "shoal_group_rebalances_total", group="s", type="share") == 3
    assert get(registry, "shoal_groups", type="share", state="Stable") == 1
    assert get(registry, "shoal_groups", type="share", state="Empty") == 1
    assert get(registry, "shoal_groups", type="classic", state="Stable") == 1
    assert get(registry, "shoal_groups", type="consumer", state=consumer.state().value) == 1


def test_server_collector_counts_connections_sessions_and_dlq_records():
    server = Server([Connection(ConnectionInfo(listener=name)) for name in ("PLAINTEXT", "PLAINTEXT", "SASL_SSL")])
    manager = SessionsAndDlq(sessions=[1, 2, 3], dlq=DlqCounts(written={"g": 4}, skipped={"h": 1}))
    registry = registry_with(ServerCollector(server, manager))
    assert get(registry, "shoal_connections", listener="PLAINTEXT") == 2
    assert get(registry, "shoal_connections", listener="SASL_SSL") == 1
    assert get(registry, "shoal_share_sessions") == 3
    assert get(registry, "shoal_share_dlq_records_total", group="g") == 4
    assert get(registry, "shoal_share_dlq_skipped_records_total", group="h") == 1


def test_family_names_are_unique_in_the_exposition():
    """A gauge and a counter sharing a base name would be two families of one name (invalid exposition)."""
    registry = registry_with(LogCollector(None), SharePartitionCollector(None, None), GroupCollector(None),
                             ServerCollector(None, None), TransactionCollector(None, None))
    LoopLagWatchdog(registry, warn_s=0.1)
    text = generate_latest(registry).decode()
    names = [family.name for family in text_string_to_metric_families(text)]
    assert len(names) == len(set(names)), sorted(names)


def test_watchdog_observe_counts_and_rate_limits_warnings():
    now = [100.0]
    registry = CollectorRegistry()
    dog = LoopLagWatchdog(registry, warn_s=0.2, warn_every_s=10, clock=lambda: now[0])
    with structlog.testing.capture_logs() as logs:
        dog.observe(0.001)
        dog.observe(0.25)  # warning
        now[0] += 1
        dog.observe(0.5)  # within 10 s of the warning: debug only
        now[0] += 20
        dog.observe(0.3)  # warning again, reporting the one it hid
    warnings = [e for e in logs if e["log_level"] == "warning"]
    assert [w["lag_ms"] for w in warnings] == [250.0, 300.0]
    assert warnings[1]["stalls_since_last_warning"] == 1
    assert warnings[1]["worst_since_last_warning_ms"] == 500.0
    assert [e["lag_ms"] for e in logs if e["log_level"] == "debug"] == [500.0]
    assert registry.get_sample_value("shoal_event_loop_stalls_total") == 3
    assert registry.get_sample_value("shoal_event_loop_lag_seconds_count") == 4
    assert dog.worst_s == 0.5


async def test_watchdog_sees_a_blocked_loop():
    registry = CollectorRegistry()
    dog = LoopLagWatchdog(registry, warn_s=0.1, interval_s=0.01)
    task = asyncio.get_running_loop().create_task(dog.run())
    try:
        deadline = time.monotonic() + 30
        while (registry.get_sample_value("shoal_event_loop_lag_seconds_count") or 0) < 3:
            assert time.monotonic() < deadline
            await asyncio.sleep(0.01)
        with structlog.testing.capture_logs() as logs:
            time.sleep(0.4)  # hold the loop, as a blocking call would
            deadline = time.monotonic() + 30
            while not registry.get_sample_value("shoal_event_loop_stalls_total"):
                assert time.monotonic() < deadline
                await asyncio.sleep(0.01)
        assert dog.worst_s >= 0.1
        assert any(e["log_level"] == "warning" and e["lag_ms"] >= 100 for e in logs)
        # The stall lands in a bucket at or above the threshold.
        assert registry.get_sample_value("shoal_event_loop_lag_seconds_bucket", {"le": "0.1"}) < \
            registry.get_sample_value("shoal_event_loop_lag_seconds_count")
    finally:
        task.cancel()


async def test_endpoint_serves_the_registry_over_http():
    registry = CollectorRegistry()
    dog = LoopLagWatchdog(registry, warn_s=0.1)
    dog.observe(0.002)
    endpoint = MetricsEndpoint(registry, "127.0.0.1", 0)
    port = await endpoint.start()
    try:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(b"GET /metrics HTTP/1.1\r\nHost: x\r\nAccept-Encoding: identity\r\nConnection: close\r\n\r\n")
        await writer.drain()
        response = await asyncio.wait_for(reader.read(), 30)
        writer.close()
        head, _, body = response.partition(b"\r\n\r\n")
        assert head.startswith(b"HTTP/1.1 200 OK")
        assert b"Content-Length: %d" % len(body) in head
        assert b"shoal_event_loop_lag_seconds_count 1.0" in body
    finally:
        await endpoint.close()


async def test_endpoint_refuses_garbage_and_survives_it():
    endpoint = MetricsEndpoint(CollectorRegistry(), "127.0.0.1", 0)
    port = await endpoint.start()
    try:
        async def exchange(data: bytes) -> bytes:
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
            try:
                writer.write(data)
                await writer.drain()
                return await asyncio.wait_for(reader.read(), 30)
            except ConnectionResetError:  # closed with our bytes unread: the kernel may reset instead
                return b""
            finally:
                writer.close()

        def status(response: bytes) -> bytes:
            return response.split(b" ")[1] if response else b""  # b"": reset, our bytes unread

        assert status(await exchange(b"HELLO\r\n\r\n")) == b"400"
        assert status(await exchange(b"GET /metrics HTTP/1.1\r\nX: " + b"x" * 20_000 + b"\r\n\r\n")) in (
            b"400", b"431", b"")
        assert (await exchange(b"GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")).startswith(
            b"HTTP/1.1 200 OK")
    finally:
        await endpoint.close()


async def test_scrape_reads_state_on_the_loop_and_builds_in_a_thread():
    """Components are read on the event loop (the only thread that mutates them); families are built elsewhere."""
    seen: dict[str, int] = {}

    class Probe(LoopStateCollector):
        def read(self):
            seen["read"] = threading.get_ident()
            return [7]

        def build(self, rows):
            seen["build"] = threading.get_ident()
            family = GaugeMetricFamily("probe", "probe")
            for value in rows:
                family.add_metric([], value)
            yield family

    registry = CollectorRegistry()
    probe = Probe()
    registry.register(probe)
    endpoint = MetricsEndpoint(registry, "127.0.0.1", 0, loop_collectors=[probe])
    body, headers = await endpoint.render()
    assert b"probe 7.0" in body
    assert seen["read"] == threading.get_ident()
    assert seen["build"] != threading.get_ident()
    body, headers = await endpoint.render(accept_encoding="gzip")
    assert headers["Content-Encoding"] == "gzip"
    assert b"probe 7.0" in gzip.decompress(body)


def test_two_brokers_in_one_process_have_their_own_registries(tmp_path):
    """Same metric names in both (prometheus-client's global registry would refuse the second), none global."""
    from prometheus_client import REGISTRY

    from broker.app import Broker
    from broker.config import BrokerConfig
    from broker.metrics.service import MetricsService

    brokers = [Broker(BrokerConfig({"log.dirs": str(tmp_path / name)})) for name in "ab"]
    services = [MetricsService(b.config, b.router.request_metrics.registry, b.spawn, logs=None, share_partitions=None,
                               group_coordinator=None, server=b.server, transaction_coordinator=None, replicas=None)
                for b in brokers]
    assert services[0].registry is not services[1].registry
    assert all(s.registry is b.router.request_metrics.registry for s, b in zip(services, brokers, strict=True))
    assert all(s.endpoint is None and s.port is None for s in services)  # off by default
    assert REGISTRY.get_sample_value("shoal_event_loop_stalls_total") is None


def test_transaction_collector_counts_states_and_unstable_partitions():
    from broker.txn.coordinator import TransactionCoordinator

    coordinator = TransactionCoordinator(clock=lambda: 1_000)
    for tid in ("a", "b", "c"):
        r = coordinator.init_producer_id(tid, 60_000, new_producer_id=ord(tid))
        assert r.error == 0
    coordinator.add_partitions("a", ord("a"), 0, [("t", 0)])
    coordinator.add_partitions("b", ord("b"), 0, [("t", 1)])
    coordinator.end_txn("b", ord("b"), 0, commit=True)  # PrepareCommit until its markers are written
    registry = registry_with(TransactionCollector(Runtime(coordinator), Unstable([("t", 0, 7, 1)])))
    assert get(registry, "shoal_transactional_ids") == 3
    assert get(registry, "shoal_transactions_ongoing") == 2
    assert get(registry, "shoal_transactions", state="Ongoing") == 1
    assert get(registry, "shoal_transactions", state="PrepareCommit") == 1
    assert get(registry, "shoal_transactions", state="Empty") == 1
    assert get(registry, "shoal_partition_lso_lag", topic="t", partition="0") == 7
    assert get(registry, "shoal_partition_open_transactions", topic="t", partition="0") == 1
    assert get(registry, "shoal_partition_lso_lag", topic="t", partition="1") is None
    empty = registry_with(TransactionCollector(None, None))
    assert get(empty, "shoal_transactional_ids") == 0 and get(empty, "shoal_transactions", state="Empty") is None
