"""TransactionCoordinator operations and their error paths, against Kafka's rules."""

from __future__ import annotations

import pytest

from broker.txn import TV_0, TV_1, TV_2, TopicPartition, TransactionCoordinator, TxnMetadata, TxnState
from broker.txn import records as rec
from broker.txn.metadata import SHORT_MAX
from broker.txn.versions import client_transaction_version, error_for_version
from protocol.errors import ErrorCode as E
from tests.unit.txn.txn_helpers import Clock, Ids, make, replayed, snapshot, with_ids

TP = TopicPartition
T = "txn-1"


def seed(c: TransactionCoordinator, m: TxnMetadata) -> None:
    """Put metadata in place the way a load does: by replaying its record."""
    assert c.replay(*rec.encode(m, 1))


def init(c: TransactionCoordinator, ids: Ids, tid: str = T, timeout: int = 60_000, pid: int = -1,
         epoch: int = -1) -> tuple[E, int, int]:
    r = with_ids(c.init_producer_id, ids, tid, timeout, pid, epoch)
    return r.error, r.producer_id, r.producer_epoch


def ongoing(c: TransactionCoordinator, ids: Ids, *parts: tuple[str, int], tid: str = T) -> tuple[int, int]:
    _, pid, epoch = init(c, ids, tid)
    r = c.add_partitions(tid, pid, epoch, parts or [("t", 0)])
    assert set(r.errors.values()) == {E.NONE}
    return pid, epoch


# ------------------------------------------------------------------------------------------- InitProducerId

def test_init_new_id_asks_for_a_producer_id_then_starts_at_epoch_0() -> None:
    c = make()
    first = c.init_producer_id(T, 60_000)
    assert first.need_producer_id and not first.records and c.metadata(T) is None
    r = c.init_producer_id(T, 60_000, new_producer_id=77)
    assert (r.error, r.producer_id, r.producer_epoch) == (E.NONE, 77, 0)
    assert len(r.records) == 1 and r.records[0].partition == c.partition_for(T)
    m = c.metadata(T)
    assert m is not None and (m.state, m.producer_id, m.producer_epoch, m.txn_start_timestamp) == (
        TxnState.EMPTY, 77, 0, -1)


def test_reinit_bumps_the_epoch_and_fences_the_old_producer() -> None:
    c, ids = make(), Ids()
    _, pid, e0 = init(c, ids)
    err, pid2, e1 = init(c, ids)
    assert (err, pid2, e1) == (E.NONE, pid, e0 + 1) and ids.handed_out == [pid]
    assert c.add_partitions(T, pid, e0, [("t", 0)]).errors == {TP("t", 0): E.PRODUCER_FENCED}
    assert c.end_txn(T, pid, e0, True).error is E.PRODUCER_FENCED


def test_init_request_checks() -> None:
    c, ids = make(transaction_max_timeout_ms=10_000), Ids()
    assert c.init_producer_id("", 1000).error is E.INVALID_REQUEST
    assert c.init_producer_id(T, 10_001).error is E.INVALID_TRANSACTION_TIMEOUT
    assert c.init_producer_id(T, 0).error is E.INVALID_TRANSACTION_TIMEOUT
    assert c.init_producer_id(T, 1000, 5, -1).error is E.INVALID_REQUEST  # id without epoch
    assert c.init_producer_id(T, 1000, enable_2pc=True).error is E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    assert init(c, ids, timeout=10_000)[0] is E.NONE


def test_idempotent_producer_gets_a_fresh_id_and_no_state() -> None:
    c, ids = make(), Ids()
    r = with_ids(c.init_producer_id, ids, None, 0)
    assert (r.error, r.producer_id, r.producer_epoch, r.records) == (E.NONE, 1000, 0, [])
    assert c.transactional_ids() == []


def test_init_while_markers_are_pending_is_concurrent() -> None:
    c, ids = make(), Ids()
    pid, epoch = ongoing(c, ids)
    assert c.end_txn(T, pid, epoch, True).error is E.NONE
    assert init(c, ids)[0] is E.CONCURRENT_TRANSACTIONS


