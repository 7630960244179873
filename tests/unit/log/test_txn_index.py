"""Aborted-transaction index: Kafka's 34-byte entries, collection over a fetch range, truncation, torn tails."""

from __future__ import annotations

import struct
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from broker.log.files import FileCache
from broker.log.txn_index import (
    ENTRY_SIZE,
    AbortedTxn,
    CorruptTxnIndexError,
    TxnIndex,
    collect_aborted_txns,
    collect_across_segments,
    decode_entries,
    encode_entry,
)


def kafka_entry(pid: int, first: int, last: int, lso: int, version: int = 0) -> bytes:
    """Kafka's AbortedTxn buffer: version int16, producerId, firstOffset, lastOffset, lastStableOffset int64s."""
    return (version.to_bytes(2, "big", signed=True) + pid.to_bytes(8, "big", signed=True)
            + first.to_bytes(8, "big", signed=True) + last.to_bytes(8, "big", signed=True)
            + lso.to_bytes(8, "big", signed=True))


@pytest.fixture
def files() -> FileCache:
    cache = FileCache(16)
    yield cache
    cache.close()


def test_entry_bytes_are_kafkas() -> None:
    txn = AbortedTxn(producer_id=0x0102030405060708, first_offset=100, last_offset=250, last_stable_offset=90)
    raw = encode_entry(txn)
    assert raw == kafka_entry(0x0102030405060708, 100, 250, 90)
    assert raw.hex() == ("0000" "0102030405060708" "0000000000000064" "00000000000000fa" "000000000000005a")
    assert len(raw) == ENTRY_SIZE == 34
    assert decode_entries(raw, 0) == ([txn], 34)


def test_append_reload_and_file_bytes(tmp_path: Path, files: FileCache) -> None:
    path = str(tmp_path / "00000000000000000100.txnindex")
    idx = TxnIndex(path, 100, files)
    assert len(idx) == 0 and not Path(path).exists()  # created by its first entry
    a = AbortedTxn(7, 90, 105, 90)
    b = AbortedTxn(8, 101, 120, 106)
    idx.append(a)
    idx.append(b)
    with pytest.raises(ValueError):
        idx.append(AbortedTxn(9, 110, 120, 121))  # marker not after the last one
    with pytest.raises(ValueError):
        TxnIndex(str(tmp_path / "other.txnindex"), 100, files).append(AbortedTxn(9, 10, 99, 100))
    assert Path(path).read_bytes() == kafka_entry(7, 90, 105, 90) + kafka_entry(8, 101, 120, 106)
    idx.close()
    again = TxnIndex(path, 100, files)
    assert again.all_aborted_txns() == [a, b] and again.last_offset == 120


def test_truncate_to(tmp_path: Path, files: FileCache) -> None:
    path = tmp_path / "00000000000000000000.txnindex"
    idx = TxnIndex(str(path), 0, files)
    txns = [AbortedTxn(1, 0, 5, 0), AbortedTxn(2, 3, 9, 3), AbortedTxn(3, 10, 14, 15)]
    for t in txns:
        idx.append(t)
    idx.truncate_to(10)  # markers at 10 and later go
    assert idx.all_aborted_txns() == txns[:2] and path.stat().st_size == 2 * ENTRY_SIZE
    idx.truncate_to(9)
    assert idx.all_aborted_txns() == txns[:1] and path.stat().st_size == ENTRY_SIZE
    idx.truncate_to(100)
    assert len(idx) == 1
    idx.reset()
    assert len(idx) == 0 and path.stat().st_size == 0
    idx.append(AbortedTxn(4, 20, 21, 20))  # appends continue after a truncation
    assert TxnIndex(str(path), 0, files).all_aborted_txns() == [AbortedTxn(4, 20, 21, 20)]


def test_rollback_undoes_appends(tmp_path: Path, files: FileCache) -> None:
    path = tmp_path / "00000000000000000000.txnindex"
    idx = TxnIndex(str(path), 0, files)
    idx.append(AbortedTxn(1, 0, 5, 0))
    idx.append(AbortedTxn(2, 6, 8, 9))
    idx.rollback(1)
    assert len(idx) == 1 and path.stat().st_size == ENTRY_SIZE


