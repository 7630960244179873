"""OffsetForLeaderEpoch (api 23): a confluent-kafka consumer that assigns a position with a leader epoch validates
it through the API (KIP-320) and sees log truncation where Kafka's answer shows it; raw requests of every version
check the answers of Kafka's leader epoch cache with one epoch (0) and the current-leader-epoch fencing."""

from __future__ import annotations

import time

import pytest
from confluent_kafka import Consumer, TopicPartition

from protocol.errors import ErrorCode
from tests.helpers.broker_process import start_broker
from tests.helpers.client_logs import captured_logger
from tests.helpers.confluent_clients import create_topic, produce_all
from tests.helpers.raw_client import RawClient

OFFSET_FOR_LEADER_EPOCH, DELETE_RECORDS = 23, 21


@pytest.fixture(scope="module")
def node(tmp_path_factory):
    proc = start_broker(tmp_path_factory.mktemp("epochs"))
    try:
        create_topic(proc.bootstrap, "ep", 2)
        assert len(produce_all(proc.bootstrap, "ep", [b"v%d" % i for i in range(20)])) == 20
        yield proc
    finally:
        proc.stop()



def _assign_and_poll(node, offset: int, epoch: int, reset: str) -> tuple[list[tuple[int, int]], list, list[str]]:
    """Assign partition 0 at (offset, epoch); return the (offset, leader epoch) of the first records or the
    errors, with librdkafka's protocol log lines."""
    logger, lines = captured_logger(f"rdkafka-epoch-{offset}-{epoch}-{reset}")
    c = Consumer({"bootstrap.servers": node.bootstrap, "group.id": "ep-g", "enable.auto.commit": False,
                  "auto.offset.reset": reset, "debug": "protocol,fetch"}, logger=logger)
    got: list[tuple[int, int]] = []
    errors: list = []
    try:
        c.assign([TopicPartition("ep", 0, offset, leader_epoch=epoch)])
        end = time.monotonic() + 20
        while not got and not errors and time.monotonic() < end:
            for m in c.consume(100, 0.5):
                if m.error():
                    errors.append(m.error())
                else:
                    got.append((m.offset(), m.leader_epoch()))
    finally:
        c.close()
    return got, errors, lines


def test_seek_with_leader_epoch_is_validated(node):
    got, errors, lines = _assign_and_poll(node, 5, 0, "error")
    assert not errors
    assert got[0] == (5, 0) and [o for o, _e in got] == list(range(5, 20))  # records carry leader epoch 0
    assert any("Sent OffsetForLeaderEpochRequest" in line for line in lines)
    assert any("validation succeeded: broker end offset 20" in line for line in lines), lines


def test_position_past_the_epoch_end_is_log_truncation(node):
    got, errors, _ = _assign_and_poll(node, 50, 0, "error")
    assert not got and errors and "truncation detected" in errors[0].str()
    assert "broker end offset is 20" in errors[0].str()


def test_unknown_later_epoch_resets_by_policy(node):
    got, errors, _ = _assign_and_poll(node, 5, 3, "earliest")  # no epoch <= 3 known past ours: reset
    assert not errors and got[0][0] == 0


