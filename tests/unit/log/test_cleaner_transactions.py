"""The log cleaner with transactions, as Kafka's LogCleaner: never past the last stable offset, aborted batches
removed (and kept out of the key map), markers kept while their transaction has batches in the log, then given a
delete horizon and removed after `delete.retention.ms`, the cleaned segment's `.txnindex` holding the aborted
transactions it keeps, and a crash at any step of the swap leaving the log and its `.txnindex` consistent."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from broker.log import swap
from broker.log.cleaner import InlineWorker, LogCleaner
from broker.log.txn_index import AbortedTxn, TxnIndex
from broker.log.txn_state import TxnStateTable
from protocol import control_records as cr
from protocol import records as rec
from tests.unit.log.cleaner_helpers import (
    COMMITTED,
    START_MS,
    STEPS,
    Harness,
    append,
    compact_config,
    latest_view,
    read_all,
)

DAY = 86_400_000
COMMITTER, ABORTER, OPENER = 1, 2, 3


class TxnHarness(Harness):
    """A compacted log written as the replica manager writes it: a TxnStateTable follows the appends, aborts go
    to the `.txnindex`, and the cleaner is bounded by the table's last stable offset."""

    def __init__(self, tmp: Path, *, producers: dict[int, int] | None = None, **config) -> None:
        super().__init__(tmp, compact_config(**config),
                         producers=(lambda _t, _p, _n: producers) if producers is not None else None)
        self.table = TxnStateTable()
        self.sequences: dict[int, int] = {}
        self.asked_lso: list[int] = []

    def data(self, pid: int, items: list[tuple[bytes, bytes | None]], *, transactional: bool = True) -> int:
        seq = self.sequences.get(pid, 0)
        base, _last = append(self.log, items, producer_id=pid, producer_epoch=0, base_sequence=seq,
                             transactional=transactional, ts=self.clock.ms)
        self.sequences[pid] = seq + len(items)
        self.table.on_append(rec.read_header(self.log.read(base, 1 << 20).data))
        return base

    def end(self, pid: int, commit: bool) -> int:
        raw = cr.build_end_txn_marker(producer_id=pid, producer_epoch=0, commit=commit, coordinator_epoch=0,
                                      timestamp=self.clock.ms)
        offset = self.log.append(raw).base_offset
        aborted = self.table.on_marker(pid, 0, commit, offset, 0, self.clock.ms)
        if aborted is not None:
            self.log.append_aborted_txn(aborted)
        return offset

    def lso(self, topic: str, partition: int) -> int:
        value = self.table.last_stable_offset(self.log.high_watermark, self.log.log_start_offset)
        self.asked_lso.append(value)
        return value

    def new_cleaner(self) -> LogCleaner:
        return LogCleaner(self.manager, self.cleaner_config, clock=self.clock, worker=InlineWorker,
                          producer_last_offsets=self.producers, last_stable_offset=self.lso)

    def dirty(self) -> None:
        """A new record in a segment of its own, so the next pass has something to clean."""
        append(self.log, [(b"filler", b"%d" % self.clock.ms)], ts=self.clock.ms)
        self.log.roll()


def committed_view(h: Harness, lso: int | None = None) -> dict[bytes, bytes]:
    """What a read_committed consumer's table holds: records below the LSO (default: the log end), aborted batches
    (by the log's `.txnindex`) and markers skipped."""
    upper = h.log.log_end_offset if lso is None else lso
    aborted = h.log.collect_aborted_txns(h.log.log_start_offset, upper)
    kept = []
    for header, recs in read_all(h.log):
        if header.is_control or header.base_offset >= upper:
            continue
        if header.is_transactional and any(t.producer_id == header.producer_id
                                           and t.first_offset <= header.base_offset <= t.last_offset
                                           for t in aborted):
            continue
        kept += recs
    return latest_view(kept)


def values(h: Harness) -> list[bytes | None]:
    return [r.value for hd, rs in read_all(h.log) if not hd.is_control for r in rs]


def markers(h: Harness) -> list[tuple[int, rec.BatchHeader]]:
    return [(hd.base_offset, hd) for hd, _ in read_all(h.log) if hd.is_control]


