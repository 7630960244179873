"""Bad transactional requests over TCP answer Kafka's error codes and change nothing: InitProducerId,
AddPartitionsToTxn, AddOffsetsToTxn, EndTxn with a wrong epoch or producer id, an unknown or empty transactional
id, the wrong state (no transaction, a completed one, one whose commit is being written) or an unknown partition;
WriteTxnMarkers with a stale epoch, a stale coordinator epoch or an unknown partition. DescribeTransactions (and
DescribeProducers for markers) is compared before and after each. Complements test_transactions_coordinator.py,
which covers the fencing of InitProducerId and AddPartitionsToTxn's unknown topics in an Empty transaction."""

from __future__ import annotations

import pytest

from protocol import records as rec
from protocol.errors import ErrorCode
from tests.helpers.confluent_clients import create_topic
from tests.helpers.raw_client import RawClient
from tests.helpers.txn_clients import (
    DESCRIBE_PRODUCERS,
    WRITE_MARKERS,
    add_offsets,
    add_partitions,
    describe_txn,
    end_txn,
    init_pid,
    txn_snapshot,
)
from tests.helpers.waiting import wait_until

pytestmark = pytest.mark.integration

E = ErrorCode
PRODUCE = 0
TOPIC = "bad-txn"


@pytest.fixture(scope="module")
def txn_broker(broker_module):
    create_topic(broker_module.bootstrap, TOPIC, 2)
    return broker_module


def produce_txn(c: RawClient, tid: str, pid: int, epoch: int, partition: int, seq: int = 0) -> int:
    batch = rec.build_batch([rec.Record(None, b"v")], producer_id=pid, producer_epoch=epoch, base_sequence=seq,
                            transactional=True)
    r = c.call(PRODUCE, 9, {"transactional_id": tid, "acks": -1, "timeout_ms": 5000, "topic_data": [
        {"name": TOPIC, "partition_data": [{"index": partition, "records": batch}]}]})
    return r.responses[0].partition_responses[0].error_code


def marker(c: RawClient, pid: int, epoch: int, commit: bool, coordinator_epoch: int = 0,
           topic: str = TOPIC, partition: int = 0) -> int:
    r = c.call(WRITE_MARKERS, 1, {"markers": [
        {"producer_id": pid, "producer_epoch": epoch, "transaction_result": commit,
         "coordinator_epoch": coordinator_epoch, "topics": [{"name": topic, "partition_indexes": [partition]}]}]})
    return r.markers[0].topics[0].partitions[0].error_code


def producers(c: RawClient) -> list[tuple]:
    r = c.call(DESCRIBE_PRODUCERS, 0, {"topics": [{"name": TOPIC, "partition_indexes": [0, 1]}]})
    return sorted((p.partition_index, a.producer_id, a.producer_epoch, a.last_sequence, a.coordinator_epoch,
                   a.current_txn_start_offset) for p in r.topics[0].partitions for a in p.active_producers)


