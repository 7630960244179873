"""The `shoal-transactions` console script (run as a subprocess) against a running broker: list, describe and
describe-producers of a confluent_kafka transactional producer holding an open transaction; and a real hanging
transaction (a transactional batch the coordinator never added: verification off, raw InitProducerId + Produce)
that pins the last stable offset until find-hanging finds it and abort --start-offset ends it, after which a
read_committed consumer reads past it."""

from __future__ import annotations

import subprocess
import time

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

from protocol import records as rec
from tests.helpers.confluent_clients import create_topic, produce_all
from tests.helpers.console_scripts import run_script
from tests.helpers.raw_client import RawClient
from tests.helpers.waiting import wait_until

pytestmark = pytest.mark.integration

PRODUCE, LIST_OFFSETS, INIT_PRODUCER_ID = 0, 2, 22
NODE_ID = 1  # the test broker's node.id (Shoal's default)
def cli(broker, *args: str) -> subprocess.CompletedProcess:
    """The console script of this checkout's pyproject.toml, as its installed wrapper runs it."""
    return run_script("shoal-transactions", "--bootstrap-server", broker.bootstrap, *args)


def rows(r: subprocess.CompletedProcess) -> list[list[str]]:
    """Kafka's table: tab-terminated, space-padded cells; the header first."""
    assert r.returncode == 0, r
    return [[cell.strip() for cell in line.split("\t")[:-1]] for line in r.stdout.splitlines() if line.strip()]


def transactional_producer(broker, tid: str) -> Producer:
    producer = Producer({"bootstrap.servers": broker.bootstrap, "transactional.id": tid, "linger.ms": 0})
    producer.init_transactions(30)
    return producer


def open_transaction(broker, tid: str, topic: str, partition: int, values: list[bytes]) -> Producer:
    producer = transactional_producer(broker, tid)
    producer.begin_transaction()
    for v in values:
        producer.produce(topic, value=v, partition=partition)
    assert producer.flush(30) == 0
    return producer


def latest(raw: RawClient, topic: str, committed: bool) -> int:
    r = raw.call(LIST_OFFSETS, 7, {"replica_id": -1, "isolation_level": 1 if committed else 0, "topics": [
        {"name": topic, "partitions": [{"partition_index": 0, "timestamp": -1}]}]})
    p = r.topics[0].partitions[0]
    assert p.error_code == 0, p
    return p.offset


def read_committed(broker, topic: str, count: int) -> list[bytes]:
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": f"rc-{topic}",
                         "enable.auto.commit": False, "isolation.level": "read_committed"})
    seen: list[bytes] = []
    try:
        consumer.assign([TopicPartition(topic, 0, 0)])

        def more() -> bool:
            for m in consumer.consume(10, 0.2):
                assert m.error() is None, m.error()
                seen.append(m.value())
            return len(seen) >= count

        wait_until(more, 30, f"{count} committed records of {topic}")
    finally:
        consumer.close()
    return seen


def test_list_describe_and_describe_producers_of_an_open_transaction(broker) -> None:
    create_topic(broker.bootstrap, "txcli", 2)
    producer = open_transaction(broker, "cli-tx", "txcli", 0, [b"a", b"b", b"c"])

    [head, *producers] = rows(cli(broker, "describe-producers", "--topic", "txcli", "--partition", "0"))
    assert head == ["ProducerId", "ProducerEpoch", "LatestCoordinatorEpoch", "LastSequence", "LastTimestamp",
                    "CurrentTransactionStartOffset"]
    [[pid, epoch, coordinator_epoch, last_seq, last_ts, start]] = producers
    assert (coordinator_epoch, last_seq, start) == ("-1", "2", "0")
    assert abs(int(last_ts) - time.time() * 1000) < 60_000

    assert rows(cli(broker, "list")) == [["TransactionalId", "Coordinator", "ProducerId", "TransactionState"],
                                         ["cli-tx", str(NODE_ID), pid, "Ongoing"]]
    assert rows(cli(broker, "list", "--duration-filter", "3600000")) == [
        ["TransactionalId", "Coordinator", "ProducerId", "TransactionState"]]

    [head, row] = rows(cli(broker, "describe", "--transactional-id", "cli-tx"))
    assert head == ["CoordinatorId", "TransactionalId", "ProducerId", "ProducerEpoch", "TransactionState",
                    "TransactionTimeoutMs", "CurrentTransactionStartTimeMs", "TransactionDurationMs",
                    "TopicPartitions"]
    assert row[:6] == [str(NODE_ID), "cli-tx", pid, epoch, "Ongoing", "60000"] and row[8] == "txcli-0"
    assert int(row[6]) > 0 and int(row[7]) >= 0

    # the coordinator still means to end it: not hanging, however short the timeout
    assert rows(cli(broker, "find-hanging", "--topic", "txcli", "--max-transaction-timeout", "0")) == [
        ["Topic", "Partition", "ProducerId", "ProducerEpoch", "CoordinatorEpoch", "StartOffset", "LastTimestamp",
         "Duration(min)"]]

    producer.commit_transaction(30)
    # the commit is answered once PrepareCommit is durable; the markers and CompleteCommit follow (as Kafka)
    wait_until(lambda: rows(cli(broker, "list"))[1][3] == "CompleteCommit", 60, "the transaction completed")
    [_, [_, _, coordinator_epoch, _, _, start]] = rows(cli(broker, "describe-producers", "--topic", "txcli",
                                                           "--partition", "0"))
    assert start == "None" and int(coordinator_epoch) >= 0

    r = cli(broker, "describe", "--transactional-id", "no-such-tx")
    assert r.returncode == 1 and r.stdout == ""
    assert ("Failed to describe transaction state of transactional-id `no-such-tx`: DescribeTransactions request "
            "for transactionalId `no-such-tx` failed because the ID could not be found.") in r.stderr
    r = cli(broker, "describe-producers", "--topic", "no-such-topic", "--partition", "0")
    assert r.returncode == 1
    # at once (Kafka's tool retries until its admin client's timeout and prints that it timed out)
    assert ("Failed to describe producers for partition no-such-topic-0 on leader: This server does not host this "
            "topic-partition.") in r.stderr
    r = cli(broker, "find-hanging")
    assert r.returncode == 1 and "requires either --topic or --broker-id" in r.stderr
    r = cli(broker, "describe")
    assert r.returncode == 1 and "argument --transactional-id is required" in r.stderr


