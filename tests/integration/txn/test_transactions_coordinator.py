"""The transaction coordinator over TCP: FindCoordinator TRANSACTION, InitProducerId with a transactional id,
AddPartitionsToTxn, AddOffsetsToTxn, EndTxn, Describe/ListTransactions, state across restarts, and a real
confluent-kafka transactional producer's init/begin/abort.

Markers cannot be written to data partitions yet (the partition side implements TxnMarkerWriter separately), so
an ended transaction with partitions stays PrepareCommit/PrepareAbort here; completion is unit-tested with a
fake writer (tests/unit/txn/test_txn_runtime.py).
"""

from __future__ import annotations

import pytest
from confluent_kafka import Producer

from protocol.errors import ErrorCode
from tests.helpers.confluent_clients import create_topic
from tests.helpers.raw_client import RawClient
from tests.helpers.txn_clients import (
    ADD_OFFSETS,
    ADD_PARTITIONS,
    LIST_TXNS,
    add_partitions,
    describe_txn,
    end_txn,
    init_pid,
)
from tests.helpers.waiting import wait_until

pytestmark = pytest.mark.integration

FIND_COORDINATOR = 10
E = ErrorCode
TOPIC = "txn-data"


@pytest.fixture(scope="module")
def txn_broker(broker_module):
    create_topic(broker_module.bootstrap, TOPIC, 2)
    return broker_module


@pytest.mark.parametrize("version", range(1, 7))  # v0 has no key type: groups only
def test_find_coordinator_transaction_is_this_node(txn_broker, version):
    with RawClient(txn_broker.port) as c:
        r = c.call(FIND_COORDINATOR, version, {"key": "tx", "key_type": 1, "coordinator_keys": ["tx", "ty"]})
    entries = r.coordinators if version >= 4 else [r]
    assert entries and all(e.error_code == 0 and e.port == txn_broker.port and e.node_id >= 0 for e in entries)


def test_init_producer_id_new_bump_and_fencing(txn_broker):
    with RawClient(txn_broker.port) as c:
        first = init_pid(c, "fence-me", version=3)
        assert first.error_code == 0 and first.producer_id >= 0 and first.producer_epoch == 0
        again = init_pid(c, "fence-me", version=4)
        assert (again.error_code, again.producer_id, again.producer_epoch) == (0, first.producer_id, 1)
        # the old epoch is fenced: INVALID_PRODUCER_EPOCH before AddPartitionsToTxn v2 (KIP-588), then PRODUCER_FENCED
        assert add_partitions(c, "fence-me", first.producer_id, 0, {TOPIC: [0]}, version=1) == {
            (TOPIC, 0): E.INVALID_PRODUCER_EPOCH}
        for v in (2, 3):
            assert add_partitions(c, "fence-me", first.producer_id, 0, {TOPIC: [0]}, version=v) == {
                (TOPIC, 0): E.PRODUCER_FENCED}
        # KIP-360: the current producer may bump itself by naming its id and epoch; a stale pair is fenced
        bumped = init_pid(c, "fence-me", pid=first.producer_id, epoch=1)
        assert (bumped.error_code, bumped.producer_epoch) == (0, 2)
        retried = init_pid(c, "fence-me", pid=first.producer_id, epoch=1)  # a retry of that bump: same answer
        assert (retried.error_code, retried.producer_epoch) == (0, 2)
        assert init_pid(c, "fence-me", pid=first.producer_id, epoch=0).error_code == E.PRODUCER_FENCED
        assert init_pid(c, "fence-me", version=3, pid=first.producer_id, epoch=0).error_code == E.INVALID_PRODUCER_EPOCH
        # an unknown producer id for the transactional id
        assert add_partitions(c, "fence-me", first.producer_id + 1000, 2, {TOPIC: [0]}) == {
            (TOPIC, 0): E.INVALID_PRODUCER_ID_MAPPING}
        assert init_pid(c, "fence-me", timeout_ms=900_001).error_code == E.INVALID_TRANSACTION_TIMEOUT
        assert init_pid(c, "fence-me", timeout_ms=0).error_code == E.INVALID_TRANSACTION_TIMEOUT
        assert describe_txn(c, "fence-me").producer_epoch == 2  # refused requests changed nothing