def refused_everything_wrong(c: RawClient, tid: str, pid: int, epoch: int, *, wrong_state: dict[str, int],
                             pending: bool = False) -> None:
    """Every request with a wrong epoch or producer id, and the state-dependent ones with the codes given,
    leave the id's description as it was. `pending`: the transaction's markers are being written, which
    AddPartitionsToTxn, AddOffsetsToTxn and InitProducerId answer CONCURRENT_TRANSACTIONS before looking at the
    producer (Kafka's pending transition); EndTxn (TV1) checks the producer first."""
    before = txn_snapshot(c, tid)
    for version, fenced in ((1, E.INVALID_PRODUCER_EPOCH), (2, E.PRODUCER_FENCED), (3, E.PRODUCER_FENCED)):
        busy_or = (lambda code: E.CONCURRENT_TRANSACTIONS) if pending else (lambda code: code)
        for bad_epoch in (epoch - 1, epoch + 1):
            assert add_partitions(c, tid, pid, bad_epoch, {TOPIC: [1]}, version=version) == {
                (TOPIC, 1): busy_or(fenced)}
            assert add_offsets(c, tid, pid, bad_epoch, "bad-group", version=version) == busy_or(fenced)
            assert end_txn(c, tid, pid, bad_epoch, commit=True, version=version) == fenced
        assert add_partitions(c, tid, pid + 1000, epoch, {TOPIC: [1]}, version=version) == {
            (TOPIC, 1): busy_or(E.INVALID_PRODUCER_ID_MAPPING)}
        assert add_offsets(c, tid, pid + 1000, epoch, "bad-group", version=version) == busy_or(
            E.INVALID_PRODUCER_ID_MAPPING)
        assert end_txn(c, tid, pid + 1000, epoch, commit=False, version=version) == E.INVALID_PRODUCER_ID_MAPPING
    # KIP-360: a producer id that is neither the current nor the previous one
    assert init_pid(c, tid, pid=pid + 1000, epoch=0).error_code == (
        E.CONCURRENT_TRANSACTIONS if pending else E.PRODUCER_FENCED)
    assert init_pid(c, tid, pid=pid + 1000, epoch=0, version=3).error_code == (
        E.CONCURRENT_TRANSACTIONS if pending else E.INVALID_PRODUCER_EPOCH)
    assert init_pid(c, tid, timeout_ms=0).error_code == E.INVALID_TRANSACTION_TIMEOUT
    # an unknown partition fails the request, the known ones are not attempted
    assert add_partitions(c, tid, pid, epoch, {TOPIC: [0, 7]}) == {
        (TOPIC, 0): E.OPERATION_NOT_ATTEMPTED, (TOPIC, 7): E.UNKNOWN_TOPIC_OR_PARTITION}
    assert add_partitions(c, tid, pid, epoch, {"no-such-topic": [0]}) == {
        ("no-such-topic", 0): E.UNKNOWN_TOPIC_OR_PARTITION}
    for request, code in wrong_state.items():
        if request == "add_partitions":
            assert add_partitions(c, tid, pid, epoch, {TOPIC: [1]}) == {(TOPIC, 1): code}
        elif request == "add_offsets":
            assert add_offsets(c, tid, pid, epoch, "bad-group") == code
        elif request == "init":
            assert init_pid(c, tid, pid=pid, epoch=epoch).error_code == code
        else:
            assert end_txn(c, tid, pid, epoch, commit=request == "commit") == code, request
    assert txn_snapshot(c, tid) == before


def test_unknown_and_empty_transactional_ids(txn_broker):
    with RawClient(txn_broker.port) as c:
        assert describe_txn(c, "bad-unknown").error_code == E.TRANSACTIONAL_ID_NOT_FOUND
        assert add_partitions(c, "bad-unknown", 1, 0, {TOPIC: [0]}) == {(TOPIC, 0): E.INVALID_PRODUCER_ID_MAPPING}
        assert add_offsets(c, "bad-unknown", 1, 0, "g") == E.INVALID_PRODUCER_ID_MAPPING
        assert end_txn(c, "bad-unknown", 1, 0, commit=True) == E.INVALID_PRODUCER_ID_MAPPING
        assert describe_txn(c, "bad-unknown").error_code == E.TRANSACTIONAL_ID_NOT_FOUND  # nothing created
        assert init_pid(c, "").error_code == E.INVALID_REQUEST
        assert add_partitions(c, "", 1, 0, {TOPIC: [0]}) == {(TOPIC, 0): E.INVALID_REQUEST}
        assert add_offsets(c, "", 1, 0, "g") == E.INVALID_REQUEST
        assert end_txn(c, "", 1, 0, commit=True) == E.INVALID_REQUEST
        # KIP-360 with half an id/epoch pair
        assert init_pid(c, "bad-unknown", pid=5).error_code == E.INVALID_REQUEST
        assert describe_txn(c, "bad-unknown").error_code == E.TRANSACTIONAL_ID_NOT_FOUND


