"""Transactions with a real, unmodified confluent-kafka (librdkafka) transactional producer against a broker
process: commit, abort, read_committed vs read_uncommitted visibility of an open transaction, many transactions
over several partitions, zombie fencing, an abandoned transaction aborted at its timeout (producer killed with
SIGKILL), and a transactional produce to a partition the transaction did not add (raw requests)."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest
from confluent_kafka import KafkaError, KafkaException, Producer

from protocol import records as rec
from protocol.errors import ErrorCode
from tests.helpers.broker_process import start_broker
from tests.helpers.confluent_clients import create_topic
from tests.helpers.raw_client import RawClient
from tests.helpers.txn_clients import (
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
# Timed-out transactions are looked for every 200 ms instead of every 10 s, so an abandoned one ends quickly.
FAST_TIMEOUTS = {"transaction.abort.timed.out.transaction.cleanup.interval.ms": "200"}


@pytest.fixture(scope="module")
def txn_broker(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("txn-clients")
    proc = start_broker(tmp, FAST_TIMEOUTS)
    try:
        yield proc
    finally:
        proc.stop()


def producer(bootstrap: str, tid: str, **conf) -> Producer:
    p = Producer({"bootstrap.servers": bootstrap, "transactional.id": tid, "linger.ms": 5, **conf})
    p.init_transactions(30)
    return p


def send(p: Producer, topic: str, values: list[bytes], partition: int = 0) -> None:
    for v in values:
        p.produce(topic, v, partition=partition)
    assert p.flush(30) == 0


def assert_fenced(err: KafkaError) -> None:
    assert err.fatal() and err.code() in (KafkaError._FENCED, KafkaError.PRODUCER_FENCED), err


def no_open_transactions(bootstrap_port: int, topic: str, partitions: int) -> None:
    with RawClient(bootstrap_port) as c:
        wait_until(lambda: not open_transactions(c), 30, "no open transaction on the coordinator")
        wait_until(lambda: not any(open_producer_transactions(c, topic, partitions).values()), 30,
                   "no open transaction on the partitions")
        assert offsets(c, topic, partitions, committed=True) == offsets(c, topic, partitions, committed=False)


def test_commit_and_abort(txn_broker):
    topic = "tc-commit-abort"
    create_topic(txn_broker.bootstrap, topic, 1)
    p = producer(txn_broker.bootstrap, "tc-ca")
    p.begin_transaction()
    send(p, topic, [b"c1", b"c2"])
    p.commit_transaction(30)
    p.begin_transaction()
    send(p, topic, [b"a1", b"a2"])
    p.abort_transaction(30)
    p.begin_transaction()
    send(p, topic, [b"c3"])
    p.commit_transaction(30)
    assert read_to_end(txn_broker.bootstrap, topic, 1, committed=True) == [b"c1", b"c2", b"c3"]
    assert read_to_end(txn_broker.bootstrap, topic, 1, committed=False) == [b"c1", b"c2", b"a1", b"a2", b"c3"]
    with RawClient(txn_broker.port) as c:
        # the markers are written (the LSO moved), the CompleteCommit record follows them
        d = wait_until(lambda: (lambda d: d if d.transaction_state == "CompleteCommit" else None)(
            describe_txn(c, "tc-ca")), 15, "the transaction completed")
        assert (d.error_code, d.transaction_state, d.topics) == (0, "CompleteCommit", [])
    no_open_transactions(txn_broker.port, topic, 1)


def test_open_transaction_hidden_from_read_committed_only(txn_broker):
    topic = "tc-open"
    create_topic(txn_broker.bootstrap, topic, 1)
    p = producer(txn_broker.bootstrap, "tc-open")
    p.begin_transaction()
    send(p, topic, [b"before"])
    p.commit_transaction(30)
    p.begin_transaction()
    send(p, topic, [b"open1", b"open2"])
    # open: read_uncommitted sees it, read_committed stops at the LSO before it
    assert read_to_end(txn_broker.bootstrap, topic, 1, committed=True) == [b"before"]
    assert read_to_end(txn_broker.bootstrap, topic, 1, committed=False) == [b"before", b"open1", b"open2"]
    with RawClient(txn_broker.port) as c:
        lso, hw = offsets(c, topic, 1, committed=True), offsets(c, topic, 1, committed=False)
        assert lso[0] == 2 and hw[0] == 4  # before + its commit marker; then the open batch
        assert describe_txn(c, "tc-open").transaction_state == "Ongoing"
        assert open_producer_transactions(c, topic, 1)[0]
    p.commit_transaction(30)
    assert read_to_end(txn_broker.bootstrap, topic, 1, committed=True) == [b"before", b"open1", b"open2"]
    no_open_transactions(txn_broker.port, topic, 1)


def test_many_transactions_over_several_partitions(txn_broker):
    topic, parts = "tc-many", 4
    create_topic(txn_broker.bootstrap, topic, parts)
    p = producer(txn_broker.bootstrap, "tc-many")
    expected: dict[int, list[bytes]] = {i: [] for i in range(parts)}
    everything: dict[int, list[bytes]] = {i: [] for i in range(parts)}
    for n in range(20):
        p.begin_transaction()
        for part in range(parts):
            values = [f"t{n}-p{part}-{k}".encode() for k in range(3)]
            for v in values:
                p.produce(topic, v, partition=part)
            everything[part] += values
            if n % 3 != 2:
                expected[part] += values
        if n % 3 == 2:
            assert p.flush(30) == 0  # sent before the abort (abort_transaction purges what is not)
            p.abort_transaction(30)
        else:
            p.commit_transaction(30)
    flat = [v for part in range(parts) for v in expected[part]]
    assert read_to_end(txn_broker.bootstrap, topic, parts, committed=True) == flat
    assert read_to_end(txn_broker.bootstrap, topic, parts, committed=False) == [
        v for part in range(parts) for v in everything[part]]
    no_open_transactions(txn_broker.port, topic, parts)


def test_zombie_is_fenced_and_its_transaction_aborted(txn_broker):
    topic = "tc-zombie"
    create_topic(txn_broker.bootstrap, topic, 2)
    zombie = producer(txn_broker.bootstrap, "tc-zombie")
    zombie.begin_transaction()
    send(zombie, topic, [b"zombie-1"], partition=0)
    send(zombie, topic, [b"zombie-2"], partition=1)
    # a second instance with the same transactional id fences the first and aborts its open transaction
    successor = producer(txn_broker.bootstrap, "tc-zombie")
    with RawClient(txn_broker.port) as c:
        d = describe_txn(c, "tc-zombie")
        # at transaction.version 2 (the default) the coordinator's abort bumped the epoch once, to 1 (its markers
        # carry 1: Kafka's fence epoch is never applied at TV2); the successor's retried init got 2
        assert (d.producer_epoch, d.transaction_state) == (2, "Empty")
    # the zombie's next produce fails fatally, and so does its commit
    zombie.produce(topic, b"zombie-3", partition=0)
    with pytest.raises(KafkaException) as failed:
        zombie.flush(30)  # the produce is refused with an old epoch: librdkafka raises the fatal error here
    assert_fenced(failed.value.args[0])
    with pytest.raises(KafkaException) as failed:
        zombie.commit_transaction(30)
    assert_fenced(failed.value.args[0])
    successor.begin_transaction()
    send(successor, topic, [b"successor"], partition=0)
    successor.commit_transaction(30)
    assert read_to_end(txn_broker.bootstrap, topic, 2, committed=True) == [b"successor"]
    assert b"zombie-3" not in read_to_end(txn_broker.bootstrap, topic, 2, committed=False)
    no_open_transactions(txn_broker.port, topic, 2)


ABANDON = textwrap.dedent("""
    import sys, time
    from confluent_kafka import Producer
    bootstrap, topic, tid = sys.argv[1:4]
    p = Producer({"bootstrap.servers": bootstrap, "transactional.id": tid, "transaction.timeout.ms": 3000})
    p.init_transactions(30)
    p.begin_transaction()
    for i in range(5):
        p.produce(topic, f"abandoned-{i}".encode(), partition=0)
    assert p.flush(30) == 0
    print("produced", flush=True)
    time.sleep(600)
