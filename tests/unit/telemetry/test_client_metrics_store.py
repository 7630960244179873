"""OTLP payload decoding (every codec) and the store of pushed metrics (gauges, delta counters, bounds)."""

from __future__ import annotations

import uuid

import pytest

from broker.telemetry import otlp
from broker.telemetry.manager import ClientInstance, PayloadError
from broker.telemetry.store import ClientMetricsStore
from protocol import compression
from tests.helpers.telemetry import LAG, SENT
from tests.helpers.telemetry import metrics_payload as payload


@pytest.mark.parametrize("codec", [compression.NONE, compression.GZIP, compression.SNAPPY, compression.LZ4,
                                   compression.ZSTD])
def test_decode_every_codec(codec):
    raw = payload()
    data = raw if codec == compression.NONE else compression.compress(codec, raw)
    points = otlp.decode(codec, data)
    assert points == [
        otlp.Point(otlp.GAUGE, LAG, "partition=0,topic=t", 5.0, False),
        otlp.Point(otlp.COUNTER, SENT, "", 3.0, True),
    ]


@pytest.mark.parametrize("codec, data", [(compression.NONE, b"\xff\xff\xff"), (compression.ZSTD, b"not zstd"),
                                         (compression.GZIP, b"\x1f\x8b garbage")])
def test_undecodable(codec, data):
    with pytest.raises(PayloadError):
        otlp.decode(codec, data)


def instance(interval_ms: int = 1000) -> ClientInstance:
    return ClientInstance(uuid.UUID(int=7), {"client_id": "c", "client_software_name": "librdkafka",
                                             "client_software_version": "2"}, 1, 0, ("*",), interval_ms, 1)


def test_gauges_keep_the_last_value_deltas_add_up_and_stale_clients_go():
    now = [0]
    store = ClientMetricsStore(lambda: now[0])
    store.record(instance(), otlp.decode(0, payload(lag=5, sent=3)), 0)
    store.record(instance(), otlp.decode(0, payload(lag=2, sent=4)), 1000)
    series = store.clients[uuid.UUID(int=7)]
    assert series.labels.client_id == "c"
    assert series.gauges[(LAG, "partition=0,topic=t")] == 2
    assert series.counters[(SENT, "")] == 7
    store.expire(1000 + 3000)
    assert uuid.UUID(int=7) in store.clients
    store.expire(1000 + 3001)  # last push older than 3 intervals
    assert store.clients == {}


def test_series_per_client_and_in_all_are_bounded():
    store = ClientMetricsStore(lambda: 0, max_series=1)
    store.record(instance(), otlp.decode(0, payload()), 0)
    series = store.clients[uuid.UUID(int=7)]
    assert len(series.gauges) + len(series.counters) == 1
    assert series.dropped == 1
    store = ClientMetricsStore(lambda: 0, max_total=3)
    other = instance()
    other.instance_id = uuid.UUID(int=8)
    store.record(instance(), otlp.decode(0, payload()), 0)
    store.record(other, otlp.decode(0, payload()), 0)
    assert store.total == 3 and store.clients[other.instance_id].dropped == 1
    store.forget(uuid.UUID(int=7))
    assert store.total == 1


async def test_runtime_decodes_off_the_loop_and_refuses_undecodable_payloads():
    from broker.telemetry.manager import ClientMetricsManager
    from broker.telemetry.runtime import ClientTelemetry
    from protocol.errors import ErrorCode

    now = [0]
    store = ClientMetricsStore(lambda: now[0])
    manager = ClientMetricsManager(max_bytes=10_000, clock=lambda: now[0], receiver=store)
    manager.update_subscription("all", {"metrics": "*", "interval.ms": "100"})
    telemetry = ClientTelemetry(manager, store, lambda: now[0])
    got = manager.get_subscriptions(uuid.UUID(int=0), {}, 1).instance
    now[0] += 1
    answer = await telemetry.push(got.instance_id, got.subscription_id, False, compression.ZSTD,
                                  compression.compress(compression.ZSTD, payload(lag=9)), {}, 1)
    assert answer.error == ErrorCode.NONE
    assert store.clients[got.instance_id].gauges[(LAG, "partition=0,topic=t")] == 9
    now[0] += 100
    answer = await telemetry.push(got.instance_id, got.subscription_id, False, 0, b"\xff\xff", {}, 1)
    assert answer.error == ErrorCode.INVALID_RECORD
    now[0] += 100
    assert (await telemetry.push(got.instance_id, got.subscription_id, True, 0, b"", {}, 1)).error == ErrorCode.NONE
    assert got.instance_id not in store.clients  # terminated: its series are gone


def test_a_real_librdkafka_push_decodes():
    """The PushTelemetry frame librdkafka 2.16 sent to tools/capture_requests.py (zstd, every metric)."""
    from pathlib import Path

    from protocol.codec import request_codec
    from protocol.framing import decode_request_header

    fixture = Path(__file__).parents[1] / "protocol" / "fixtures" / "confluent-PushTelemetry-v0.hex"
    frame = bytes.fromhex(fixture.read_text().strip())
    _, offset = decode_request_header(frame)
    body = request_codec(72, 0).decode(frame[offset:])
    assert body.compression_type == compression.ZSTD
    points = otlp.decode(body.compression_type, bytes(body.metrics))
    names = {p.name for p in points}
    assert "org.apache.kafka.producer.node.request.latency.avg" in names
    assert otlp.Point(otlp.COUNTER, "org.apache.kafka.producer.connection.creation.total", "", 0.0, True) in points