@pytest.mark.parametrize(("level", "last"), [(TV_0, -1), (TV_1, -1), (TV_2, 0)])
def test_init_on_an_ongoing_transaction_fences_and_aborts_it(level: int, last: int) -> None:
    c, ids = make(transaction_version_level=level), Ids()
    pid, epoch = ongoing(c, ids, ("a", 0), ("b", 1))
    r = c.init_producer_id(T, 60_000)
    assert r.error is E.CONCURRENT_TRANSACTIONS and (r.producer_id, r.producer_epoch) == (-1, -1)
    m = c.metadata(T)
    # PrepareEpochFence is never logged: the abort is, one epoch up (Kafka: below TV2 the fence's bump, at TV2
    # the abort's own, the fence's never applied), remembering the last epoch only at TV2
    assert m.state is TxnState.PREPARE_ABORT and m.producer_epoch == epoch + 1
    assert m.last_producer_epoch == (epoch if last == 0 else -1)
    assert len(r.records) == 1
    assert {(k.topic, k.partition, k.producer_id, k.producer_epoch, k.commit) for k in r.markers} == {
        ("a", 0, pid, epoch + 1, False), ("b", 1, pid, epoch + 1, False)}
    # the fenced producer cannot commit (TV1 checks the producer first); anything else waits for the markers
    assert c.end_txn(T, pid, epoch, True).error is E.PRODUCER_FENCED
    assert c.add_partitions(T, pid, epoch, [("c", 0)]).errors[TP("c", 0)] is E.CONCURRENT_TRANSACTIONS
    if level == TV_2:
        assert c.end_txn(T, pid, epoch, False, TV_2).error is E.CONCURRENT_TRANSACTIONS
    # until the markers are written the new producer retries; then it gets an epoch above the abort's
    assert init(c, ids)[0] is E.CONCURRENT_TRANSACTIONS
    assert c.complete_transaction(T, pid, epoch + 1, 0).error is E.NONE
    assert c.metadata(T).state is TxnState.COMPLETE_ABORT
    assert c.add_partitions(T, pid, epoch, [("c", 0)]).errors[TP("c", 0)] is E.PRODUCER_FENCED
    assert init(c, ids) == (E.NONE, pid, epoch + 2)


def test_kip360_expected_epoch() -> None:
    c, ids = make(), Ids()
    _, pid, e0 = init(c, ids)
    # the producer names its current epoch: bumped, and the old epoch remembered for a retry
    assert init(c, ids, pid=pid, epoch=e0) == (E.NONE, pid, e0 + 1)
    # a retry of that call (its response was lost) gets the same epoch again
    r = c.init_producer_id(T, 60_000, pid, e0)
    assert (r.error, r.producer_epoch) == (E.NONE, e0 + 1) and c.metadata(T).producer_epoch == e0 + 1
    # any other epoch is a zombie
    assert init(c, ids, pid=pid, epoch=e0 + 5)[0] is E.PRODUCER_FENCED
    # a producer id that is not this transactional id's
    assert init(c, ids, pid=pid + 1, epoch=e0 + 1)[0] is E.PRODUCER_FENCED
    # a new instance (no expected epoch) forgets the old epoch, so the earlier retry is now fenced
    assert init(c, ids) == (E.NONE, pid, e0 + 2)
    assert init(c, ids, pid=pid, epoch=e0)[0] is E.PRODUCER_FENCED


def test_kip360_expected_id_for_a_new_transactional_id_is_accepted() -> None:
    # a producer recovering from UNKNOWN_PRODUCER_ID after its id expired: it gets the new id
    c, ids = make(), Ids()
    assert init(c, ids, pid=5, epoch=3) == (E.NONE, 1000, 0)


def test_epoch_exhaustion_moves_to_a_new_producer_id() -> None:
    c, ids = make(), Ids()
    seed(c, TxnMetadata(T, 10, SHORT_MAX - 1, 60_000, TxnState.COMPLETE_COMMIT, txn_start_timestamp=1))
    assert c.init_producer_id(T, 60_000).need_producer_id
    assert init(c, ids) == (E.NONE, 1000, 0)
    assert c.metadata(T).prev_producer_id == 10