@pytest.mark.parametrize("tail", [b"\x00\x00\x00", kafka_entry(9, 40, 45, 46)[:33], bytes(ENTRY_SIZE),
                                  bytes(ENTRY_SIZE * 3 + 5)])
def test_torn_tail_is_cut_on_open(tmp_path: Path, files: FileCache, tail: bytes) -> None:
    path = tmp_path / "00000000000000000010.txnindex"
    good = kafka_entry(1, 5, 12, 5) + kafka_entry(2, 13, 20, 21)
    path.write_bytes(good + tail)
    idx = TxnIndex(str(path), 10, files)
    assert idx.all_aborted_txns() == [AbortedTxn(1, 5, 12, 5), AbortedTxn(2, 13, 20, 21)]
    assert path.read_bytes() == good
    idx.append(AbortedTxn(3, 21, 30, 31))
    assert path.stat().st_size == 3 * ENTRY_SIZE


@pytest.mark.parametrize("bad", [
    kafka_entry(1, 5, 12, 5, version=1),  # unknown version
    kafka_entry(1, 5, 9, 5),  # marker before the segment's base offset (10)
    kafka_entry(1, 13, 12, 13),  # starts after its marker
    kafka_entry(1, 5, 12, 5) + kafka_entry(2, 6, 12, 13),  # markers not increasing
])
def test_inconsistent_index_is_corrupt(tmp_path: Path, files: FileCache, bad: bytes) -> None:
    path = tmp_path / "00000000000000000010.txnindex"
    path.write_bytes(bad)
    with pytest.raises(CorruptTxnIndexError):
        TxnIndex(str(path), 10, files)


def test_collect_stops_at_the_lso_reaching_the_upper_bound() -> None:
    entries = [AbortedTxn(1, 0, 10, 0), AbortedTxn(2, 5, 20, 11), AbortedTxn(3, 21, 30, 31),
               AbortedTxn(4, 25, 40, 31)]
    assert collect_aborted_txns(entries, 11, 25) == ([entries[1], entries[2]], True)  # entry 3's LSO 31 >= 25
    assert collect_aborted_txns(entries, 0, 5) == ([entries[0]], True)  # entry 2's LSO 11 >= 5
    assert collect_aborted_txns(entries[:2], 0, 11) == ([entries[0], entries[1]], True)  # LSO 11 == upper
    assert collect_aborted_txns(entries, 31, 100) == ([entries[3]], False)
    assert collect_aborted_txns(entries, 41, 100) == ([], False)
    # across segments: the search goes on into the next segment until complete, and no further
    seg2 = [AbortedTxn(5, 35, 50, 41), AbortedTxn(6, 60, 70, 71)]

    def never():
        raise AssertionError("read past a complete search")
        yield

    assert collect_across_segments([entries, seg2, never()], 32, 45) == [entries[3], seg2[0]]


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 3), st.integers(0, 6), st.integers(1, 6)), max_size=12),
       st.integers(0, 60), st.integers(1, 30))
def test_collect_finds_every_overlapping_abort(spec, fetch, length) -> None:
    """Build a log of transactions (pid, start gap, length), abort them all, and compare the collected entries
    with every transaction overlapping the range, whatever the LSOs (as the tracker computes them)."""
    txns: list[AbortedTxn] = []
    offset = 0
    open_txns: dict[int, int] = {}
    for pid, gap, size in spec:
        offset += gap
        if pid in open_txns:  # end the producer's open transaction at this offset
            first = open_txns.pop(pid)
            others = sorted(open_txns.values())
            txns.append(AbortedTxn(pid, first, offset, others[0] if others else offset + 1))
            offset += 1
        open_txns[pid] = offset
        offset += size
    upper = fetch + length
    got, _ = collect_aborted_txns(txns, fetch, upper)
    want = [t for t in txns if t.first_offset < upper and t.last_offset >= fetch]
    assert got == want


def test_decode_rejects_garbage_but_not_a_partial_entry() -> None:
    assert decode_entries(b"\x01" * 20, 0) == ([], 0)
    with pytest.raises(CorruptTxnIndexError):
        decode_entries(struct.pack(">hqqqq", 0, 1, 2, 3, 4) + struct.pack(">hqqqq", 0, 1, 2, 3, 4), 0)
