"""Pipelined acks=all Produce requests share one fsync (group commit), answered in order.

librdkafka pipelines up to `max.in.flight` (1 000 000 by default) Produce requests on one connection. The broker
must take every pipelined request it may dispatch at once, so they all append before the flush they share;
dispatched one per loop iteration, each got its own flush and a busy broker fell ever further behind. Counted
with the broker's flush counters (shoal_log_flushes / shoal_log_flush_waits), not with a clock.
"""

from __future__ import annotations

import pytest
from confluent_kafka import Producer

from protocol.codec import request_codec
from protocol.framing import RequestHeader, encode_request
from tests.helpers.broker_process import BrokerProcess, start_broker
from tests.helpers.prometheus_scrape import scrape, value
from tests.helpers.raw_client import RawClient
from tests.helpers.raw_requests import PRODUCE, create_topic, produce
from tests.helpers.record_batches import batch

pytestmark = pytest.mark.integration

PIPELINED = 50  # below queued.max.requests (100): all may be in flight at once


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory):
    tmp = tmp_path_factory.mktemp("group-commit")
    proc = start_broker(tmp, {"metrics.prometheus.listener": "127.0.0.1:0"})
    try:
        yield proc
    finally:
        proc.stop()


def flush_counters(broker: BrokerProcess) -> tuple[float, float]:
    """(flushes, flush waits) made so far."""
    samples = scrape(broker.ports["prometheus"])
    flushes, waits = value(samples, "shoal_log_flushes_total"), value(samples, "shoal_log_flush_waits_total")
    assert flushes is not None and waits is not None
    return flushes, waits


def produce_frame(correlation_id: int, topic: str, records: bytes, acks: int = -1) -> bytes:
    body = {"acks": acks, "timeout_ms": 5000,
            "topic_data": [{"name": topic, "partition_data": [{"index": 0, "records": records}]}]}
    return encode_request(RequestHeader(PRODUCE, 9, correlation_id, "pipeline"), request_codec(PRODUCE, 9).encode(body))


def test_pipelined_produce_requests_share_one_flush(broker: BrokerProcess) -> None:
    with RawClient(broker.port) as client:
        create_topic(client, "pipelined")
        first = produce(client, "pipelined", batch(1))  # the partition's log and first flush are behind us
        assert first.error_code == 0
        flushes, waits = flush_counters(broker)
        # One write holding every request (one segment on loopback: the broker reads them in one go).
        client.sock.sendall(b"".join(produce_frame(100 + i, "pipelined", batch(2)) for i in range(PIPELINED)))
        offsets = []
        for i in range(PIPELINED):
            part = client.receive(PRODUCE, 9, 100 + i).responses[0].partition_responses[0]  # in request order
            assert part.error_code == 0, part
            offsets.append(part.base_offset)
        assert offsets == [1 + 2 * i for i in range(PIPELINED)]
        flushes_after, waits_after = flush_counters(broker)
    assert waits_after - waits == PIPELINED  # every request waited for a flush (acks=all)...
    # ...and all appended before the first one started, so one fsync answered them all. Dispatched one per loop
    # iteration, the first flush started after the first few appends: two or more.
    assert flushes_after - flushes == 1, (flushes_after - flushes, PIPELINED)


def test_librdkafka_default_in_flight_delivers_in_order(broker: BrokerProcess) -> None:
    """confluent-kafka with its default max.in.flight and linger 0: many requests in flight, dispatched together,
    every record acknowledged after a flush, at the offset of its place in the send order."""
    with RawClient(broker.port) as client:
        create_topic(client, "unbounded")
    flushes, waits = flush_counters(broker)
    producer = Producer({"bootstrap.servers": broker.bootstrap, "acks": "all", "linger.ms": 0})
    delivered: list[tuple[int, int]] = []

    def on_delivery(err, msg) -> None:
        assert err is None, err
        delivered.append((int(msg.value()), msg.offset()))

    for i in range(2_000):
        producer.produce("unbounded", str(i).encode(), partition=0, on_delivery=on_delivery)
        producer.poll(0)
    assert producer.flush(60) == 0
    assert delivered == [(i, i) for i in range(2_000)]
    flushes_after, waits_after = flush_counters(broker)
    assert waits_after - waits >= 1 and flushes_after - flushes >= 1
