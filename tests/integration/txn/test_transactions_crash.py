"""A broker killed with SIGKILL in the middle of transactions: one open (records produced, no EndTxn) and one
committing (EndTxn answered, markers for many partitions still being written). After the restart the
coordinator completes the prepared commit, aborts the open transaction at its timeout, and read_committed
readers end with exactly the committed records; nothing stays open (ListTransactions, DescribeProducers)."""

from __future__ import annotations

import json
import time

import pytest
from confluent_kafka import KafkaError, KafkaException, Producer

from protocol import records as rec
from tests.helpers.broker_process import free_port
from tests.helpers.confluent_clients import create_topic
from tests.helpers.raw_client import RawClient
from tests.helpers.txn_clients import (
    END_TXN,
    add_partitions,
    describe_txn,
    init_pid,
    offsets,
    open_producer_transactions,
    open_transactions,
    read_to_end,
)
from tests.helpers.waiting import wait_until

pytestmark = pytest.mark.integration

PRODUCE = 0
TOPIC, PARTS = "crash-txn", 64
OPEN_PARTS = 8
OPEN_TIMEOUT_MS = 10_000


def produce_txn(c: RawClient, tid: str, pid: int, epoch: int, partition: int, value: bytes, seq: int = 0) -> int:
    batch = rec.build_batch([rec.Record(None, value)], producer_id=pid, producer_epoch=epoch, base_sequence=seq,
                            transactional=True)
    r = c.call(PRODUCE, 9, {"transactional_id": tid, "acks": -1, "timeout_ms": 5000, "topic_data": [
        {"name": TOPIC, "partition_data": [{"index": partition, "records": batch}]}]})
    return r.responses[0].partition_responses[0].error_code


def begin(c: RawClient, tid: str, partitions: list[int], prefix: str, timeout_ms: int = 60_000) -> tuple[int, int]:
    r = init_pid(c, tid, timeout_ms)
    assert r.error_code == 0
    pid, epoch = r.producer_id, r.producer_epoch
    assert set(add_partitions(c, tid, pid, epoch, {TOPIC: partitions}).values()) == {0}
    for p in partitions:
        assert produce_txn(c, tid, pid, epoch, p, f"{prefix}-{p}".encode()) == 0
    return pid, epoch


def prepared_at_load(broker) -> set[str]:
    """Transactional ids the restarted coordinator found prepared (PrepareCommit/PrepareAbort) in its log."""
    out: set[str] = set()
    for line in broker.log_path.read_text().splitlines():
        if "completing prepared transactions after load" in line:
            out.update(json.loads(line)["transactional_ids"])
    return out


