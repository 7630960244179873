"""read_committed filtering: Kafka's walk over fetched batches with the aborted transactions, against a per-record
model of which transaction each record belongs to and how it ended."""

from __future__ import annotations

from typing import NamedTuple

from hypothesis import given, settings
from hypothesis import strategies as st

from broker.log.read_committed import (
    Fate,
    classify_batches,
    classify_txn_batches,
    plan_read_committed,
)
from broker.log.txn_index import collect_across_segments
from broker.log.txn_state import TxnStateTable
from protocol import control_records as cr
from protocol import records as rec
from tests.unit.log.txn_log_helpers import TS, TXN_PIDS, build_log, ops_strategy


class Aborted(NamedTuple):
    """What a fetch response carries: nothing more than the producer id and first offset."""

    producer_id: int
    first_offset: int


def data(pid: int, offset: int, n: int = 1, *, transactional: bool = True) -> tuple[rec.BatchHeader, None]:
    raw = rec.build_batch([rec.Record(b"k", b"v")] * n, base_offset=offset, timestamp=TS, producer_id=pid,
                          producer_epoch=0 if pid >= 0 else -1, base_sequence=0 if pid >= 0 else -1,
                          transactional=transactional)
    return rec.read_header(raw), None


def marker(pid: int, offset: int, commit: bool) -> tuple[rec.BatchHeader, cr.EndTxnMarker]:
    raw = cr.build_end_txn_marker(producer_id=pid, producer_epoch=0, commit=commit, coordinator_epoch=0,
                                  base_offset=offset, timestamp=TS)
    return rec.read_header(raw), cr.read_end_txn_marker(raw)


def test_aborted_data_and_markers_are_archived() -> None:
    batches = [
        data(1, 0, 2),  # aborted
        data(2, 2, 2),  # committed
        data(-1, 4, 1),  # plain
        data(1, 5, 1),  # aborted
        marker(1, 6, commit=False),
        marker(2, 7, commit=True),
        data(1, 8, 2),  # producer 1's next transaction: committed
        data(9, 10, 1, transactional=False),  # idempotent
        marker(1, 11, commit=True),
    ]
    fates = [f for _, f in classify_txn_batches(batches, [Aborted(1, 0)])]
    assert fates == [Fate.ABORTED, Fate.DELIVER, Fate.DELIVER, Fate.ABORTED, Fate.CONTROL, Fate.CONTROL,
                     Fate.DELIVER, Fate.DELIVER, Fate.CONTROL]
    plan = plan_read_committed(classify_txn_batches(batches, [Aborted(1, 0)]))
    assert plan.deliver == [(2, 4), (8, 10)]
    assert plan.archive == [(0, 1), (5, 7), (11, 11)]
    assert (plan.aborted_records, plan.control_records) == (3, 3)
    assert [f for _, f in classify_batches([h for h, _ in batches], [Aborted(1, 0)])] == fates


def test_an_abort_not_yet_reached_does_not_count() -> None:
    # producer 1's committed transaction before its aborted one (first offset 3) is delivered
    batches = [data(1, 0, 2), marker(1, 2, commit=True), data(1, 3, 1), marker(1, 4, commit=False)]
    plan = plan_read_committed(classify_txn_batches(batches, [Aborted(1, 3)]))
    assert plan.deliver == [(0, 1)] and plan.archive == [(2, 4)]


def test_only_transactional_batches_are_skipped() -> None:
    # Kafka skips transactional batches of an aborted producer only (a plain one cannot be appended mid-transaction)
    batches = [data(1, 0), data(1, 1, transactional=False), marker(1, 2, commit=False)]
    assert [f for _, f in classify_txn_batches(batches, [Aborted(1, 0)])] == [Fate.ABORTED, Fate.DELIVER,
                                                                               Fate.CONTROL]