def test_add_partitions_unknown_topic_fails_the_request(txn_broker):
    with RawClient(txn_broker.port) as c:
        p = init_pid(c, "unknown-topic")
        errors = add_partitions(c, "unknown-topic", p.producer_id, p.producer_epoch,
                                {TOPIC: [0, 1], "nope": [0], "_": []})
        assert errors == {(TOPIC, 0): E.OPERATION_NOT_ATTEMPTED, (TOPIC, 1): E.OPERATION_NOT_ATTEMPTED,
                          ("nope", 0): E.UNKNOWN_TOPIC_OR_PARTITION}
        assert add_partitions(c, "unknown-topic", p.producer_id, p.producer_epoch, {TOPIC: [5]}) == {
            (TOPIC, 5): E.UNKNOWN_TOPIC_OR_PARTITION}
        d = describe_txn(c, "unknown-topic")
        assert (d.error_code, d.transaction_state, d.topics) == (0, "Empty", [])
        # internal topics are never writable by producers (Kafka filters them out of WRITE authorization)
        assert add_partitions(c, "unknown-topic", p.producer_id, p.producer_epoch, {"__consumer_offsets": [0]}) == {
            ("__consumer_offsets", 0): E.TOPIC_AUTHORIZATION_FAILED}


def test_transaction_lifecycle_describe_list_and_end(txn_broker):
    with RawClient(txn_broker.port) as c:
        p = init_pid(c, "life")
        pid, epoch = p.producer_id, p.producer_epoch
        assert end_txn(c, "life", pid, epoch, commit=False, version=4) == E.INVALID_TXN_STATE  # nothing begun (TV1)
        assert add_partitions(c, "life", pid, epoch, {TOPIC: [0, 1]}) == {(TOPIC, 0): 0, (TOPIC, 1): 0}
        assert add_partitions(c, "life", pid, epoch, {TOPIC: [1]}) == {(TOPIC, 1): 0}  # already in: nothing written
        for v in range(5):
            assert c.call(ADD_OFFSETS, v, {"transactional_id": "life", "producer_id": pid, "producer_epoch": epoch,
                                           "group_id": "life-group"}).error_code == 0
        d = describe_txn(c, "life")
        assert (d.error_code, d.transaction_state, d.producer_id, d.producer_epoch) == (0, "Ongoing", pid, epoch)
        assert d.transaction_timeout_ms == 60_000 and d.transaction_start_time_ms > 0
        topics = {t.topic: sorted(t.partitions) for t in d.topics}
        assert topics[TOPIC] == [0, 1] and len(topics["__consumer_offsets"]) == 1
        listed = c.call(LIST_TXNS, 1, {"state_filters": ["Ongoing", "Bogus"], "producer_id_filters": [pid],
                                       "duration_filter": -1})
        assert listed.error_code == 0 and listed.unknown_state_filters == ["Bogus"]
        assert [(t.transactional_id, t.producer_id, t.transaction_state) for t in listed.transaction_states] == [
            ("life", pid, "Ongoing")]
        # v4 verify-only (the produce path's KIP-890 check): in the transaction or not
        r = c.call(ADD_PARTITIONS, 4, {"transactions": [{
            "transactional_id": "life", "producer_id": pid, "producer_epoch": epoch, "verify_only": True,
            "topics": [{"name": TOPIC, "partitions": [0, 1]}]}]})
        assert r.error_code == 0
        (txn,) = r.results_by_transaction
        assert {p.partition_index: p.partition_error_code for t in txn.topic_results
                for p in t.results_by_partition} == {0: 0, 1: 0}
        assert end_txn(c, "life", pid, epoch + 1, commit=False, version=1) == E.INVALID_PRODUCER_EPOCH
        assert end_txn(c, "life", pid, epoch + 1, commit=False, version=4) == E.PRODUCER_FENCED
        assert end_txn(c, "life", pid, epoch, commit=False, version=4) == 0  # answered once PrepareAbort is durable
        d = describe_txn(c, "life")
        assert d.transaction_state in ("PrepareAbort", "CompleteAbort")
        # a retry while markers are being written, and a contradicting EndTxn: both wait for the markers (as
        # Kafka's pending transition), then the contradicting one is refused
        assert end_txn(c, "life", pid, epoch, commit=False, version=4) in (E.CONCURRENT_TRANSACTIONS, E.NONE)
        assert end_txn(c, "life", pid, epoch, commit=True, version=4) in (
            E.CONCURRENT_TRANSACTIONS, E.INVALID_TXN_STATE)
        wait_until(lambda: describe_txn(c, "life").transaction_state == "CompleteAbort", 30, "the abort completed")
        assert end_txn(c, "life", pid, epoch, commit=True, version=4) == E.INVALID_TXN_STATE
        assert init_pid(c, "life").error_code in (E.CONCURRENT_TRANSACTIONS, E.NONE)


