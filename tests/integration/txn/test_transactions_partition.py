"""The partition side of transactions over TCP with raw requests: a transactional produce (verification by the
transaction coordinator off, so no AddPartitionsToTxn is needed and the markers are this test's), WriteTxnMarkers commit/abort, read_committed
Fetch bounded by the LSO with the aborted transactions, ListOffsets by isolation level, DescribeProducers, a
stale marker refused, kill -9 keeping the LSO and the aborted index, and a real read_committed consumer."""

from __future__ import annotations

import time

import pytest
from confluent_kafka import Consumer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from protocol import records as rec
from protocol.errors import ErrorCode
from tests.helpers.raw_client import RawClient

pytestmark = pytest.mark.integration

PRODUCE, FETCH, LIST_OFFSETS, INIT_PRODUCER_ID, WRITE_TXN_MARKERS, DESCRIBE_PRODUCERS = 0, 1, 2, 22, 27, 61
TOPIC = "txn-part"


def init_producer(raw: RawClient, txn_id: str) -> tuple[int, int]:
    r = raw.call(INIT_PRODUCER_ID, 4, {"transactional_id": txn_id, "transaction_timeout_ms": 60_000,
                                       "producer_id": -1, "producer_epoch": -1})
    assert r.error_code == 0, r
    return r.producer_id, r.producer_epoch


def produce(raw: RawClient, batch: bytes, txn_id: str | None):
    r = raw.call(PRODUCE, 9, {"transactional_id": txn_id, "acks": -1, "timeout_ms": 5000, "topic_data": [
        {"name": TOPIC, "partition_data": [{"index": 0, "records": batch}]}]})
    return r.responses[0].partition_responses[0]


def batch(values: list[bytes], pid: int = -1, epoch: int = -1, seq: int = -1, transactional: bool = False) -> bytes:
    return rec.build_batch([rec.Record(None, v) for v in values], producer_id=pid, producer_epoch=epoch,
                           base_sequence=seq, transactional=transactional)


def fetch_request(offset: int, committed: bool, wait_ms: int = 0) -> dict:
    return {"replica_id": -1, "max_wait_ms": wait_ms, "min_bytes": 1, "max_bytes": 1 << 20,
            "isolation_level": 1 if committed else 0, "session_id": 0, "session_epoch": -1,
            "topics": [{"topic": TOPIC, "partitions": [{"partition": 0, "fetch_offset": offset,
                                                       "partition_max_bytes": 1 << 20}]}]}


def fetch(raw: RawClient, offset: int, committed: bool):
    return raw.call(FETCH, 12, fetch_request(offset, committed)).responses[0].partitions[0]


def batches(records) -> list[tuple[int, int, bool]]:
    if not records:
        return []
    return [(h.base_offset, h.last_offset, h.is_control) for h in rec.validate_batches(records, allow_control=True)]


def latest(raw: RawClient, committed: bool) -> int:
    r = raw.call(LIST_OFFSETS, 7, {"replica_id": -1, "isolation_level": 1 if committed else 0, "topics": [
        {"name": TOPIC, "partitions": [{"partition_index": 0, "timestamp": -1}]}]})
    p = r.topics[0].partitions[0]
    assert p.error_code == 0
    return p.offset


def write_marker(raw: RawClient, pid: int, epoch: int, commit: bool, coordinator_epoch: int = 0) -> int:
    r = raw.call(WRITE_TXN_MARKERS, 1, {"markers": [
        {"producer_id": pid, "producer_epoch": epoch, "transaction_result": commit,
         "coordinator_epoch": coordinator_epoch, "topics": [{"name": TOPIC, "partition_indexes": [0]}]}]})
    return r.markers[0].topics[0].partitions[0].error_code


def producers(raw: RawClient) -> dict[int, object]:
    r = raw.call(DESCRIBE_PRODUCERS, 0, {"topics": [{"name": TOPIC, "partition_indexes": [0]}]})
    part = r.topics[0].partitions[0]
    assert part.error_code == 0, part
    return {p.producer_id: p for p in part.active_producers}