def build(h: TxnHarness) -> dict[str, int]:
    """Committed, aborted and open transactions, and plain records, in three segments and the active one."""
    at = {}
    h.data(COMMITTER, [(b"a", b"a-committed"), (b"b", b"b-committed-1")])
    at["commit1"] = h.end(COMMITTER, True)
    at["abort_data"] = h.data(ABORTER, [(b"a", b"a-aborted"), (b"c", b"c-aborted")])
    h.data(COMMITTER, [(b"b", b"b-committed-2")])
    h.data(ABORTER, [(b"d", b"d-aborted")])
    at["abort"] = h.end(ABORTER, False)
    at["commit2"] = h.end(COMMITTER, True)
    append(h.log, [(b"p", b"plain")], ts=h.clock.ms)
    h.log.roll()
    append(h.log, [(b"q", b"q-plain")], ts=h.clock.ms)
    at["open"] = h.data(OPENER, [(b"a", b"a-open"), (b"e", b"e-open")])  # open in the middle of a segment
    h.log.roll()
    h.data(OPENER, [(b"f", b"f-open")])
    h.log.roll()
    return at


def test_aborted_records_go_committed_stay_and_an_open_transaction_is_not_touched(tmp_path: Path) -> None:
    h = TxnHarness(tmp_path, producers={})
    at = build(h)
    untouched = [(s.base_offset, s.read_bytes(0, s.size)) for s in h.log.segments[1:]]
    entries = h.log.segments[0].txn_index.entries[:]
    assert [(e.producer_id, e.first_offset, e.last_offset) for e in entries] == [(ABORTER, at["abort_data"],
                                                                                   at["abort"])]
    assert h.clean()
    assert h.asked_lso == [at["open"]]
    # only the segment below the one holding the LSO was cleaned
    assert [(s.base_offset, s.read_bytes(0, s.size)) for s in h.log.segments[1:]] == untouched
    assert h.cleaner is not None and h.cleaner.checkpoints[("t", 0)] == h.log.segments[1].base_offset
    got = values(h)
    assert not [v for v in got if v is not None and v.endswith(b"-aborted")]
    # the aborted `a` did not enter the map: the committed `a` below it survives; `b` is compacted
    assert got[:3] == [b"a-committed", b"b-committed-2", b"plain"]
    assert b"a-open" in got and b"e-open" in got and b"f-open" in got
    # both commit markers saw their batches and the abort saw its own: all stay, without a delete horizon
    assert [(o, hd.has_delete_horizon) for o, hd in markers(h)] == [
        (at["commit1"], False), (at["abort"], False), (at["commit2"], False)]
    cleaned = h.log.segments[0]
    assert cleaned.txn_index.entries == entries  # carried over as it was
    on_disk = TxnIndex(cleaned.txn_index.path, cleaned.base_offset)
    assert on_disk.entries == cleaned.txn_index.entries and cleaned.txn_index.path.endswith(".txnindex")
    assert committed_view(h, at["open"]) == {b"a": b"a-committed", b"b": b"b-committed-2", b"p": b"plain",
                                 b"q": b"q-plain"}


def test_markers_get_a_delete_horizon_once_their_data_is_gone_and_go_after_delete_retention(tmp_path: Path) -> None:
    h = TxnHarness(tmp_path, producers={}, delete_retention_ms=DAY)
    at = build(h)
    assert h.clean()
    h.end(OPENER, True)  # the open transaction commits: the LSO moves to the log end
    append(h.log, [(b"a", b"a-plain"), (b"b", b"b-plain")], ts=h.clock.ms)  # the committed data is superseded
    h.log.roll()
    assert h.clean()
    # the abort marker's data went in the first pass; the commit markers' data goes in this one
    horizon = {o: hd.has_delete_horizon for o, hd in markers(h)}
    assert horizon[at["abort"]] is True and horizon[at["commit1"]] is False and horizon[at["commit2"]] is False
    assert h.log.segments[0].txn_index.entries == []  # the abort has no batch left: its entry is not carried
    abort = dict(markers(h))[at["abort"]]
    assert abort.base_timestamp == START_MS + DAY and abort.records_count == 1
    h.dirty()
    assert h.clean()
    horizon = {o: hd.has_delete_horizon for o, hd in markers(h)}
    assert horizon[at["abort"]] and horizon[at["commit1"]] and horizon[at["commit2"]]
    h.clock.ms += DAY - 1
    h.dirty()
    assert h.clean()
    assert at["abort"] in dict(markers(h))  # not yet
    h.clock.ms += DAY
    h.dirty()
    assert h.clean()
    left = dict(markers(h))
    assert at["abort"] not in left and at["commit1"] not in left and at["commit2"] not in left
    assert committed_view(h) == latest_view([r for hd, rs in read_all(h.log) if not hd.is_control for r in rs])
    assert committed_view(h)[b"a"] == b"a-plain" and committed_view(h)[b"e"] == b"e-open"