def test_kip360_retry_across_a_producer_id_rotation() -> None:
    c, ids = make(), Ids()
    seed(c, TxnMetadata(T, 10, SHORT_MAX - 1, 60_000, TxnState.EMPTY))
    # the producer at the last epoch asks for a bump: a new id at epoch 0
    assert init(c, ids, pid=10, epoch=SHORT_MAX - 1) == (E.NONE, 1000, 0)
    # its retry names the old id and exhausted epoch: answered with the new id again, no second bump (Kafka
    # logs the unchanged metadata again)
    r = c.init_producer_id(T, 60_000, 10, SHORT_MAX - 1)
    assert (r.error, r.producer_id, r.producer_epoch, r.need_producer_id) == (E.NONE, 1000, 0, False)
    assert ids.handed_out == [1000]


# ---------------------------------------------------------------------------------------- AddPartitionsToTxn

def test_add_partitions_errors() -> None:
    c, ids = make(), Ids()
    assert c.add_partitions("", 1, 0, [("t", 0)]).errors == {TP("t", 0): E.INVALID_REQUEST}
    assert c.add_partitions(T, 1, 0, [("t", 0)]).errors == {TP("t", 0): E.INVALID_PRODUCER_ID_MAPPING}
    _, pid, epoch = init(c, ids)
    assert c.add_partitions(T, pid + 1, epoch, [("t", 0)]).errors[TP("t", 0)] is E.INVALID_PRODUCER_ID_MAPPING
    assert c.add_partitions(T, pid, epoch + 1, [("t", 0)]).errors[TP("t", 0)] is E.PRODUCER_FENCED
    c.add_partitions(T, pid, epoch, [("t", 0)])
    c.end_txn(T, pid, epoch, False)
    r = c.add_partitions(T, pid, epoch, [("t", 1), ("u", 0)])
    assert r.errors == {TP("t", 1): E.CONCURRENT_TRANSACTIONS, TP("u", 0): E.CONCURRENT_TRANSACTIONS}
    assert not r.records


def test_add_partitions_grows_the_transaction_and_keeps_its_start_time() -> None:
    clock, ids = Clock(5000), Ids()
    c = make(clock)
    _, pid, epoch = init(c, ids)
    clock.now = 6000
    r1 = c.add_partitions(T, pid, epoch, [("t", 0)])
    assert len(r1.records) == 1
    clock.now = 7000
    r2 = c.add_partitions(T, pid, epoch, [("t", 0), ("u", 3)])
    m = c.metadata(T)
    assert len(r2.records) == 1 and m.state is TxnState.ONGOING
    assert m.topic_partitions == {TP("t", 0), TP("u", 3)}
    assert (m.txn_start_timestamp, m.txn_last_update_timestamp) == (6000, 7000)
    # already in the transaction: answered without a write
    r3 = c.add_partitions(T, pid, epoch, [("u", 3)])
    assert r3.errors == {TP("u", 3): E.NONE} and r3.records == []


def test_verify_only_answers_membership_and_writes_nothing() -> None:
    c, ids = make(), Ids()
    pid, epoch = ongoing(c, ids, ("t", 0))
    r = c.add_partitions(T, pid, epoch, [("t", 0), ("t", 1)], verify_only=True)
    assert r.errors == {TP("t", 0): E.NONE, TP("t", 1): E.TRANSACTION_ABORTABLE} and r.records == []
    assert TP("t", 1) not in c.metadata(T).topic_partitions
    assert c.add_partitions(T, pid, epoch + 1, [("t", 0)], verify_only=True).errors[TP("t", 0)] is \
        E.PRODUCER_FENCED
    assert c.add_partitions("other", pid, epoch, [("t", 0)], verify_only=True).errors[TP("t", 0)] is \
        E.INVALID_PRODUCER_ID_MAPPING
    c.end_txn(T, pid, epoch, True)
    assert c.add_partitions(T, pid, epoch, [("t", 0)], verify_only=True).errors[TP("t", 0)] is \
        E.CONCURRENT_TRANSACTIONS