def test_transactions_on_a_partition(broker_factory) -> None:
    broker = broker_factory({"transaction.partition.verification.enable": "false"})
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic(TOPIC, num_partitions=1)])[TOPIC].result(timeout=30)
    with RawClient(broker.port) as raw:
        pid, epoch = init_producer(raw, "tx-1")
        r = produce(raw, batch([b"aborted-0", b"aborted-1"], pid, epoch, 0, transactional=True), "tx-1")
        assert (r.error_code, r.base_offset) == (0, 0)
        assert produce(raw, batch([b"plain-0"]), None).base_offset == 2
        # open transaction at 0: read_committed sees nothing, every answer carries the LSO
        part = fetch(raw, 0, committed=True)
        assert (part.high_watermark, part.last_stable_offset, batches(part.records)) == (3, 0, [])
        assert fetch(raw, 0, committed=False).last_stable_offset == 0
        assert (latest(raw, committed=True), latest(raw, committed=False)) == (0, 3)
        assert producers(raw)[pid].current_txn_start_offset == 0

        assert write_marker(raw, pid, epoch - 1, commit=False) == ErrorCode.INVALID_PRODUCER_EPOCH  # stale
        assert latest(raw, committed=True) == 0
        assert write_marker(raw, pid, epoch, commit=False) == 0  # abort: marker at 3
        part = fetch(raw, 0, committed=True)
        assert part.last_stable_offset == 4
        assert batches(part.records) == [(0, 1, False), (2, 2, False), (3, 3, True)]
        assert [(t.producer_id, t.first_offset) for t in part.aborted_transactions] == [(pid, 0)]
        assert fetch(raw, 0, committed=False).aborted_transactions is None

        # committed transaction at 4 (marker 5), then one left open at 6
        assert produce(raw, batch([b"committed-0"], pid, epoch, 2, transactional=True), "tx-1").base_offset == 4
        assert write_marker(raw, pid, epoch, commit=True) == 0
        assert produce(raw, batch([b"open-0"], pid, epoch, 3, transactional=True), "tx-1").base_offset == 6
        assert latest(raw, committed=True) == 6
        assert producers(raw)[pid].current_txn_start_offset == 6

    broker.kill9()
    broker.start()
    with RawClient(broker.port) as raw:
        assert (latest(raw, committed=True), latest(raw, committed=False)) == (6, 7)
        part = fetch(raw, 0, committed=True)
        assert part.last_stable_offset == 6
        assert batches(part.records)[-1] == (5, 5, True)  # never the open transaction's batch at 6
        assert [(t.producer_id, t.first_offset) for t in part.aborted_transactions] == [(pid, 0)]
        assert producers(raw)[pid].current_txn_start_offset == 6

        consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "rc", "enable.auto.commit": False,
                             "isolation.level": "read_committed"})
        try:
            consumer.assign([TopicPartition(TOPIC, 0, 0)])
            seen = consume(consumer, 2)
            assert seen == [(2, b"plain-0"), (4, b"committed-0")]

            # a read_committed long poll returns when the marker moves the LSO
            with RawClient(broker.port) as waiting:
                correlation = waiting.send(FETCH, 12, fetch_request(6, committed=True, wait_ms=25_000))
                # lets the Fetch park (nothing outside the broker shows that it has); the assertions hold if the
                # marker arrives first too, so this only makes the wake-up path the likely one
                time.sleep(0.3)
                started = time.monotonic()
                assert write_marker(raw, pid, epoch, commit=True) == 0
                part = waiting.receive(FETCH, 12, correlation).responses[0].partitions[0]
                assert time.monotonic() - started < 15  # well below MaxWaitMs (25 s), for a loaded machine
                assert batches(part.records) == [(6, 6, False), (7, 7, True)] and part.last_stable_offset == 8
            seen += consume(consumer, 1)
            assert seen == [(2, b"plain-0"), (4, b"committed-0"), (6, b"open-0")]
        finally:
            consumer.close()


def consume(consumer: Consumer, count: int) -> list[tuple[int, bytes]]:
    out: list[tuple[int, bytes]] = []
    deadline = time.monotonic() + 30
    while len(out) < count and time.monotonic() < deadline:
        msg = consumer.poll(0.5)
        if msg is None or msg.error():
            continue
        out.append((msg.offset(), msg.value()))
    # nothing more (no aborted record, no control record) arrives
    extra = consumer.poll(1.0)
    assert extra is None or extra.error(), (extra.offset(), extra.value())
    return out