def test_the_leader_epoch_survives_a_restart(tmp_path):
    """librdkafka commits the leader epoch of the last record it consumed. After a kill -9 of the broker the
    partition still has epoch 0 (records, Metadata, OffsetForLeaderEpoch), so a member resuming from the committed
    (offset, epoch) reads on (librdkafka validates a position when the epoch it knows changes, or after a seek
    with an epoch: it does not here) and a position checked explicitly is still valid."""
    proc = start_broker(tmp_path)
    try:
        create_topic(proc.bootstrap, "ep-resume", 1)
        assert len(produce_all(proc.bootstrap, "ep-resume", [b"v%d" % i for i in range(20)])) == 20
        c = Consumer({"bootstrap.servers": proc.bootstrap, "group.id": "ep-resume-g", "enable.auto.commit": False,
                      "auto.offset.reset": "earliest"})
        c.subscribe(["ep-resume"])
        got: list = []
        end = time.monotonic() + 30
        while len(got) < 10 and time.monotonic() < end:
            got.extend(m for m in c.consume(10 - len(got), 0.5) if m.error() is None)
        c.commit(message=got[-1], asynchronous=False)  # offset 10, leader epoch 0
        c.close()
        committed = got[-1].offset() + 1
        proc.kill9()
        proc.start()
        c = Consumer({"bootstrap.servers": proc.bootstrap, "group.id": "ep-resume-g", "enable.auto.commit": False,
                      "auto.offset.reset": "error"})
        c.subscribe(["ep-resume"])
        first = None
        end = time.monotonic() + 30
        while first is None and time.monotonic() < end:
            for m in c.consume(1, 0.5):
                assert m.error() is None, m.error()
                first = m
        c.close()
        assert first is not None and (first.offset(), first.leader_epoch()) == (committed, 0)
        assert _ask(proc.port, 4, [("ep-resume", 0, 0, 0)]) == [("ep-resume", 0, 0, 0, 20)]
    finally:
        proc.stop()


def _ask(port: int, version: int, parts: list[tuple[str, int, int, int]]) -> list[tuple[str, int, int, int, int]]:
    body: dict = {"replica_id": -1, "topics": []}
    for topic, partition, current, epoch in parts:
        body["topics"].append({"topic": topic, "partitions": [
            {"partition": partition, "current_leader_epoch": current, "leader_epoch": epoch}]})
    with RawClient(port) as raw:
        resp = raw.call(OFFSET_FOR_LEADER_EPOCH, version, body)
    return [(t.topic, p.partition, p.error_code, p.leader_epoch, p.end_offset) for t in resp.topics
            for p in t.partitions]


@pytest.mark.parametrize("version", [2, 3, 4])
def test_every_version_answers_as_kafka(node, version):
    asked = [
        ("ep", 0, -1, 0),  # no current epoch given; epoch 0 ends at the log end offset
        ("ep", 0, 0, 0),
        ("ep", 1, 0, 0),  # an empty partition
        ("ep", 0, 0, -1),  # UNDEFINED_EPOCH: nothing
        ("ep", 0, 0, 7),  # later than any epoch: nothing
        ("ep", 0, 3, 0),  # the client knows a newer leader than we are
        ("ep", 0, -2, 0),  # an older one
        ("ep", 9, -1, 0),
        ("no-such-topic", 0, -1, 0),
    ]
    assert _ask(node.port, version, asked) == [
        ("ep", 0, 0, 0, 20),
        ("ep", 0, 0, 0, 20),
        ("ep", 1, 0, 0, 0),
        ("ep", 0, 0, -1, -1),
        ("ep", 0, 0, -1, -1),
        ("ep", 0, ErrorCode.UNKNOWN_LEADER_EPOCH, -1, -1),
        ("ep", 0, ErrorCode.FENCED_LEADER_EPOCH, -1, -1),
        ("ep", 9, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, -1, -1),
        ("no-such-topic", 0, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, -1, -1),
    ]


def test_an_epoch_before_ours_ends_at_the_log_start(tmp_path):
    """Kafka's cache after truncateFromStart: epoch 0 starts at the log start offset, so an older epoch (which
    no batch of ours has) ends there."""
    proc = start_broker(tmp_path)
    try:
        create_topic(proc.bootstrap, "ep-start", 1)
        assert len(produce_all(proc.bootstrap, "ep-start", [b"v%d" % i for i in range(10)])) == 10
        with RawClient(proc.port) as raw:
            resp = raw.call(DELETE_RECORDS, 2, {"timeout_ms": 1000, "topics": [
                {"name": "ep-start", "partitions": [{"partition_index": 0, "offset": 4}]}]})
        assert resp.topics[0].partitions[0].error_code == 0
        assert _ask(proc.port, 4, [("ep-start", 0, 0, -3)]) == [("ep-start", 0, 0, -3, 4)]
    finally:
        proc.stop()