def test_find_and_abort_a_hanging_transaction(broker_factory) -> None:
    broker = broker_factory({"transaction.partition.verification.enable": "false"})
    create_topic(broker.bootstrap, "hang", 1)
    create_topic(broker.bootstrap, "live", 1)
    produce_all(broker.bootstrap, "hang", [b"before-0", b"before-1", b"before-2"])
    twenty_minutes_ago = int(time.time() * 1000) - 20 * 60_000
    with RawClient(broker.port) as raw:
        # A producer writes a transactional batch without AddPartitionsToTxn: the coordinator never hears of
        # the partition, so it will never write its marker.
        r = raw.call(INIT_PRODUCER_ID, 4, {"transactional_id": "hanging-tx", "transaction_timeout_ms": 60_000,
                                           "producer_id": -1, "producer_epoch": -1})
        assert r.error_code == 0, r
        pid, epoch = r.producer_id, r.producer_epoch
        batch = rec.build_batch([rec.Record(None, b"hanging")], timestamp=twenty_minutes_ago, producer_id=pid,
                                producer_epoch=epoch, base_sequence=0, transactional=True)
        r = raw.call(PRODUCE, 9, {"transactional_id": "hanging-tx", "acks": -1, "timeout_ms": 5000, "topic_data": [
            {"name": "hang", "partition_data": [{"index": 0, "records": batch}]}]})
        part = r.responses[0].partition_responses[0]
        assert (part.error_code, part.base_offset) == (0, 3), part
        produce_all(broker.bootstrap, "hang", [b"after-0", b"after-1"])
        assert (latest(raw, "hang", committed=True), latest(raw, "hang", committed=False)) == (3, 6)

        # a live transaction the coordinator knows about, open on another topic: never reported
        live = open_transaction(broker, "live-tx", "live", 0, [b"live"])
        [head, *hanging] = rows(cli(broker, "find-hanging", "--broker-id", str(NODE_ID),
                                    "--max-transaction-timeout", "0"))
        assert head == ["Topic", "Partition", "ProducerId", "ProducerEpoch", "CoordinatorEpoch", "StartOffset",
                        "LastTimestamp", "Duration(min)"]
        [row] = hanging
        assert row[:7] == ["hang", "0", str(pid), str(epoch), "-1", "3", str(twenty_minutes_ago)]
        assert row[7] in ("20", "21"), row  # whole minutes since its last batch
        # the default bound (15 minutes) finds it as well; a search of one partition too
        assert [r[:7] for r in rows(cli(broker, "find-hanging", "--broker-id", str(NODE_ID)))[1:]] == [row[:7]]
        assert [r[:7] for r in rows(cli(broker, "find-hanging", "--topic", "hang", "--partition", "0"))[1:]] == [
            row[:7]]
        assert rows(cli(broker, "find-hanging", "--topic", "hang", "--max-transaction-timeout", "30"))[1:] == []

        r = cli(broker, "abort", "--topic", "hang", "--partition", "0", "--start-offset", "4")
        assert r.returncode == 1
        assert "Could not find any open transactions starting at offset 4 on partition hang-0" in r.stderr
        assert latest(raw, "hang", committed=True) == 3

        r = cli(broker, "abort", "--topic", "hang", "--partition", "0", "--start-offset", "3")
        assert (r.returncode, r.stdout, r.stderr) == (0, "", "")
        # the ABORT marker at 6 ends it: the LSO reaches the high watermark
        assert (latest(raw, "hang", committed=True), latest(raw, "hang", committed=False)) == (7, 7)

    assert read_committed(broker, "hang", 5) == [b"before-0", b"before-1", b"before-2", b"after-0", b"after-1"]
    assert rows(cli(broker, "find-hanging", "--broker-id", str(NODE_ID), "--max-transaction-timeout", "0"))[1:] == []
    by_pid = {row[0]: row for row in rows(cli(broker, "describe-producers", "--topic", "hang", "--partition", "0"))}
    assert (by_pid[str(pid)][2], by_pid[str(pid)][5]) == ("0", "None")  # ended by a marker of coordinator epoch 0
    live.commit_transaction(30)
    assert read_committed(broker, "live", 1) == [b"live"]