def test_list_transactions_pattern_and_describe_unknown(txn_broker):
    with RawClient(txn_broker.port) as c:
        for tid in ("pat-a1", "pat-a2", "pat-b1"):
            assert init_pid(c, tid).error_code == 0
        r = c.call(LIST_TXNS, 2, {"state_filters": [], "producer_id_filters": [], "duration_filter": -1,
                                  "transactional_id_pattern": "pat-a.*"})
        assert sorted(t.transactional_id for t in r.transaction_states) == ["pat-a1", "pat-a2"]
        r = c.call(LIST_TXNS, 2, {"state_filters": [], "producer_id_filters": [], "duration_filter": -1,
                                  "transactional_id_pattern": "pat-(a"})
        assert r.error_code == E.INVALID_REGULAR_EXPRESSION
        # Shoal matches the pattern with RE2 (linear time, off the event loop), whose syntax has no lookaround.
        r = c.call(LIST_TXNS, 2, {"state_filters": [], "producer_id_filters": [], "duration_filter": -1,
                                  "transactional_id_pattern": "(?=pat)pat-a1"})
        assert r.error_code == E.INVALID_REGULAR_EXPRESSION
        r = c.call(LIST_TXNS, 0, {"state_filters": ["Empty"], "producer_id_filters": []})
        assert {"pat-a1", "pat-b1"} <= {t.transactional_id for t in r.transaction_states}
        assert describe_txn(c, "never-seen").error_code == E.TRANSACTIONAL_ID_NOT_FOUND
        assert describe_txn(c, "").error_code == E.INVALID_REQUEST


def test_state_survives_restart_and_kill9(broker):
    create_topic(broker.bootstrap, TOPIC, 1)
    with RawClient(broker.port) as c:
        p = init_pid(c, "durable")
        assert add_partitions(c, "durable", p.producer_id, p.producer_epoch, {TOPIC: [0]}) == {(TOPIC, 0): 0}
        q = init_pid(c, "durable-2")
        assert add_partitions(c, "durable-2", q.producer_id, q.producer_epoch, {TOPIC: [0]}) == {(TOPIC, 0): 0}
        assert end_txn(c, "durable-2", q.producer_id, q.producer_epoch, commit=True, version=4) == 0
    broker.restart()
    with RawClient(broker.port) as c:
        d = describe_txn(c, "durable")
        assert (d.transaction_state, d.producer_id, d.producer_epoch) == ("Ongoing", p.producer_id, 0)
        assert [(t.topic, list(t.partitions)) for t in d.topics] == [(TOPIC, [0])]
        assert describe_txn(c, "durable-2").transaction_state in ("PrepareCommit", "CompleteCommit")
        # a new producer instance fences the ongoing transaction and aborts it (the client retries)
        assert init_pid(c, "durable").error_code == E.CONCURRENT_TRANSACTIONS
        fenced_epoch = describe_txn(c, "durable").producer_epoch
        # transaction.version 2 (the default): one bump, the abort's own (Kafka never applies the fence's there)
        assert fenced_epoch == 1
    broker.kill9()
    broker.start()
    with RawClient(broker.port) as c:
        d = describe_txn(c, "durable")
        assert d.producer_epoch == fenced_epoch and d.transaction_state in ("PrepareAbort", "CompleteAbort")
        assert init_pid(c, "fresh").error_code == 0
        pids = {init_pid(c, f"x{i}").producer_id for i in range(3)}
        assert p.producer_id not in pids and q.producer_id not in pids  # ids are never reused across restarts


def test_confluent_transactional_producer_init_begin_abort(txn_broker):
    producer = Producer({"bootstrap.servers": txn_broker.bootstrap, "transactional.id": "confluent-txn",
                         "transaction.timeout.ms": 60_000})
    producer.init_transactions(30)
    producer.begin_transaction()
    producer.abort_transaction(30)  # nothing produced: no EndTxn needed
    producer.begin_transaction()
    producer.abort_transaction(30)
    with RawClient(txn_broker.port) as c:
        d = describe_txn(c, "confluent-txn")
    assert d.error_code == 0 and d.transaction_state == "Empty" and d.producer_epoch == 0
    # a second instance with the same id bumps the epoch (the first one is fenced)
    second = Producer({"bootstrap.servers": txn_broker.bootstrap, "transactional.id": "confluent-txn"})
    second.init_transactions(30)
    with RawClient(txn_broker.port) as c:
        assert describe_txn(c, "confluent-txn").producer_epoch == 1
