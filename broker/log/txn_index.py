"""Aborted-transaction index (`.txnindex`) of one segment, in Kafka's file format.

One entry per aborted transaction whose ABORT marker is in the segment, in marker order (Kafka's AbortedTxn):
version int16 (0), producerId int64, firstOffset int64, lastOffset int64 (the marker's offset),
lastStableOffset int64 (the LSO when the marker was written) - 34 bytes, big-endian. A transaction may start in
an earlier segment, so firstOffset can be below the segment's base offset.

A read_committed fetch of [start, upper) asks every segment from the one holding `start` for the aborted
transactions overlapping the range (Kafka's collectAbortedTxns), and stops at the first entry whose
lastStableOffset reaches `upper`: every transaction aborted later started at or after that LSO, so past the range.

The file is created by its first entry (most segments never abort anything) and mirrored in memory: aborted
transactions are rare, so the entries are few. Opening checks the file: a torn tail (a partial entry, or zeroed
entries left by a crash after the size grew) is cut off; any other inconsistency raises CorruptTxnIndexError, and
the caller rebuilds the index from the segment (as Kafka does after its sanityCheck fails).
"""

from __future__ import annotations

import struct
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

from broker.log.files import FileCache
from broker.log.index import _IndexFile

__all__ = [
    "ENTRY_SIZE",
    "AbortedTxn",
    "CorruptTxnIndexError",
    "TxnIndex",
    "collect_aborted_txns",
    "collect_across_segments",
    "decode_entries",
    "encode_entry",
]

_ENTRY = struct.Struct(">hqqqq")
ENTRY_SIZE = _ENTRY.size  # 34
CURRENT_VERSION = 0
_ZERO_ENTRY = bytes(ENTRY_SIZE)


class CorruptTxnIndexError(Exception):
    """The index holds entries that cannot be right: it must be rebuilt from its segment."""


@dataclass(frozen=True, slots=True)
class AbortedTxn:
    producer_id: int
    first_offset: int
    last_offset: int  # offset of the ABORT marker
    last_stable_offset: int


def encode_entry(txn: AbortedTxn) -> bytes:
    return _ENTRY.pack(CURRENT_VERSION, txn.producer_id, txn.first_offset, txn.last_offset, txn.last_stable_offset)


def decode_entries(data: bytes | bytearray | memoryview, base_offset: int) -> tuple[list[AbortedTxn], int]:
    """The entries of an index file's bytes and how many bytes they take (the rest is a torn tail).

    Raises CorruptTxnIndexError for an entry of an unknown version, one ending before the segment's base offset
    or starting after its own marker, or entries whose markers do not strictly increase."""
    usable = len(data) - len(data) % ENTRY_SIZE
    while usable and data[usable - ENTRY_SIZE:usable] == _ZERO_ENTRY:
        usable -= ENTRY_SIZE  # zeroed blocks past the last write (the size grew, the data did not land)
    entries: list[AbortedTxn] = []
    last = None
    for at in range(0, usable, ENTRY_SIZE):
        version, pid, first, last_offset, lso = _ENTRY.unpack_from(data, at)
        if version != CURRENT_VERSION:
            raise CorruptTxnIndexError(f"entry at byte {at} has version {version}")
        if last_offset < base_offset or first > last_offset:
            raise CorruptTxnIndexError(f"entry at byte {at} spans offsets {first}-{last_offset}, "
                                       f"not ending in the segment starting at {base_offset}")
        if last is not None and last_offset <= last:
            raise CorruptTxnIndexError(f"entry at byte {at} ends at offset {last_offset}, not after {last}")
        entries.append(AbortedTxn(pid, first, last_offset, lso))
        last = last_offset
    return entries, usable


def collect_aborted_txns(entries: Iterable[AbortedTxn], fetch_offset: int,
                         upper_bound_offset: int) -> tuple[list[AbortedTxn], bool]:
    """The entries overlapping [fetch_offset, upper_bound_offset), and whether the search is complete (an entry's
    LSO reached the upper bound: later segments cannot hold an overlapping one)."""
    found = []
    for txn in entries:
        if txn.last_offset >= fetch_offset and txn.first_offset < upper_bound_offset:
            found.append(txn)
        if txn.last_stable_offset >= upper_bound_offset:
            return found, True
    return found, False


def collect_across_segments(indexes: Iterable[Iterable[AbortedTxn]], fetch_offset: int,
                            upper_bound_offset: int) -> list[AbortedTxn]:
    """Kafka's LocalLog.collectAbortedTransactions: `indexes` are the entries of the segment holding
    `fetch_offset` and of each later segment, in order (taken lazily: the walk stops once complete)."""
    found: list[AbortedTxn] = []
    for entries in indexes:
        part, complete = collect_aborted_txns(entries, fetch_offset, upper_bound_offset)
        found += part
        if complete:
            break
    return found


class TxnIndex(_IndexFile):
    """The `.txnindex` file of the segment starting at `base_offset` (its path is the caller's: Kafka names it
    `<base offset:020d>.txnindex`)."""

    entry = _ENTRY

    def __init__(self, path: str, base_offset: int, files: FileCache | None = None) -> None:
        super().__init__(path, base_offset, files)
        data = self._load()
        self.entries, _usable = decode_entries(data, base_offset)
        self._trim_file(len(data))  # cut a torn tail off (no-op when none)

    def __len__(self) -> int:
        return len(self.entries)

    def __iter__(self) -> Iterator[AbortedTxn]:
        return iter(self.entries)

    @property
    def last_offset(self) -> int | None:
        return self.entries[-1].last_offset if self.entries else None

    def append(self, txn: AbortedTxn) -> None:
        """Add the entry of an aborted transaction whose marker is in this segment. Raises ValueError if its
        marker is not after the last one's (as Kafka's), OSError if the write fails (nothing is then added)."""
        if self.entries and txn.last_offset <= self.entries[-1].last_offset:
            raise ValueError(f"aborted transaction ending at {txn.last_offset} does not follow the last one, "
                             f"ending at {self.entries[-1].last_offset}, in {self.path}")
        if txn.last_offset < self.base_offset:
            raise ValueError(f"aborted transaction ending at {txn.last_offset} is before the segment's base "
                             f"offset {self.base_offset}")
        self._write(encode_entry(txn), self.file_bytes)
        self.entries.append(txn)

    def all_aborted_txns(self) -> list[AbortedTxn]:
        return list(self.entries)

    def collect(self, fetch_offset: int, upper_bound_offset: int) -> tuple[list[AbortedTxn], bool]:
        return collect_aborted_txns(self.entries, fetch_offset, upper_bound_offset)

    def truncate_to(self, offset: int) -> None:
        """Drop the entries whose marker is at or after `offset` (the log is cut back to `offset`)."""
        keep = len(self.entries)
        while keep and self.entries[keep - 1].last_offset >= offset:
            keep -= 1
        if keep < len(self.entries):
            del self.entries[keep:]
            self._truncate()

    def reset(self) -> None:
        """Drop every entry (before a rebuild from the segment)."""
        self.truncate_to(-1)

    def _drop_after(self, count: int) -> None:
        del self.entries[count:]