def test_kill9_mid_transaction_and_mid_commit(broker_factory):
    broker = broker_factory({"transaction.abort.timed.out.transaction.cleanup.interval.ms": "200"})
    create_topic(broker.bootstrap, TOPIC, PARTS)
    every = list(range(PARTS))
    with RawClient(broker.port) as c:
        pid, epoch = begin(c, "crash-done", every, "done")
        assert c.call(END_TXN, 3, {"transactional_id": "crash-done", "producer_id": pid, "producer_epoch": epoch,
                                   "committed": True}).error_code == 0
        wait_until(lambda: describe_txn(c, "crash-done").transaction_state == "CompleteCommit", 30, "committed")
        begin(c, "crash-open", list(range(OPEN_PARTS)), "open", timeout_ms=OPEN_TIMEOUT_MS)
        opened = time.monotonic()
        pid, epoch = begin(c, "crash-commit", every, "commit")
        # EndTxn is answered once PrepareCommit is durable; the 64 markers and CompleteCommit follow: kill now
        assert c.call(END_TXN, 3, {"transactional_id": "crash-commit", "producer_id": pid, "producer_epoch": epoch,
                                   "committed": True}).error_code == 0
        broker.kill9()
    broker.start()
    with RawClient(broker.port) as c:
        if time.monotonic() - opened < OPEN_TIMEOUT_MS / 1000 - 1:
            assert describe_txn(c, "crash-open").transaction_state == "Ongoing"  # still open after the restart
            # the partitions rebuilt their open transaction from the log: the LSO stops at its first record
            # (done-p, its marker, then open-p at offset 2)
            assert offsets(c, TOPIC, PARTS, committed=True)[:OPEN_PARTS] == [2] * OPEN_PARTS
        wait_until(lambda: not open_transactions(c), 60, "every transaction completed or aborted")
        assert describe_txn(c, "crash-commit").transaction_state == "CompleteCommit"
        open_state = describe_txn(c, "crash-open")
        assert open_state.transaction_state == "CompleteAbort"
        assert open_state.producer_epoch == 1  # the timeout's abort fenced the producer with one bump (as Kafka)
        wait_until(lambda: not any(open_producer_transactions(c, TOPIC, PARTS).values()), 30,
                   "no partition with an open transaction")
        assert offsets(c, TOPIC, PARTS, committed=True) == offsets(c, TOPIC, PARTS, committed=False)
    committed = [v for p in every for v in (f"done-{p}".encode(), f"commit-{p}".encode())]
    assert read_to_end(broker.bootstrap, TOPIC, PARTS, committed=True) == committed
    uncommitted = read_to_end(broker.bootstrap, TOPIC, PARTS, committed=False)
    assert sorted(uncommitted) == sorted(committed + [f"open-{p}".encode() for p in range(OPEN_PARTS)])
    # The kill must land between EndTxn and the end of its 64 markers, for the restarted coordinator to finish the
    # commit; on a loaded machine the markers may all be written before the test's SIGKILL is sent: commit again
    # (each time a new id) until a kill lands there, as it nearly always does the first time.
    tried = ["crash-commit"]
    while not set(tried) & prepared_at_load(broker) and len(tried) < 5:
        tid = f"crash-commit-{len(tried)}"
        with RawClient(broker.port) as c:
            pid, epoch = begin(c, tid, every, tid)
            assert c.call(END_TXN, 3, {"transactional_id": tid, "producer_id": pid, "producer_epoch": epoch,
                                       "committed": True}).error_code == 0
            broker.kill9()
        broker.start()
        tried.append(tid)
        committed += [f"{tid}-{p}".encode() for p in every]
        with RawClient(broker.port) as c:
            wait_until(lambda: not open_transactions(c), 60, "every transaction completed")
            assert describe_txn(c, tid).transaction_state == "CompleteCommit"
    assert set(tried) & prepared_at_load(broker), f"no kill landed mid-commit in {len(tried)} tries"
    assert sorted(read_to_end(broker.bootstrap, TOPIC, PARTS, committed=True)) == sorted(committed)


def test_kill9_with_a_confluent_transaction_open(broker_factory):
    """The broker comes back on the same port; the producer whose transaction the restarted coordinator aborted
    at its timeout is fenced, a new instance with the same id carries on."""
    port = free_port()
    broker = broker_factory({"listeners": f"PLAINTEXT://127.0.0.1:{port}",
                             "transaction.abort.timed.out.transaction.cleanup.interval.ms": "200"})
    topic = "crash-confluent"
    create_topic(broker.bootstrap, topic, 2)
    conf = {"bootstrap.servers": broker.bootstrap, "transactional.id": "crash-confluent",
            "transaction.timeout.ms": 6000, "linger.ms": 5}
    p = Producer(conf)
    p.init_transactions(30)
    p.begin_transaction()
    for part in (0, 1):
        p.produce(topic, f"committed-{part}".encode(), partition=part)
    p.commit_transaction(30)
    p.begin_transaction()
    for part in (0, 1):
        p.produce(topic, f"lost-{part}".encode(), partition=part)
    assert p.flush(30) == 0
    broker.kill9()
    broker.start()
    assert broker.port == port
    with RawClient(broker.port) as c:
        wait_until(lambda: describe_txn(c, "crash-confluent").transaction_state == "CompleteAbort", 30,
                   "the open transaction aborted at its timeout after the restart")
    with pytest.raises(KafkaException) as failed:
        p.commit_transaction(30)
    err = failed.value.args[0]
    assert err.fatal() and err.code() in (KafkaError._FENCED, KafkaError.PRODUCER_FENCED), err
    successor = Producer(conf)
    successor.init_transactions(30)
    successor.begin_transaction()
    successor.produce(topic, b"after-0", partition=0)
    successor.commit_transaction(30)
    assert read_to_end(broker.bootstrap, topic, 2, committed=True) == [b"committed-0", b"after-0", b"committed-1"]
    with RawClient(broker.port) as c:
        assert not open_transactions(c)
        assert not any(open_producer_transactions(c, topic, 2).values())