def test_unknown_partitions_fail_the_request() -> None:
    c = TransactionCoordinator(clock=Clock(), partition_exists=lambda t, p: t == "t")
    ids = Ids()
    _, pid, epoch = init(c, ids)
    r = c.add_partitions(T, pid, epoch, [("t", 0), ("nope", 1)])
    assert r.errors == {TP("t", 0): E.OPERATION_NOT_ATTEMPTED, TP("nope", 1): E.UNKNOWN_TOPIC_OR_PARTITION}
    assert not r.records and c.metadata(T).state is TxnState.EMPTY


def test_add_partitions_v5_records_tv2() -> None:
    c, ids = make(), Ids()
    _, pid, epoch = init(c, ids)
    c.add_partitions(T, pid, epoch, [("t", 0)], client_transaction_version=TV_2)
    assert c.metadata(T).client_transaction_version == TV_2


def test_add_offsets_adds_the_group_offsets_partition() -> None:
    c, ids = make(), Ids()
    _, pid, epoch = init(c, ids)
    r = c.add_offsets(T, pid, epoch, ("__consumer_offsets", 17))
    assert r.error is E.NONE and len(r.records) == 1
    assert c.metadata(T).topic_partitions == {TP("__consumer_offsets", 17)}
    assert c.add_offsets(T, pid, epoch + 1, ("__consumer_offsets", 17)).error is E.PRODUCER_FENCED
    end = c.end_txn(T, pid, epoch, True)
    assert [(k.topic, k.partition) for k in end.markers] == [("__consumer_offsets", 17)]


# ------------------------------------------------------------------------------------------------ EndTxn TV1

def test_end_txn_tv1_commit() -> None:
    c, ids = make(), Ids()
    pid, epoch = ongoing(c, ids, ("t", 0), ("t", 1))
    r = c.end_txn(T, pid, epoch, True, TV_0)
    assert (r.error, r.producer_id, r.producer_epoch) == (E.NONE, -1, -1) and len(r.records) == 1
    assert c.metadata(T).state is TxnState.PREPARE_COMMIT and c.metadata(T).producer_epoch == epoch
    assert sorted((k.topic, k.partition, k.producer_id, k.producer_epoch, k.commit, k.coordinator_epoch)
                  for k in r.markers) == [("t", 0, pid, epoch, True, 0), ("t", 1, pid, epoch, True, 0)]
    # a retry while the markers are written, or the other outcome: both wait for them (Kafka's pending state)
    assert c.end_txn(T, pid, epoch, True).error is E.CONCURRENT_TRANSACTIONS
    assert c.end_txn(T, pid, epoch, False).error is E.CONCURRENT_TRANSACTIONS
    done = c.complete_transaction(T, pid, epoch, 0)
    assert done.error is E.NONE and len(done.records) == 1
    m = c.metadata(T)
    assert (m.state, m.topic_partitions, m.producer_epoch) == (TxnState.COMPLETE_COMMIT, frozenset(), epoch)
    # a retry after completion succeeds without a write; the other outcome is refused
    again = c.end_txn(T, pid, epoch, True)
    assert again.error is E.NONE and not again.records
    assert c.end_txn(T, pid, epoch, False).error is E.INVALID_TXN_STATE


def test_end_txn_tv1_errors() -> None:
    c, ids = make(), Ids()
    assert c.end_txn("", 1, 0, True).error is E.INVALID_REQUEST
    assert c.end_txn(T, 1, 0, True).error is E.INVALID_PRODUCER_ID_MAPPING
    _, pid, epoch = init(c, ids)
    assert c.end_txn(T, pid, epoch, True).error is E.INVALID_TXN_STATE  # Empty: nothing to end
    assert c.end_txn(T, pid, epoch, False).error is E.INVALID_TXN_STATE
    c.add_partitions(T, pid, epoch, [("t", 0)])
    assert c.end_txn(T, pid + 1, epoch, True).error is E.INVALID_PRODUCER_ID_MAPPING
    assert c.end_txn(T, pid, epoch - 1, True).error is E.PRODUCER_FENCED
    assert c.end_txn(T, pid, epoch + 1, True).error is E.PRODUCER_FENCED  # strict equality from clients


# ------------------------------------------------------------------------------------------------ EndTxn TV2

