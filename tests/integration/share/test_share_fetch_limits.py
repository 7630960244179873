"""ShareFetch limits as Kafka's DelayedShareFetch applies them, with real ShareConsumers and raw requests.

- MaxBytes 0: Kafka's SharePartitionManager answers at once with no partition; below 0, its
  PartitionMaxBytesStrategy refuses it (IllegalArgumentException), so each partition of the fetch answers
  UNKNOWN_SERVER_ERROR (without a message). Nothing is acquired either way.
- Several partitions with data: the first fetch of a session answers with the first share-partition loaded
  (Kafka initializes them asynchronously), the next one with the other; the partition order rotates with the
  share session epoch (PartitionRotateStrategy), so when MaxRecords runs out no partition starves
  (tests/differential/test_share_consumers.py compares these polls with Kafka's).
"""

from __future__ import annotations

import time

import pytest

from protocol.errors import ErrorCode
from tests.helpers import share_consumers as share
from tests.helpers.bounded_close import close_within
from tests.helpers.broker_process import start_broker
from tests.helpers.client_logs import captured_logger
from tests.helpers.confluent_clients import create_topic, produce_all
from tests.helpers.raw_requests import produce
from tests.helpers.share_raw import FAST, acquired, batch, fetch, part, setup
from tests.helpers.waiting import wait_until


@pytest.fixture(scope="module")
def node(tmp_path_factory):
    proc = start_broker(tmp_path_factory.mktemp("sflimits"), FAST)
    try:
        yield proc
    finally:
        proc.stop()



@pytest.mark.parametrize("version", [1, 2])
def test_raw_max_bytes_zero_or_less_is_refused_as_kafka(node, version):
    client, tid = setup(node, f"sfl-raw-{version}")
    with client:
        produce(client, f"sfl-raw-{version}", batch(5))
        share.earliest(node, f"sfl-raw-g{version}")
        group = f"sfl-raw-g{version}"
        resp = fetch(client, group, "m", 0, tid, max_bytes=0, version=version)
        assert (resp.error_code, part(resp)) == (0, None)  # answered at once, with no partition
        resp = fetch(client, group, "m", 1, tid, max_bytes=-1, version=version)
        assert resp.error_code == 0
        p = part(resp)
        assert (p.error_code, p.error_message) == (ErrorCode.UNKNOWN_SERVER_ERROR, None)  # Kafka's: no message
        assert acquired(resp) == []
        # one byte is enough for a whole first batch (KIP-74): nothing was acquired by the refused fetches
        resp = fetch(client, group, "m", 2, tid, max_bytes=1, version=version)
        assert part(resp).error_code == 0 and acquired(resp) == [(0, 4, 1)]


def test_share_consumer_with_fetch_max_bytes_zero_gets_no_records(node):
    create_topic(node.bootstrap, "sfl-zero", 1)
    share.earliest(node, "sfl-zero-g")
    assert len(produce_all(node.bootstrap, "sfl-zero", [b"v%d" % i for i in range(20)])) == 20
    logger, lines = captured_logger("rdkafka-share-max-bytes-0")
    zero = share.consumer(node, "sfl-zero-g", "sfl-zero", **{"fetch.max.bytes": 0, "debug": "fetch",
                                                             "logger": logger})
    got: list = []

    def fetched_twice() -> bool:  # the consumer's ShareFetches with MaxBytes 0 were answered
        got.extend(zero.poll(0.2))
        return sum("ShareFetch" in line and "max 0 bytes" in line for line in lines) >= 2

    try:
        wait_until(fetched_twice, 30, "two ShareFetch requests with MaxBytes 0")
        got.extend(zero.poll(0.5))
    finally:
        close_within(zero)
    assert [m for m in got if m.error() is None] == []
    # nothing was acquired: a consumer with the default fetch.max.bytes gets all of them
    normal = share.consumer(node, "sfl-zero-g", "sfl-zero")
    seen: list[tuple[int, int]] = []
    try:
        share.drain(normal, 20, 30, seen)
    finally:
        close_within(normal)
    assert sorted(o for _p, o in seen) == list(range(20))


def _polls(node, topic: str, group: str, want: int, **conf) -> list[tuple[list[int], int]]:
    """(partitions, count) of each non-empty poll of an explicit-acknowledgement consumer until `want` records."""
    c = share.consumer(node, group, topic, "explicit", **conf)
    out: list[tuple[list[int], int]] = []
    total = 0
    end = time.monotonic() + 30
    try:
        while total < want and time.monotonic() < end:
            msgs = share.messages(c)
            if msgs:
                out.append((sorted({m.partition() for m in msgs}), len(msgs)))
                for m in msgs:
                    c.acknowledge(m)
                total += len(msgs)
    finally:
        close_within(c)
    return out


def test_first_share_fetch_serves_the_first_partition_loaded(node):
    """As Kafka: 2 partitions x 50 records and MaxRecords 500 (max.poll.records' default): the first answer holds
    the share-partition loaded first, the next one the other's records."""
    create_topic(node.bootstrap, "sfl-two", 2)
    share.earliest(node, "sfl-two-g")
    for p in (0, 1):
        assert len(produce_all(node.bootstrap, "sfl-two", [b"v%d" % i for i in range(50)], partition=p)) == 50
    polls = _polls(node, "sfl-two", "sfl-two-g", 100)
    assert sorted(polls) == [([0], 50), ([1], 50)], polls


def test_partitions_rotate_with_the_session_epoch(node):
    """max.poll.records=50 (MaxRecords 50): each answer fills up from its first partition; the first partition
    rotates with the session epoch, so the two partitions take turns instead of one being drained first."""
    create_topic(node.bootstrap, "sfl-rot", 2)
    share.earliest(node, "sfl-rot-g")
    for _ in range(2):  # two batches of 50 per partition
        for p in (0, 1):
            assert len(produce_all(node.bootstrap, "sfl-rot", [b"v%d" % i for i in range(50)], partition=p)) == 50
    polls = _polls(node, "sfl-rot", "sfl-rot-g", 200, **{"max.poll.records": 50})
    assert [n for _p, n in polls] == [50, 50, 50, 50]
    firsts = [p[0] for p, _n in polls]
    assert all(len(p) == 1 for p, _n in polls)
    assert firsts[0] != firsts[1] and firsts[1] != firsts[2] and firsts[2] != firsts[3], polls
