"""Fetch (v9+) and ListOffsets (v4+) check the request's CurrentLeaderEpoch (KIP-320) as Kafka's
Partition.checkCurrentLeaderEpoch: -1 is no check, our epoch (0) is served, an older one is FENCED_LEADER_EPOCH and
a newer one UNKNOWN_LEADER_EPOCH. A partition refused that way answers a long-polling Fetch at once (Kafka's
errorReadingData). librdkafka sends the epoch it got from Metadata in both requests and still reads."""

from __future__ import annotations

import time

import pytest
from confluent_kafka import Consumer, TopicPartition

from protocol.errors import ErrorCode
from protocol.records import iter_batches
from tests.helpers.broker_process import start_broker
from tests.helpers.confluent_clients import create_topic, produce_all
from tests.helpers.raw_client import RawClient
from tests.helpers.raw_requests import FETCH, LIST_OFFSETS, topic_id

pytestmark = pytest.mark.integration

TOPIC = "cle"
LATEST = -1
# (CurrentLeaderEpoch, the partition's error): -1 no check, 0 ours, older than ours, newer than ours
CASES = [(-1, ErrorCode.NONE), (0, ErrorCode.NONE), (-2, ErrorCode.FENCED_LEADER_EPOCH),
         (1, ErrorCode.UNKNOWN_LEADER_EPOCH), (7, ErrorCode.UNKNOWN_LEADER_EPOCH)]
# Fetch reads any negative epoch as none given (Kafka's FetchRequest), so -2 is not checked there
FETCH_CASES = [(epoch, ErrorCode.NONE if epoch < 0 else error) for epoch, error in CASES]


@pytest.fixture(scope="module")
def node(tmp_path_factory):
    proc = start_broker(tmp_path_factory.mktemp("current-epoch"))
    try:
        create_topic(proc.bootstrap, TOPIC, 2)
        assert len(produce_all(proc.bootstrap, TOPIC, [b"v%d" % i for i in range(5)], partition=0)) == 5
        yield proc
    finally:
        proc.stop()


def fetch_body(tid, epochs: dict[int, int], *, max_wait_ms: int = 0) -> dict:
    """Fetch from offset 0 of each partition with its CurrentLeaderEpoch (topic by name and by id: the version
    encodes the one it has)."""
    return {"replica_id": -1, "max_wait_ms": max_wait_ms, "min_bytes": 1, "max_bytes": 1 << 20,
            "isolation_level": 0, "session_id": 0, "session_epoch": -1,
            "topics": [{"topic": TOPIC, "topic_id": tid, "partitions": [
                {"partition": p, "current_leader_epoch": epoch, "fetch_offset": 0, "partition_max_bytes": 1 << 20}
                for p, epoch in epochs.items()]}],
            "forgotten_topics_data": [], "rack_id": ""}


@pytest.mark.parametrize("version", [9, 12, 13, 17])
def test_fetch_checks_the_current_leader_epoch(node, version):
    with RawClient(node.port) as raw:
        tid = topic_id(raw, TOPIC)
        for epoch, error in FETCH_CASES:
            resp = raw.call(FETCH, version, fetch_body(tid, {0: epoch}))
            assert resp.error_code == 0
            part = resp.responses[0].partitions[0]
            assert part.error_code == error, (epoch, part)
            if error == ErrorCode.NONE:
                assert part.high_watermark == 5
                assert [h.base_offset for _, h in iter_batches(part.records)] != []
            else:  # as Kafka's LogReadResult of an error: no offsets, no records
                assert (part.high_watermark, part.log_start_offset) == (-1, -1) and not part.records


def test_a_read_committed_fetch_in_error_has_no_aborted_transactions(node):
    """As Kafka's KafkaApis (abortedTransactions.orElse(null)): a partition in error has none (null), one read
    under read_committed has its list (empty here)."""
    with RawClient(node.port) as raw:
        tid = topic_id(raw, TOPIC)
        body = fetch_body(tid, {0: 0, 1: 3})
        body["isolation_level"] = 1
        parts = {p.partition_index: p for p in raw.call(FETCH, 12, body).responses[0].partitions}
    assert (parts[0].error_code, parts[0].aborted_transactions, parts[0].last_stable_offset) == (0, [], 5)
    assert (parts[1].error_code, parts[1].aborted_transactions) == (ErrorCode.UNKNOWN_LEADER_EPOCH, None)


def test_fetch_before_v9_has_no_epoch_to_check(node):
    with RawClient(node.port) as raw:
        body = fetch_body(None, {0: 5})  # v8 has no CurrentLeaderEpoch: not encoded
        part = raw.call(FETCH, 8, body).responses[0].partitions[0]
        assert part.error_code == 0 and part.high_watermark == 5


def test_a_refused_epoch_answers_a_long_poll_at_once(node):
    """Partition 1 is empty and would be waited for (MaxWaitMs 20 s); partition 0's epoch, newer than ours, is a
    read error, which Kafka answers at once."""
    with RawClient(node.port) as raw:
        tid = topic_id(raw, TOPIC)
        started = time.monotonic()
        resp = raw.call(FETCH, 12, fetch_body(tid, {0: 3, 1: 0}, max_wait_ms=20_000))
        assert time.monotonic() - started < 15  # well below MaxWaitMs: not waited for
        errors = {p.partition_index: p.error_code for p in resp.responses[0].partitions}
        assert errors == {0: ErrorCode.UNKNOWN_LEADER_EPOCH, 1: ErrorCode.NONE}


@pytest.mark.parametrize("version", [4, 7, 11])
def test_list_offsets_checks_the_current_leader_epoch(node, version):
    got = []
    with RawClient(node.port) as raw:
        for epoch, _ in CASES:  # one request each: a partition named twice is INVALID_REQUEST, as in Kafka
            body = {"replica_id": -1, "isolation_level": 0, "timeout_ms": 1000, "topics": [{"name": TOPIC, "partitions": [
                {"partition_index": 0, "current_leader_epoch": epoch, "timestamp": LATEST}]}]}
            [p] = raw.call(LIST_OFFSETS, version, body).topics[0].partitions
            got.append((p.error_code, p.timestamp, p.offset, p.leader_epoch))
    assert got == [(error, -1, 5, 0) if error == ErrorCode.NONE else (error, -1, -1, -1) for _, error in CASES]


def test_list_offsets_before_v4_has_no_epoch_to_check(node):
    body = {"replica_id": -1, "topics": [{"name": TOPIC, "partitions": [
        {"partition_index": 0, "current_leader_epoch": 9, "timestamp": LATEST}]}]}
    with RawClient(node.port) as raw:
        part = raw.call(LIST_OFFSETS, 1, body).topics[0].partitions[0]
    assert (part.error_code, part.offset) == (0, 5)


def test_librdkafka_sends_its_metadata_epoch_and_reads(node):
    """librdkafka puts the leader epoch Metadata gave it (0) in Fetch and ListOffsets: it is ours, so it reads."""
    c = Consumer({"bootstrap.servers": node.bootstrap, "group.id": "cle-reader", "enable.auto.commit": False,
                  "auto.offset.reset": "earliest"})
    try:
        c.assign([TopicPartition(TOPIC, 0)])  # no offset: ListOffsets (earliest) first
        got: list = []
        end = time.monotonic() + 60
        while len(got) < 5 and time.monotonic() < end:
            for m in c.consume(10, 0.5):
                assert m.error() is None, m.error()
                got.append((m.offset(), m.leader_epoch()))
    finally:
        c.close()
    assert got == [(o, 0) for o in range(5)]