""")


def test_abandoned_transaction_is_aborted_at_its_timeout(txn_broker):
    topic = "tc-abandoned"
    create_topic(txn_broker.bootstrap, topic, 1)
    child = subprocess.Popen([sys.executable, "-c", ABANDON, txn_broker.bootstrap, topic, "tc-abandoned"],
                             stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout.readline().strip() == "produced"
        with RawClient(txn_broker.port) as c:
            assert describe_txn(c, "tc-abandoned").transaction_state == "Ongoing"
            assert offsets(c, topic, 1, committed=True) == [0]
        child.kill()  # SIGKILL: the producer never ends its transaction
        child.wait(10)
    finally:
        if child.poll() is None:
            child.kill()
            child.wait(10)
    other = producer(txn_broker.bootstrap, "tc-abandoned-other")
    other.begin_transaction()
    send(other, topic, [b"after"])
    other.commit_transaction(30)
    with RawClient(txn_broker.port) as c:
        # the coordinator aborts it at its timeout (3 s) and the LSO moves past it
        wait_until(lambda: describe_txn(c, "tc-abandoned").transaction_state == "CompleteAbort", 30,
                   "the abandoned transaction aborted")
        # fenced by the abort, one epoch up (at transaction.version 2 the abort's own bump, as Kafka)
        assert describe_txn(c, "tc-abandoned").producer_epoch == 1
    assert read_to_end(txn_broker.bootstrap, topic, 1, committed=True) == [b"after"]
    no_open_transactions(txn_broker.port, topic, 1)


def test_transactional_produce_to_a_partition_not_added_is_refused(txn_broker):
    """Kafka (KIP-890 part 1, transaction.partition.verification.enable=true): the partition leader asks the
    coordinator, which answers that the partition is not in the transaction; a Produce before v12 gets
    INVALID_TXN_STATE (TRANSACTION_ABORTABLE is for clients of v12+), and nothing is appended."""
    topic = "tc-not-added"
    create_topic(txn_broker.bootstrap, topic, 2)
    with RawClient(txn_broker.port) as c:
        r = init_pid(c, "tc-not-added")
        pid, epoch = r.producer_id, r.producer_epoch

        def produce(partition: int, value: bytes):
            batch = rec.build_batch([rec.Record(None, value)], producer_id=pid, producer_epoch=epoch,
                                    base_sequence=0, transactional=True)
            resp = c.call(PRODUCE, 9, {"transactional_id": "tc-not-added", "acks": -1, "timeout_ms": 5000,
                                       "topic_data": [{"name": topic, "partition_data": [
                                           {"index": partition, "records": batch}]}]})
            return resp.responses[0].partition_responses[0]

        # no transaction at all yet
        assert produce(0, b"x").error_code == ErrorCode.INVALID_TXN_STATE
        # a transaction that added partition 1 only
        assert add_partitions(c, "tc-not-added", pid, epoch, {topic: [1]}) == {(topic, 1): 0}
        assert produce(0, b"y").error_code == ErrorCode.INVALID_TXN_STATE
        assert offsets(c, topic, 2, committed=False) == [0, 0]
        assert produce(1, b"z").error_code == 0
        assert offsets(c, topic, 2, committed=False) == [0, 1]
        assert describe_txn(c, "tc-not-added").transaction_state == "Ongoing"
