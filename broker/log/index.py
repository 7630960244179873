"""Sparse offset index (`.index`) and time index (`.timeindex`) of one segment.

File formats are Kafka's: `.index` entries are (relative offset int32, file position int32), `.timeindex` entries
are (timestamp int64, relative offset int32), big-endian. We append entries to the file as they are added (no
preallocation) and keep a copy in arrays for O(log n) bisect lookups, so the file is only opened (through the shared
`FileCache`) to be written or truncated. A file is created with its first entry; a missing file is an empty index. Loading accepts Kafka-style preallocated
files: only the longest prefix of strictly increasing entries is kept (a zero-filled tail is dropped) and the file
is trimmed to it.

Semantics (as Kafka's LogSegment.append): an offset entry (last offset of a batch, position of that batch) is added
for a batch that starts more than `index.interval.bytes` after the previous entry's batch; at the same moment a
time entry (largest timestamp so far, last offset of the batch holding it) is added if that timestamp grew.
"""

from __future__ import annotations

import contextlib
import os
import struct
from array import array
from bisect import bisect_left, bisect_right

from broker.log.files import INDEX_FLAGS, SHARED, FileCache

_OFFSET_ENTRY = struct.Struct(">ii")
_TIME_ENTRY = struct.Struct(">qi")


def _read_all(path: str) -> bytes:
    """The whole file, b"" if there is none (read with a descriptor of its own, closed at once)."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except FileNotFoundError:
        return b""
    try:
        size = os.fstat(fd).st_size
        chunks = []
        pos = 0
        while pos < size:
            chunk = os.pread(fd, size - pos, pos)
            if not chunk:
                break
            chunks.append(chunk)
            pos += len(chunk)
        return b"".join(chunks)
    finally:
        os.close(fd)


class _IndexFile:
    entry: struct.Struct

    def __init__(self, path: str, base_offset: int, files: FileCache | None = None) -> None:
        self.path = path
        self.base_offset = base_offset
        self.files = files if files is not None else SHARED  # an empty cache is falsy (__len__)
        # Written or cut since the last flush took it (see `take_unflushed`): a flush fsyncs only the files that
        # changed. True at first, so the first flush of a segment opened from disk syncs what loading trimmed.
        self.unflushed = True
        # The file may have been created since the last flush took this (see `take_created`): its name in the
        # directory must then be fsynced too.
        self.created = False

    @property
    def file_bytes(self) -> int:
        return len(self) * self.entry.size

    def __len__(self) -> int:  # pragma: no cover - overridden
        raise NotImplementedError

    def _load(self) -> bytes:
        return _read_all(self.path)

    def _trim_file(self, loaded: int) -> None:
        if loaded != self.file_bytes:
            os.truncate(self.path, self.file_bytes)
            self.unflushed = True

    def take_unflushed(self) -> bool:
        """True if the file changed since the last call (a flush is about to fsync it). Changes are flagged after
        they are made, so one flagged before this call is covered by the fsync that follows it."""
        if not self.unflushed:
            return False
        self.unflushed = False
        return True

    def _write(self, data: bytes, at: int) -> None:
        # The file is created by its first entry: most segments of most partitions never need one, and creating
        # files is what makes creating thousands of partitions slow.
        fd = self.files.acquire(self.path, INDEX_FLAGS | os.O_CREAT)
        start = at
        try:
            while data:
                n = os.pwrite(fd, data, at)
                data = data[n:]
                at += n
        except OSError:
            if at > start:  # a partial entry (disk full) must not stay behind the entries we know
                with contextlib.suppress(OSError):
                    os.ftruncate(fd, start)
            raise
        finally:
            self.files.release(self.path, fd)
            self.unflushed = True
            if start == 0:
                self.created = True

    def take_created(self) -> bool:
        """True if the file may have been created since the last call (its first entry was written)."""
        if not self.created:
            return False
        self.created = False
        return True

    def _truncate(self) -> None:
        with contextlib.suppress(FileNotFoundError):  # never written: nothing to cut
            os.truncate(self.path, self.file_bytes)
        self.unflushed = True

    def rollback(self, count: int) -> None:
        """Keep the first `count` entries, in memory and in the file (undoing a failed append). Raises OSError."""
        self._drop_after(count)
        with contextlib.suppress(FileNotFoundError):
            os.truncate(self.path, self.file_bytes)
        self.unflushed = True

    def _drop_after(self, count: int) -> None:  # pragma: no cover - overridden
        raise NotImplementedError

    def close(self) -> None:
        self.files.forget(self.path)


class OffsetIndex(_IndexFile):
    entry = _OFFSET_ENTRY

    def __init__(self, path: str, base_offset: int, files: FileCache | None = None) -> None:
        super().__init__(path, base_offset, files)
        self.rel = array("i")
        self.pos = array("i")
        data = self._load()
        unpack = _OFFSET_ENTRY.unpack_from
        last_rel = last_pos = -1
        for at in range(0, len(data) - len(data) % 8, 8):
            rel, position = unpack(data, at)
            if rel <= last_rel or position <= last_pos:
                break
            self.rel.append(rel)
            self.pos.append(position)
            last_rel, last_pos = rel, position
        self._trim_file(len(data))

    def __len__(self) -> int:
        return len(self.rel)

    def append(self, offset: int, position: int) -> None:
        rel = offset - self.base_offset
        if self.rel and (rel <= self.rel[-1] or position <= self.pos[-1]):
            return
        self._write(_OFFSET_ENTRY.pack(rel, position), self.file_bytes)
        self.rel.append(rel)
        self.pos.append(position)

    def _drop_after(self, count: int) -> None:
        del self.rel[count:]
        del self.pos[count:]

    def lookup(self, offset: int) -> tuple[int, int]:
        """(offset, position) of the last entry with offset <= `offset`; (base offset, 0) when there is none."""
        i = bisect_right(self.rel, offset - self.base_offset) - 1
        if i < 0:
            return self.base_offset, 0
        return self.base_offset + self.rel[i], self.pos[i]

    def entry_at(self, i: int) -> tuple[int, int]:
        return self.base_offset + self.rel[i], self.pos[i]

    def truncate_entries(self, count: int) -> None:
        """Keep the first `count` entries."""
        if count < len(self.rel):
            del self.rel[count:]
            del self.pos[count:]
            self._truncate()

    def truncate_to_position(self, position: int) -> None:
        """Drop entries pointing at or past `position`."""
        self.truncate_entries(bisect_left(self.pos, position))

    def truncate_to_offset(self, offset: int) -> None:
        """Drop entries with offset >= `offset`."""
        self.truncate_entries(bisect_left(self.rel, offset - self.base_offset))


class TimeIndex(_IndexFile):
    entry = _TIME_ENTRY

    def __init__(self, path: str, base_offset: int, files: FileCache | None = None) -> None:
        super().__init__(path, base_offset, files)
        self.ts = array("q")
        self.rel = array("i")
        data = self._load()
        unpack = _TIME_ENTRY.unpack_from
        last_ts, last_rel = -(1 << 63), -1
        for at in range(0, len(data) - len(data) % 12, 12):
            ts, rel = unpack(data, at)
            if ts <= last_ts or rel < last_rel or (ts == 0 and rel == 0 and self.ts):
                break
            self.ts.append(ts)
            self.rel.append(rel)
            last_ts, last_rel = ts, rel
        self._trim_file(len(data))

    def __len__(self) -> int:
        return len(self.ts)

    @property
    def last(self) -> tuple[int, int] | None:
        """(timestamp, offset) of the last entry."""
        if not self.ts:
            return None
        return self.ts[-1], self.base_offset + self.rel[-1]

    def maybe_append(self, timestamp: int, offset: int) -> None:
        """Add (timestamp, offset) if the timestamp is larger than the last entry's."""
        if self.ts and timestamp <= self.ts[-1]:
            return
        rel = offset - self.base_offset
        if self.rel and rel < self.rel[-1]:
            return
        self._write(_TIME_ENTRY.pack(timestamp, rel), self.file_bytes)
        self.ts.append(timestamp)
        self.rel.append(rel)

    def _drop_after(self, count: int) -> None:
        del self.ts[count:]
        del self.rel[count:]

    def last_at_or_before(self, offset: int) -> tuple[int, int] | None:
        """(timestamp, offset) of the last entry whose offset is <= `offset`, or None."""
        i = bisect_right(self.rel, offset - self.base_offset) - 1
        if i < 0:
            return None
        return self.ts[i], self.base_offset + self.rel[i]

    def lookup_before(self, timestamp: int) -> int | None:
        """Offset of the last entry with a timestamp < `timestamp`: every batch up to and including the batch
        holding that offset has maxTimestamp < `timestamp`. None when there is no such entry."""
        i = bisect_left(self.ts, timestamp) - 1
        if i < 0:
            return None
        return self.base_offset + self.rel[i]

    def truncate_after_offset(self, offset: int) -> None:
        """Drop entries with offset > `offset`."""
        i = bisect_right(self.rel, offset - self.base_offset)
        if i < len(self.ts):
            del self.ts[i:]
            del self.rel[i:]
            self._truncate()