def test_end_txn_tv2_bumps_the_epoch_and_returns_it() -> None:
    c, ids = make(), Ids()
    pid, epoch = ongoing(c, ids, ("t", 0))
    r = c.end_txn(T, pid, epoch, True, TV_2)
    assert (r.error, r.producer_id, r.producer_epoch) == (E.NONE, pid, epoch + 1)
    assert [(k.producer_epoch, k.transaction_version) for k in r.markers] == [(epoch + 1, TV_2)]
    m = c.metadata(T)
    assert (m.state, m.producer_epoch, m.client_transaction_version) == (TxnState.PREPARE_COMMIT, epoch + 1, TV_2)
    # while the markers are pending every EndTxn waits, whatever its outcome, producer id or epoch (Kafka's
    # pending transition answers before the producer checks)
    assert c.end_txn(T, pid, epoch, True, TV_2).error is E.CONCURRENT_TRANSACTIONS
    assert c.end_txn(T, pid, epoch, False, TV_2).error is E.CONCURRENT_TRANSACTIONS
    assert c.end_txn(T, pid, epoch + 1, True, TV_2).error is E.CONCURRENT_TRANSACTIONS
    assert c.end_txn(T, pid + 7, epoch + 5, True, TV_2).error is E.CONCURRENT_TRANSACTIONS
    c.complete_transaction(T, pid, epoch + 1, 0)
    # a retry after completion: the answer the first call gave, nothing written
    again = c.end_txn(T, pid, epoch, True, TV_2)
    assert (again.error, again.producer_id, again.producer_epoch, again.records) == (E.NONE, pid, epoch + 1, [])
    assert c.end_txn(T, pid, epoch, False, TV_2).error is E.INVALID_TXN_STATE
    # the next transaction with the new epoch
    assert c.add_partitions(T, pid, epoch + 1, [("t", 0)], client_transaction_version=TV_2).records
    assert c.end_txn(T, pid, epoch + 1, False, TV_2).producer_epoch == epoch + 2


def test_end_txn_tv2_abort_without_a_transaction() -> None:
    c, ids = make(), Ids()
    _, pid, epoch = init(c, ids)
    assert c.end_txn(T, pid, epoch, True, TV_2).error is E.INVALID_TXN_STATE
    assert c.end_txn(T, pid, epoch - 1, False, TV_2).error is E.PRODUCER_FENCED  # Empty takes no retry
    r = c.end_txn(T, pid, epoch, False, TV_2)
    # nothing to mark: PrepareAbort and CompleteAbort at once
    assert (r.error, r.producer_epoch, r.markers, len(r.records)) == (E.NONE, epoch + 1, [], 2)
    m = c.metadata(T)
    assert (m.state, m.producer_epoch) == (TxnState.COMPLETE_ABORT, epoch + 1)
    assert m.txn_start_timestamp != -1  # the abort time stands in for the start
    # aborting again with the current epoch bumps again; committing is refused
    assert c.end_txn(T, pid, epoch + 1, True, TV_2).error is E.INVALID_TXN_STATE
    assert c.end_txn(T, pid, epoch + 1, False, TV_2).producer_epoch == epoch + 2


def test_end_txn_tv2_abort_after_a_commit() -> None:
    c, ids = make(), Ids()
    pid, epoch = ongoing(c, ids)
    c.end_txn(T, pid, epoch, True, TV_2)
    c.complete_transaction(T, pid, epoch + 1, 0)
    assert c.end_txn(T, pid, epoch + 1, True, TV_2).error is E.INVALID_TXN_STATE
    r = c.end_txn(T, pid, epoch + 1, False, TV_2)
    assert (r.error, r.producer_epoch) == (E.NONE, epoch + 2)
    assert c.metadata(T).state is TxnState.COMPLETE_ABORT


