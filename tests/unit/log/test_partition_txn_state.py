"""Transaction state of a partition: Kafka's append and marker rules, LSO, index entries, snapshot and replay."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from broker.log.txn_index import AbortedTxn
from broker.log.txn_state import TxnProducerEntry, TxnStateTable
from protocol import control_records as cr
from protocol import records as rec
from protocol.errors import ErrorCode
from tests.unit.log.txn_log_helpers import TS, BuiltLog, append_op, build_log, ops_strategy


def header(pid: int, offset: int, n: int = 1, *, epoch: int = 0, transactional: bool = True,
           ts: int = TS) -> rec.BatchHeader:
    raw = rec.build_batch([rec.Record(b"k", b"v")] * n, base_offset=offset, timestamp=ts, producer_id=pid,
                          producer_epoch=epoch, base_sequence=0, transactional=transactional)
    return rec.read_header(raw)


def test_first_transactional_batch_starts_the_transaction() -> None:
    t = TxnStateTable()
    t.on_append(header(1, 10, 3))
    t.on_append(header(1, 15, 2))  # same transaction
    assert t.ongoing_txn_first_offset(1) == 10
    assert t.first_unstable_offset() == 10 and t.first_undecided_offset() == 10
    assert t.last_stable_offset(high_watermark=17) == 10
    assert t.last_stable_offset(high_watermark=8) == 8  # never past the high watermark
    assert t.on_marker(1, 0, True, 17, 0) is None  # commit: nothing for the index
    assert t.ongoing_txn_first_offset(1) is None
    # decided, but the marker is not below the high watermark yet: still unstable
    assert t.last_stable_offset(high_watermark=17) == 10
    assert t.last_stable_offset(high_watermark=18) == 18
    assert t.first_unstable_offset() == 10
    t.on_high_watermark(18)
    assert t.first_unstable_offset() is None and t.last_stable_offset(18) == 18


def test_abort_returns_the_index_entry_with_kafkas_lso() -> None:
    t = TxnStateTable()
    t.on_append(header(1, 0, 2))
    t.on_append(header(2, 2, 2))
    t.on_append(header(3, 4, 1))
    # producer 2 aborts: the oldest other open transaction (producer 1's, from 0) bounds the LSO
    assert t.on_marker(2, 0, False, 5, 0) == AbortedTxn(2, 2, 5, 0)
    t.on_marker(1, 0, True, 6, 0)
    # producer 3 aborts with no other transaction open: the LSO is just past its marker
    assert t.on_marker(3, 0, False, 7, 0) == AbortedTxn(3, 4, 7, 8)
    # a marker for a transaction without data here: no entry
    assert t.on_marker(3, 0, False, 8, 0) is None
    assert t.ongoing_txns() == {}


def test_lso_ignores_decided_transactions_of_others() -> None:
    # Kafka's lastStableOffset(completedTxn) looks at open transactions only, not at decided unreplicated ones
    t = TxnStateTable()
    t.on_append(header(1, 0))
    t.on_marker(1, 0, True, 1, 0)  # decided, marker at 1 not below any high watermark yet
    t.on_append(header(2, 2))
    assert t.on_marker(2, 0, False, 3, 0) == AbortedTxn(2, 2, 3, 4)


def test_fenced_epoch_on_data() -> None:
    t = TxnStateTable()
    t.on_append(header(1, 0, epoch=5))
    assert t.check_append(header(1, 1, epoch=4)) == ErrorCode.INVALID_PRODUCER_EPOCH
    assert t.check_append(header(1, 1, epoch=4, transactional=False)) == ErrorCode.INVALID_PRODUCER_EPOCH
    assert t.check_append(header(1, 1, epoch=5)) == ErrorCode.NONE
    assert t.check_append(header(1, 1, epoch=6)) == ErrorCode.NONE  # a newer epoch is accepted (as Kafka)
    assert t.check_append(header(2, 1, epoch=0)) == ErrorCode.NONE  # unknown producer


def test_non_transactional_batch_during_a_transaction() -> None:
    t = TxnStateTable()
    t.on_append(header(1, 0))
    assert t.check_append(header(1, 1, transactional=False)) == ErrorCode.INVALID_TXN_STATE
    t.on_marker(1, 0, False, 1, 0)
    assert t.check_append(header(1, 2, transactional=False)) == ErrorCode.NONE
    # plain idempotent producers are not kept
    t.on_append(header(9, 3, transactional=False))
    assert t.entry(9) is None and len(t) == 1


def test_marker_epoch_rules() -> None:
    t = TxnStateTable()
    assert t.check_marker(1, 0, 0) == ErrorCode.NONE  # unknown producer
    t.on_append(header(1, 0, epoch=3))
    assert t.check_marker(1, 2, 0) == ErrorCode.INVALID_PRODUCER_EPOCH
    assert t.check_marker(1, 3, 0) == ErrorCode.NONE
    # transaction version 2: the coordinator bumps the epoch for the marker, so an equal epoch is stale...
    assert t.check_marker(1, 3, 0, transaction_version=2) == ErrorCode.INVALID_PRODUCER_EPOCH
    assert t.check_marker(1, 4, 0, transaction_version=2) == ErrorCode.NONE
    t.on_marker(1, 4, True, 1, 0)
    # ...unless no transaction is open: a retried marker is written again
    assert t.check_marker(1, 4, 0, transaction_version=2) == ErrorCode.NONE
    assert t.check_marker(1, 3, 0, transaction_version=2) == ErrorCode.INVALID_PRODUCER_EPOCH
    assert t.check_marker(1, 4, 0) == ErrorCode.NONE
    assert t.entry(1).epoch == 4


def test_coordinator_fencing() -> None:
    t = TxnStateTable()
    t.on_append(header(1, 0))
    t.on_marker(1, 0, True, 1, coordinator_epoch=7)
    assert t.check_marker(1, 0, 6) == ErrorCode.TRANSACTION_COORDINATOR_FENCED
    assert t.check_marker(1, 0, 7) == ErrorCode.NONE
    assert t.check_marker(1, 0, 8) == ErrorCode.NONE
    assert t.check_marker(1, -1, 6) == ErrorCode.INVALID_PRODUCER_EPOCH  # the epoch is checked first
    assert t.entry(1).coordinator_epoch == 7


def test_log_start_offset_clamps_the_first_unstable_offset() -> None:
    t = TxnStateTable()
    t.on_append(header(1, 5))
    assert t.first_unstable_offset(log_start_offset=8) == 8
    assert t.last_stable_offset(20, log_start_offset=8) == 8
    t.on_marker(1, 0, True, 6, 0)
    t.on_log_start_offset(7)
    assert t.first_unstable_offset() is None


def test_expiry_keeps_producers_in_a_transaction() -> None:
    t = TxnStateTable()
    t.on_append(header(1, 0, ts=100))
    t.on_append(header(2, 1, ts=100))
    t.on_marker(2, 0, True, 2, 0, timestamp=100)
    assert t.remove_expired(now_ms=10_000, expiration_ms=1_000) == 1
    assert t.entry(1) is not None and t.entry(2) is None


def test_snapshot_restore() -> None:
    t = TxnStateTable()
    t.on_append(header(1, 0))
    t.on_append(header(2, 3, epoch=4))
    t.on_marker(2, 4, False, 4, 9)
    snap = t.snapshot()
    snap[0].epoch = 99  # a copy
    restored = TxnStateTable.restore(t.snapshot())
    assert restored.snapshot() == t.snapshot()
    assert restored.entry(2) == TxnProducerEntry(2, epoch=4, coordinator_epoch=9, last_timestamp=-1)
    assert restored.ongoing_txns() == {1: 0} and restored.first_unstable_offset() == 0
    assert restored.check_marker(2, 4, 8) == ErrorCode.TRANSACTION_COORDINATOR_FENCED


def test_replay_skips_empty_control_batches() -> None:
    t = TxnStateTable()
    empty = header(1, 0)._replace(attributes=rec.ATTR_TRANSACTIONAL | rec.ATTR_CONTROL, records_count=0)
    assert t.replay([(header(1, 0), None), (empty, None)]) == []
    assert t.ongoing_txns() == {1: 0}


def reference_aborts(log: BuiltLog) -> list[AbortedTxn]:
    """The index entries Kafka would write: for each aborted transaction with data, in marker order, the LSO is
    the first offset of the oldest transaction of another producer open when the marker was written."""
    out = []
    for txn in sorted((t for t in log.txns if t.outcome == "abort"), key=lambda t: t.marker):
        open_others = [o.first for o in log.txns
                       if o.pid != txn.pid and o.first < txn.marker and (o.marker is None or o.marker > txn.marker)]
        out.append(AbortedTxn(txn.pid, txn.first, txn.marker, min(open_others, default=txn.marker + 1)))
    return out


@settings(max_examples=300, deadline=None)
@given(ops_strategy, st.lists(st.integers(0, 4), min_size=30, max_size=30))
def test_lso_and_index_entries_match_a_reference_model(ops, hw_lags) -> None:
    t = TxnStateTable()
    log = BuiltLog()
    aborts: list[AbortedTxn] = []
    hw = 0
    for op, lag in zip(ops, hw_lags, strict=False):
        _raw, h, marker = append_op(log, op)
        if marker is None:
            assert t.check_append(h) == ErrorCode.NONE
            t.on_append(h)
        else:
            assert t.check_marker(h.producer_id, h.producer_epoch, marker.coordinator_epoch) == ErrorCode.NONE
            entry = t.on_marker(h.producer_id, h.producer_epoch, marker.commit, h.base_offset,
                                marker.coordinator_epoch)
            if entry is not None:
                aborts.append(entry)
        hw = max(hw, log.leo - lag)  # a high watermark trailing the log end by up to 4 offsets
        t.on_high_watermark(hw)
        assert t.last_stable_offset(hw) == log.reference_lso(hw)
        open_firsts = [x.first for x in log.open.values()]
        assert t.first_undecided_offset() == min(open_firsts, default=None)
    assert aborts == reference_aborts(log)
    t.on_high_watermark(log.leo)
    assert t.last_stable_offset(log.leo) == log.reference_lso(log.leo)


@settings(max_examples=200, deadline=None)
@given(ops_strategy, st.integers(0, 30))
def test_replay_from_bytes_and_from_a_snapshot_rebuild_the_same_state(ops, cut) -> None:
    log = build_log(ops)
    live = TxnStateTable()
    live_aborts = live.replay(log.batches)
    scanned = TxnStateTable()
    assert scanned.replay(cr.iter_txn_batches(log.data)) == live_aborts == reference_aborts(log)
    assert scanned.snapshot() == live.snapshot()
    # a snapshot taken part way, then the rest of the log replayed
    cut = min(cut, len(log.batches))
    first = TxnStateTable()
    head = first.replay(log.batches[:cut])
    resumed = TxnStateTable.restore(first.snapshot())
    assert head + resumed.replay(log.batches[cut:]) == live_aborts
    assert resumed.snapshot() == live.snapshot()
    assert resumed.ongoing_txns() == live.ongoing_txns() == {pid: x.first for pid, x in log.open.items()}
    resumed.on_high_watermark(log.leo)
    assert resumed.last_stable_offset(log.leo) == log.reference_lso(log.leo)