def test_an_active_producers_last_aborted_batch_stays_as_an_empty_header(tmp_path: Path) -> None:
    h = TxnHarness(tmp_path, producers={})
    h.data(ABORTER, [(b"x", b"x-aborted")])
    h.end(ABORTER, False)
    h.log.roll()
    h.producers = lambda _t, _p, _n: {ABORTER: 0}  # the broker's producer state: its last batch ends at 0
    assert h.clean()
    first, marker = read_all(h.log)[:2]
    header, recs = first
    assert recs == [] and (header.base_offset, header.producer_id, header.base_sequence) == (0, ABORTER, 0)
    assert header.is_transactional and not header.is_control
    assert marker[0].is_control and h.log.segments[0].txn_index.entries == [AbortedTxn(ABORTER, 0, 1, 2)]
    h.dirty()
    assert h.clean()  # the empty batch is still a batch of the transaction: marker and entry stay
    assert h.log.segments[0].txn_index.entries == [AbortedTxn(ABORTER, 0, 1, 2)]
    assert not markers(h)[0][1].has_delete_horizon


def test_an_abort_whose_marker_is_not_yet_cleanable_still_removes_its_batches(tmp_path: Path) -> None:
    h = TxnHarness(tmp_path, producers={})
    h.data(ABORTER, [(b"k", b"k-aborted")])
    append(h.log, [(b"k2", b"plain")], ts=h.clock.ms)
    h.log.roll()
    append(h.log, [(b"z", b"z")], ts=h.clock.ms)
    marker = h.end(ABORTER, False)  # in the active segment, which is never cleaned
    assert h.clean()
    assert values(h) == [b"plain", b"z"]
    assert h.log.segments[0].txn_index.entries == []
    assert [e.last_offset for e in h.log.segments[-1].txn_index.entries] == [marker]


def test_a_later_transaction_of_a_producer_that_aborted_before_the_dirty_range_is_mapped(tmp_path: Path) -> None:
    h = TxnHarness(tmp_path, producers={})
    h.data(ABORTER, [(b"k", b"k-aborted")])
    h.end(ABORTER, False)
    h.log.roll()
    assert h.clean()
    h.data(ABORTER, [(b"k", b"k-committed")])
    h.end(ABORTER, True)
    h.log.roll()
    assert h.clean()
    assert committed_view(h) == {b"k": b"k-committed"}
    assert b"k-aborted" not in values(h)


@pytest.mark.parametrize("step", STEPS)
def test_a_crash_at_any_swap_step_keeps_the_txnindex_consistent(tmp_path: Path, monkeypatch, step: str) -> None:
    h = TxnHarness(tmp_path, producers={}, index_interval_bytes=100)
    at = build(h)
    h.end(OPENER, False)
    h.log.roll()
    expected = committed_view(h)
    assert b"a-open" not in expected.values()

    class Crash(BaseException):
        pass

    def hook(name: str) -> None:
        if name == step:
            raise Crash(name)

    monkeypatch.setattr(swap, "CRASH_HOOK", hook)
    with pytest.raises(Crash):
        h.clean()
    monkeypatch.setattr(swap, "CRASH_HOOK", None)
    h.crash()
    h.reopen()
    assert committed_view(h) == expected
    swapped = b"a-aborted" not in values(h)
    assert swapped == (STEPS.index(step) >= COMMITTED)
    # whether the swap happened or not, the segment holding the abort marker indexes it
    holder = next(s for s in reversed(h.log.segments) if s.base_offset <= at["abort"])
    assert [(e.producer_id, e.last_offset) for e in holder.txn_index.entries][:1] == [(ABORTER, at["abort"])]
    assert not [p for p in h.log.directory.iterdir() if p.name.endswith((".cleaned", ".swap", ".deleted"))]
    h.dirty()
    assert h.clean()  # and cleaning goes on from there
    assert committed_view(h) == {**expected, b"filler": b"%d" % h.clock.ms}
    assert not [v for v in values(h) if v is not None and v.endswith((b"-aborted", b"-open"))]


def test_without_a_known_lso_the_log_is_not_cleaned(tmp_path: Path) -> None:
    h = TxnHarness(tmp_path)
    append(h.log, [(b"a", b"1")])
    append(h.log, [(b"a", b"2")])
    h.log.roll()
    loaded: list[list[tuple[str, int]]] = []

    async def load(keys: list[tuple[str, int]]) -> None:
        loaded.append(keys)

    def unknown(_topic: str, _partition: int) -> int:
        raise KeyError("no such partition")

    async def run() -> bool:
        cleaner = LogCleaner(h.manager, h.cleaner_config, clock=h.clock, worker=InlineWorker,
                             last_stable_offset=unknown, load_partition_state=load)
        try:
            return await cleaner.clean_once()
        finally:
            await cleaner.close()

    assert asyncio.run(run()) is False
    assert loaded == [[("t", 0)]]