def test_end_txn_tv2_epoch_overflow_moves_to_the_next_producer_id() -> None:
    c = make()
    last = SHORT_MAX - 1
    seed(c, TxnMetadata(T, 10, last, 60_000, TxnState.ONGOING, frozenset({TP("t", 0)}), 5, 5,
                        client_transaction_version=TV_2))
    need = c.end_txn(T, 10, last, True, TV_2)
    assert need.need_producer_id and not need.records
    r = c.end_txn(T, 10, last, True, TV_2, new_producer_id=555)
    assert (r.error, r.producer_id, r.producer_epoch) == (E.NONE, 555, 0)
    # the markers carry the old id at the last epoch
    assert [(k.producer_id, k.producer_epoch) for k in r.markers] == [(10, SHORT_MAX)]
    m = c.metadata(T)
    assert (m.producer_id, m.producer_epoch, m.next_producer_id) == (10, SHORT_MAX, 555)
    c.complete_transaction(T, 10, SHORT_MAX, 0)
    m = c.metadata(T)
    assert (m.state, m.producer_id, m.producer_epoch, m.prev_producer_id, m.next_producer_id) == (
        TxnState.COMPLETE_COMMIT, 555, 0, 10, -1)
    # the retry with the old id and epoch is recognized
    again = c.end_txn(T, 10, last, True, TV_2)
    assert (again.error, again.producer_id, again.producer_epoch, again.records) == (E.NONE, 555, 0, [])
    assert c.end_txn(T, 10, last - 1, True, TV_2).error is E.INVALID_PRODUCER_ID_MAPPING


# ------------------------------------------------------------------------------------------------ completion

def test_stale_completions_write_nothing() -> None:
    c, ids = make(), Ids()
    pid, epoch = ongoing(c, ids)
    assert c.complete_transaction(T, pid, epoch, 0).error is E.INVALID_TXN_STATE  # not prepared
    c.end_txn(T, pid, epoch, True)
    assert c.complete_transaction(T, pid, epoch, 3).error is E.NOT_COORDINATOR
    assert c.complete_transaction(T, pid, epoch + 1, 0).error is E.PRODUCER_FENCED
    assert c.complete_transaction(T, pid + 1, epoch, 0).error is E.INVALID_PRODUCER_ID_MAPPING
    assert c.complete_transaction("nobody", pid, epoch, 0).error is E.INVALID_PRODUCER_ID_MAPPING
    assert c.metadata(T).state is TxnState.PREPARE_COMMIT


# ---------------------------------------------------------------------------------------- timeouts, expiry

def test_timed_out_transactions_are_aborted_with_a_bumped_epoch() -> None:
    clock, ids = Clock(10_000), Ids()
    c = make(clock, transaction_version_level=TV_1)
    pid, epoch = ongoing(c, ids, ("t", 0))
    clock.now = 30_000
    ongoing(c, ids, tid="young")
    clock.now = 10_000 + 60_000
    assert c.timed_out() == [] and not c.abort_timed_out().records  # not strictly past the timeout yet
    clock.now += 1
    r = c.abort_timed_out()
    assert [rec_.partition for rec_ in r.records] == [c.partition_for(T)]
    assert [(k.transactional_id, k.producer_epoch, k.commit) for k in r.markers] == [(T, epoch + 1, False)]
    assert c.end_txn(T, pid, epoch, True).error is E.PRODUCER_FENCED  # the zombie
    assert c.timed_out() == []


def test_coordinator_aborts_at_the_last_epoch_move_to_a_new_producer_id_at_tv2() -> None:
    """As Kafka's TV2 EndTxn path, which its own aborts take: the abort bump takes the last epoch, so the
    producer id moves on once the abort is complete (timeout and fence alike)."""
    clock = Clock(10_000)
    c, ids = make(clock, transaction_version_level=TV_2), Ids()
    last = SHORT_MAX - 1
    for tid in ("timed-out", "fenced"):
        seed(c, TxnMetadata(tid, 10 if tid == "timed-out" else 11, last, 1_000, TxnState.ONGOING,
                            frozenset({TP("t", 0)}), 5_000, 5_000, client_transaction_version=TV_2))
    clock.now = 20_000
    assert c.timed_out() == ["timed-out", "fenced"]
    assert not c.abort_timed_out().records  # both need a new producer id: left to the one-by-one path
    r = with_ids(c.abort_timed_out_transaction, ids, "timed-out")
    assert [(k.producer_id, k.producer_epoch) for k in r.markers] == [(10, SHORT_MAX)]
    assert (r.producer_id, r.producer_epoch) == (-1, -1)
    r = with_ids(c.init_producer_id, ids, "fenced", 60_000)
    assert r.error is E.CONCURRENT_TRANSACTIONS and (r.producer_id, r.producer_epoch) == (-1, -1)
    assert [(k.producer_id, k.producer_epoch) for k in r.markers] == [(11, SHORT_MAX)]
    for tid, pid, new in (("timed-out", 10, 1000), ("fenced", 11, 1001)):
        assert c.complete_transaction(tid, pid, SHORT_MAX, 0).error is E.NONE
        m = c.metadata(tid)
        assert (m.state, m.producer_id, m.producer_epoch, m.prev_producer_id) == (TxnState.COMPLETE_ABORT, new, 0,
                                                                                 pid)
    assert init(c, ids, "fenced") == (E.NONE, 1001, 1)