def test_start_inside_a_batch_and_end_bound() -> None:
    batches = [data(1, 0, 5), data(2, 5, 5), marker(1, 10, commit=False)]
    plan = plan_read_committed(classify_txn_batches(batches, [Aborted(1, 0)]), start_offset=3, end_offset=8)
    assert plan.archive == [(3, 4)] and plan.deliver == [(5, 7)]
    assert plan.aborted_records == 2


def test_gaps_between_batches_are_in_neither_list() -> None:
    batches = [data(-1, 0, 2), data(-1, 5, 1), data(1, 6, 1), marker(1, 9, commit=False)]
    plan = plan_read_committed(classify_txn_batches(batches, [Aborted(1, 6)]))
    assert plan.deliver == [(0, 1), (5, 5)] and plan.archive == [(6, 6), (9, 9)]


def test_a_commit_marker_does_not_end_an_aborted_run_when_markers_are_known() -> None:
    # not a log this broker writes (an ABORT marker is missing): Kafka's exact walk keeps producer 1 aborted
    batches = [data(1, 0), marker(1, 1, commit=True), data(1, 2)]
    assert [f for _, f in classify_txn_batches(batches, [Aborted(1, 0)])] == [Fate.ABORTED, Fate.CONTROL,
                                                                               Fate.ABORTED]
    assert [f for _, f in classify_batches([h for h, _ in batches], [Aborted(1, 0)])] == [
        Fate.ABORTED, Fate.CONTROL, Fate.DELIVER]


@settings(max_examples=300, deadline=None)
@given(ops_strategy, st.one_of(st.none(), st.booleans()), st.integers(0, 100),
       st.one_of(st.none(), st.integers(1, 40)), st.sets(st.integers(1, 60), max_size=4))
def test_filtering_matches_the_per_record_model(ops, close, start_pick, max_batches, segment_bases) -> None:
    if close is not None:  # end every transaction, so that the LSO reaches the log end
        ops = ops + [("end", pid, close) for pid in TXN_PIDS]
    log = build_log(ops)
    # the index entries, as the partition would have written them, split into segments by marker offset
    table = TxnStateTable()
    entries = table.replay(log.batches)
    table.on_high_watermark(log.leo)
    lso = table.last_stable_offset(log.leo)
    bases = sorted({0, *(b for b in segment_bases if b < max(log.leo, 1))})
    segments = [[e for e in entries if b <= e.last_offset < (bases[i + 1] if i + 1 < len(bases) else 1 << 62)]
                for i, b in enumerate(bases)]
    # a fetch from any offset up to the LSO, of whole batches, bounded by the LSO or by a size limit
    start = start_pick % (lso + 1)
    fetched = [(h, m) for h, m in log.batches if h.last_offset >= start and h.base_offset < lso]
    fetched = fetched[:max_batches]  # a fetch cut short by its size limit, or not
    upper = min(lso, fetched[-1][0].next_offset) if fetched else lso
    first_segment = max(i for i, b in enumerate(bases) if b <= start) if bases else 0
    aborted = [Aborted(e.producer_id, e.first_offset)
               for e in collect_across_segments(segments[first_segment:], start, upper)]

    want = {o for o in range(start, upper) if log.committed_offset(o)}
    present = {o for h, _ in fetched for o in range(h.base_offset, h.next_offset) if start <= o < upper}
    for plan in (plan_read_committed(classify_txn_batches(fetched, aborted), start, upper),
                 plan_read_committed(classify_batches([h for h, _ in fetched], aborted), start, upper)):
        delivered = {o for a, b in plan.deliver for o in range(a, b + 1)}
        archived = {o for a, b in plan.archive for o in range(a, b + 1)}
        assert delivered == want
        assert archived == present - want and not delivered & archived
        assert plan.aborted_records + plan.control_records == len(archived)
        for ranges in (plan.deliver, plan.archive):
            assert all(a <= b for a, b in ranges)
            assert all(x[1] + 1 < y[0] for x, y in zip(ranges, ranges[1:], strict=False))  # sorted, merged