def test_refused_requests_in_empty_ongoing_and_complete_states(txn_broker):
    with RawClient(txn_broker.port) as c:
        r = init_pid(c, "bad-states")
        pid, epoch = r.producer_id, r.producer_epoch
        # Empty: nothing to end (TV1)
        refused_everything_wrong(c, "bad-states", pid, epoch, wrong_state={
            "commit": E.INVALID_TXN_STATE, "abort": E.INVALID_TXN_STATE})
        # Ongoing
        assert add_partitions(c, "bad-states", pid, epoch, {TOPIC: [0]}) == {(TOPIC, 0): 0}
        assert produce_txn(c, "bad-states", pid, epoch, 0) == 0
        refused_everything_wrong(c, "bad-states", pid, epoch, wrong_state={})
        assert describe_txn(c, "bad-states").transaction_state == "Ongoing"
        # CompleteCommit: a commit again is a retry (answered NONE, nothing written), an abort is refused
        assert end_txn(c, "bad-states", pid, epoch, commit=True) == 0
        wait_until(lambda: describe_txn(c, "bad-states").transaction_state == "CompleteCommit", 30, "committed")
        refused_everything_wrong(c, "bad-states", pid, epoch, wrong_state={
            "commit": E.NONE, "abort": E.INVALID_TXN_STATE})


def test_refused_requests_while_the_commit_is_being_written(broker):
    """A transaction held in PrepareCommit: its partition refuses the coordinator's marker as coming from a stale
    coordinator epoch (a WriteTxnMarkers with a higher coordinator epoch came first), so the coordinator stops
    sending and the transaction stays prepared (Kafka's TransactionMarkerChannelManager does the same)."""
    create_topic(broker.bootstrap, TOPIC, 2)
    with RawClient(broker.port) as c:
        r = init_pid(c, "bad-prepared")
        pid, epoch = r.producer_id, r.producer_epoch
        assert add_partitions(c, "bad-prepared", pid, epoch, {TOPIC: [0]}) == {(TOPIC, 0): 0}
        assert produce_txn(c, "bad-prepared", pid, epoch, 0) == 0
        assert marker(c, pid, epoch, commit=False, coordinator_epoch=5) == 0
        assert end_txn(c, "bad-prepared", pid, epoch, commit=True) == 0
        assert describe_txn(c, "bad-prepared").transaction_state == "PrepareCommit"
        refused_everything_wrong(c, "bad-prepared", pid, epoch, pending=True, wrong_state={
            "add_partitions": E.CONCURRENT_TRANSACTIONS, "add_offsets": E.CONCURRENT_TRANSACTIONS,
            "init": E.CONCURRENT_TRANSACTIONS, "commit": E.CONCURRENT_TRANSACTIONS,
            "abort": E.CONCURRENT_TRANSACTIONS})
        assert describe_txn(c, "bad-prepared").transaction_state == "PrepareCommit"


def test_write_txn_markers_refused(txn_broker):
    with RawClient(txn_broker.port) as c:
        r = init_pid(c, "bad-markers")
        pid, epoch = r.producer_id, r.producer_epoch
        assert add_partitions(c, "bad-markers", pid, epoch, {TOPIC: [1]}) == {(TOPIC, 1): 0}
        assert produce_txn(c, "bad-markers", pid, epoch, 1) == 0
        before = producers(c), txn_snapshot(c, "bad-markers")
        assert marker(c, pid, epoch, commit=True, topic="no-such-topic") == E.UNKNOWN_TOPIC_OR_PARTITION
        assert marker(c, pid, epoch, commit=True, partition=9) == E.UNKNOWN_TOPIC_OR_PARTITION
        assert marker(c, pid, epoch - 1, commit=True, partition=1) == E.INVALID_PRODUCER_EPOCH
        assert (producers(c), txn_snapshot(c, "bad-markers")) == before
        assert marker(c, pid, epoch, commit=False, coordinator_epoch=3, partition=1) == 0
        after_abort = producers(c)
        assert marker(c, pid, epoch, commit=False, coordinator_epoch=2, partition=1) == (
            E.TRANSACTION_COORDINATOR_FENCED)
        assert producers(c) == after_abort