def test_expiry_tombstones_idle_ids_only() -> None:
    clock, ids = Clock(0), Ids()
    c = make(clock)
    init(c, ids, "idle")
    ongoing(c, ids, tid="busy")
    pid, epoch = ongoing(c, ids, tid="done")
    c.end_txn("done", pid, epoch, True)
    c.complete_transaction("done", pid, epoch, 0)
    clock.now = 999
    assert c.expire_transactional_ids(expiration_ms=1000) == []
    clock.now = 1000
    out = c.expire_transactional_ids(expiration_ms=1000)
    assert sorted(r.key for r in out) == sorted([rec.key_bytes("idle"), rec.key_bytes("done")])
    assert all(r.value is None for r in out)
    assert c.transactional_ids() == ["busy"]
    # an expired id starts over with a new producer id
    old = ids.handed_out[0]
    assert init(c, ids, "idle")[1] != old and c.metadata("idle").producer_epoch == 0


# ----------------------------------------------------------------------------------- Describe/List

def test_describe_transactions() -> None:
    clock, ids = Clock(50), Ids()
    c = make(clock)
    pid, epoch = ongoing(c, ids, ("b", 1), ("a", 2), ("b", 0))
    [d, missing, empty] = c.describe_transactions([T, "nope", ""])
    assert (d.error, d.state, d.producer_id, d.producer_epoch, d.transaction_timeout_ms,
            d.transaction_start_time_ms, d.topics) == (E.NONE, "Ongoing", pid, epoch, 60_000, 50,
                                                       {"a": [2], "b": [0, 1]})
    assert missing.error is E.TRANSACTIONAL_ID_NOT_FOUND and empty.error is E.INVALID_REQUEST


def test_list_transactions_filters() -> None:
    clock, ids = Clock(1000), Ids()
    c = make(clock)
    init(c, ids, "e")
    p_o, _ = ongoing(c, ids, tid="o")
    clock.now = 5000
    everything = c.list_transactions()
    assert {(t.transactional_id, t.state) for t in everything.transactions} == {("e", "Empty"), ("o", "Ongoing")}
    only = c.list_transactions(["Ongoing", "Bogus"])
    assert [t.transactional_id for t in only.transactions] == ["o"] and only.unknown_state_filters == ["Bogus"]
    assert [t.transactional_id for t in c.list_transactions(producer_id_filters=[p_o]).transactions] == ["o"]
    # running longer than 4000 ms: "o" started at 1000, so 4000 ms at 5000 is not longer
    assert "o" not in [t.transactional_id for t in c.list_transactions(duration_filter_ms=4000).transactions]
    assert "o" in [t.transactional_id for t in c.list_transactions(duration_filter_ms=3999).transactions]


# ---------------------------------------------------------------------------------------- loading, replay

def test_loading_and_unloading_answer_with_coordinator_errors() -> None:
    c, ids = make(), Ids()
    p = c.partition_for(T)
    c.load_begin(p, coordinator_epoch=4)
    assert c.init_producer_id(T, 1000).error is E.COORDINATOR_LOAD_IN_PROGRESS
    assert c.describe_transactions([T])[0].error is E.COORDINATOR_LOAD_IN_PROGRESS
    assert c.list_transactions().error is E.COORDINATOR_LOAD_IN_PROGRESS
    c.load_complete(p)
    pid, epoch = ongoing(c, ids)
    assert [k.coordinator_epoch for k in c.end_txn(T, pid, epoch, True).markers] == [4]
    c.unload(p)
    assert c.metadata(T) is None
    assert c.end_txn(T, pid, epoch, True).error is E.NOT_COORDINATOR
    assert c.add_partitions(T, pid, epoch, [("t", 0)]).errors[TP("t", 0)] is E.NOT_COORDINATOR


def test_prepared_transactions_are_completed_after_a_restart() -> None:
    c, ids = make(), Ids()
    pid, epoch = ongoing(c, ids, ("t", 0), ("t", 1))
    records = _log(c)
    res = c.end_txn(T, pid, epoch, True, TV_2)
    records += res.records
    fresh = make()
    p = fresh.partition_for(T)
    fresh.load_begin(p, coordinator_epoch=9)
    for r in records:
        fresh.replay(r.key, r.value)
    resend = fresh.load_complete(p)
    assert sorted((k.topic, k.partition, k.producer_epoch, k.commit, k.coordinator_epoch) for k in resend.markers) \
        == [("t", 0, epoch + 1, True, 9), ("t", 1, epoch + 1, True, 9)]
    assert fresh.pending_completions().markers == resend.markers
    assert fresh.complete_transaction(T, pid, epoch + 1, 9).error is E.NONE
    assert fresh.pending_completions().markers == []


def _log(c: TransactionCoordinator) -> list:
    """The records that rebuild c's current state (one per id: what compaction would leave)."""
    return [rec.Record(c.partition_for(tid), *rec.encode(c.metadata(tid), 1)) for tid in c.transactional_ids()]


def test_replay_rebuilds_the_state_built_while_serving() -> None:
    clock, ids = Clock(100), Ids()
    c = make(clock)
    log: list = []

    def keep(res):
        log.extend(res.records)
        return res

    for tid in ("a", "b", "c", "d"):
        keep(with_ids(c.init_producer_id, ids, tid, 30_000))
    for tid, tv in (("a", TV_0), ("b", TV_2), ("c", TV_2)):
        m = c.metadata(tid)
        keep(c.add_partitions(tid, m.producer_id, m.producer_epoch, [("x", 0), ("y", 1)],
                              client_transaction_version=tv))
        clock.now += 10
        keep(c.end_txn(tid, m.producer_id, m.producer_epoch, tid != "c", tv))
    m = c.metadata("a")
    keep(c.complete_transaction("a", m.producer_id, m.producer_epoch, 0))
    m = c.metadata("d")
    keep(c.add_offsets("d", m.producer_id, m.producer_epoch, ("__consumer_offsets", 3)))
    clock.now += 60_000
    keep(c.abort_timed_out())
    keep(with_ids(c.init_producer_id, ids, "a", 30_000))
    log.extend(c.expire_transactional_ids(expiration_ms=1))
    assert snapshot(replayed(log)) == snapshot(c)
    assert snapshot(c)  # not vacuous


# ---------------------------------------------------------------------------------------- versions

def test_request_versions() -> None:
    assert client_transaction_version("EndTxn", 4) == TV_0
    assert client_transaction_version("EndTxn", 5) == TV_2
    assert client_transaction_version("AddPartitionsToTxn", 5) == TV_2
    assert client_transaction_version("AddOffsetsToTxn", 4) == TV_0
    assert error_for_version(E.PRODUCER_FENCED, "EndTxn", 1) is E.INVALID_PRODUCER_EPOCH
    assert error_for_version(E.PRODUCER_FENCED, "EndTxn", 2) is E.PRODUCER_FENCED
    assert error_for_version(E.PRODUCER_FENCED, "InitProducerId", 3) is E.INVALID_PRODUCER_EPOCH
    assert error_for_version(E.CONCURRENT_TRANSACTIONS, "EndTxn", 0) is E.CONCURRENT_TRANSACTIONS


def test_tv2_requests_need_transaction_version_2() -> None:
    c, ids = make(transaction_version_level=TV_1), Ids()
    pid, epoch = ongoing(c, ids)
    assert c.end_txn(T, pid, epoch, True, TV_2).error is E.UNSUPPORTED_VERSION
    assert c.add_partitions(T, pid, epoch, [("t", 9)], client_transaction_version=TV_2).errors == {
        TP("t", 9): E.UNSUPPORTED_VERSION}
    assert c.metadata(T).state is TxnState.ONGOING
